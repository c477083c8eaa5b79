"""``ONNXProgram``: the exported (or loaded) model; saves it crash-consistently, with external
data when needed, and runs it in ONNX Runtime on torch inputs."""

from __future__ import annotations

import functools
import io
import os
import re
import stat
import sys
import tempfile
from typing import Any, Sequence

import numpy as np
import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import TorchTensor

from onnxport.checkpoints import CheckpointTensor
from onnxport.diagnostics import Recorder, write_sarif
from onnxport.errors import InvalidExportOptionsError
from onnxport.serialize import (ExternalSlice, check_external_location, external_tensors,
                                forget_header, write_external_data, write_model)
from onnxport.tensor_values import as_numpy, on_cpu

# Protobuf cannot hold a message of 2 GB; leave room for the graph itself.
PROTOBUF_LIMIT = 2**31 - 64 * 2**20


class ONNXRuntimeOptions:
    """Options for running the program in ONNX Runtime."""

    def __init__(self, *, session_options=None, execution_providers=None,
                 execution_provider_options=None):
        self.session_options = session_options
        self.execution_providers = execution_providers
        self.execution_provider_options = execution_provider_options


class ONNXProgram:
    """An exported ONNX model, with the torch program it came from."""

    def __init__(self, model: ir.Model, exported_program=None, *, input_names: Sequence[str] = (),
                 output_names: Sequence[str] = ()):
        self.model = model
        self.exported_program = exported_program
        self.input_names = list(input_names)
        self.output_names = list(output_names)
        # The inputs that number arguments became (translate.number_inputs), by position
        self.number_inputs: list = []
        # The call's inputs (tensors and numbers, flat) the graph does not read, by position:
        # no graph inputs (translate.unread_inputs), still arguments of a call
        self.unread_inputs: list[int] = []
        self._session = None
        # What the export reported (decompositions, fallbacks, warnings, stage timings).
        self.diagnostics = Recorder()

    # -- the model -----------------------------------------------------------------------
    @property
    def model_proto(self):
        """The model as an ``onnx.ModelProto`` (weights included)."""
        return ir.to_proto(self.model)

    def weights_size(self) -> int:
        return sum(v.const_value.nbytes for v in self.model.graph.initializers.values()
                   if v.const_value is not None)

    def __repr__(self) -> str:
        return f"ONNXProgram({len(self.model.graph)} nodes, inputs={self.input_names}, " \
               f"outputs={self.output_names})"

    @classmethod
    def load(cls, path: str | os.PathLike) -> "ONNXProgram":
        """An ``ONNXProgram`` over an existing ``.onnx`` file, to run it or save it elsewhere.

        External weights must be files in the model's folder (no absolute paths, ``..`` or
        symlinks out): they are read from there when the program runs or is saved, and copied
        into what ``save`` writes."""
        path = os.path.abspath(os.fspath(path))
        if not os.path.isfile(path):
            raise InvalidExportOptionsError(f"cannot load {path!r}: no such file")
        model = ir.load(path)
        for tensor in external_tensors(model):
            check_external_location(tensor)
        _read_nested_external_tensors(model)
        return cls(model, None, input_names=[v.name for v in model.graph.inputs],
                   output_names=[v.name for v in model.graph.outputs])

    def save_diagnostics(self, destination: str | os.PathLike) -> None:
        """Write what the export reported as a SARIF 2.1.0 log (JSON)."""
        from onnxport._version import __version__

        write_sarif(self.diagnostics, destination, tool_version=__version__)

    # -- saving ----------------------------------------------------------------------------
    def save(self, destination: str | os.PathLike | io.IOBase, *, include_initializers: bool = True,
             model_state: dict | str | os.PathLike | None = None, serializer=None,
             external_data: bool | None = None) -> None:
        """Write the model to a path or a binary file object.

        ``external_data=None`` keeps one self-contained file while the weights fit in protobuf
        and puts them in a side file above that, named after its content
        (``<name>.<sha256 prefix>.data``): the side file is complete before the model that
        points at it replaces the old one, so an interrupted save leaves the old pair or the
        new one, never a mix. ``model_state`` (a state dict, or a ``torch.save`` or
        ``.safetensors`` file) replaces weights by name first; names the model has no
        initializer for, and shapes or dtypes that differ, are refused before anything changes.
        """
        _check_save_arguments(destination, include_initializers, model_state, serializer,
                              external_data)
        # Weights read from a file are copied into what is written: check where they come from.
        for tensor in external_tensors(self.model):
            check_external_location(tensor)
        if model_state is not None:
            self._apply_state(model_state)
        if serializer is not None:
            if isinstance(destination, (str, os.PathLike)):
                with _atomic_path(destination) as temporary:
                    with open(temporary, "wb") as stream:
                        serializer.serialize(self, stream)
                        _flush_to_disk(stream)
            else:
                serializer.serialize(self, destination)
            return
        if _read_nested_external_tensors(self.model):
            forget_header()  # (the model changed: serialized again)
        too_big = include_initializers and self.weights_size() > PROTOBUF_LIMIT
        if external_data is False and too_big:
            raise InvalidExportOptionsError(
                f"external_data=False, but the weights take {self.weights_size() / 2**30:.2f} GB, "
                "over protobuf's 2 GB limit; use external_data=True (or leave it unset)"
            )
        use_external = include_initializers and (
            bool(external_data) or (external_data is None and too_big))
        if not isinstance(destination, (str, os.PathLike)):
            if use_external:
                raise InvalidExportOptionsError(
                    "external data needs a path to write the side file next to; a file object "
                    "was given: pass a path as f"
                )
            write_model(self.model, destination, include_initializers=include_initializers)
            return
        _save_atomically(self.model, os.fspath(destination), use_external, include_initializers)

    def _apply_state(self, model_state) -> None:
        state = _read_state(model_state)
        initializers = self.model.graph.initializers
        unknown, not_tensors, mismatched, derived = [], [], [], []
        for name, tensor in state.items():
            if name not in initializers:
                unknown.append(name)
            elif not isinstance(tensor, (torch.Tensor, CheckpointTensor)):
                not_tensors.append(f"{name} ({type(tensor).__name__})")
            else:
                value = initializers[name]
                dtype = tensor.dtype if isinstance(tensor, CheckpointTensor) else \
                    _IR_DTYPES.get(tensor.dtype)
                if tuple(tensor.shape) != tuple(value.shape) or (
                        value.dtype is not None and dtype != value.dtype):
                    mismatched.append(f"{name}: the model has {value.dtype} {list(value.shape)}, "
                                      f"model_state {tensor.dtype} {list(tensor.shape)}")
                elif isinstance(value.const_value, ir.LazyTensor):
                    # Computed by a pass from parameters (batch norm folded into a conv, a
                    # transposed weight) and named after one of them.
                    derived.append(name)
        problems = []
        if unknown:
            problems.append(
                f"{len(unknown)} name(s) the exported model has no weight for: "
                f"{', '.join(sorted(unknown)[:10])}{' ...' if len(unknown) > 10 else ''}; "
                "weights folded into others at export (batch norm into conv) or stored "
                "transposed (linear.weight.T) cannot be replaced by name: export again with "
                "the new weights loaded into the model, or pass only the names listed in "
                "program.model.graph.initializers")
        if not_tensors:
            problems.append(f"value(s) that are not tensors: {', '.join(not_tensors[:10])}")
        if mismatched:
            problems.append("shape or dtype differs: " + "; ".join(mismatched[:10]))
        if derived:
            problems.append(
                f"weight(s) computed at export from others (folded), so a new value of the "
                f"parameter alone would give a wrong model: {', '.join(sorted(derived)[:10])}; "
                "export again with the new weights loaded into the model")
        if problems:
            raise InvalidExportOptionsError(
                "model_state does not fit the exported model, nothing was changed or written: "
                + "\n  ".join([""] + problems))
        for name, tensor in state.items():
            if isinstance(tensor, CheckpointTensor):
                initializers[name].const_value = tensor  # read while it is written
                continue
            # Written from its memory as it is: a CPU tensor in row-major order.
            initializers[name].const_value = TorchTensor(on_cpu(tensor).contiguous(),
                                                         name=name)
        self._session = None

    # -- running ---------------------------------------------------------------------------
    def __call__(self, *args, options: ONNXRuntimeOptions | None = None, **kwargs) -> list[torch.Tensor]:
        """Run the model in ONNX Runtime on torch inputs; returns torch tensors, one per
        output (a sequence output as a list of them, an empty optional as None)."""
        session = self._get_session(options)
        names = [i.name for i in session.get_inputs()]
        flat = self.input_tensors(args, kwargs, len(names))
        if len(flat) != len(names):
            raise InvalidExportOptionsError(
                f"the ONNX model takes {len(names)} inputs ({', '.join(names)}) but "
                f"{len(flat)} tensors were given"
            )
        feeds = {name: as_numpy(t) for name, t in zip(names, flat)}
        outputs = session.run(None, feeds)
        return [_as_torch(o) for o in outputs]

    def input_tensors(self, args: tuple, kwargs: dict,
                      count: int | None = None) -> list[torch.Tensor]:
        """The tensors a call's arguments feed to the model's ``count`` inputs (its named
        inputs by default), in order: see ``_flatten_inputs``."""
        count = len(self.input_names) if count is None else count
        unread = self.unread_inputs
        flat = _flatten_inputs(args, kwargs, count + len(unread), self.number_inputs)
        if unread and len(flat) == count + len(unread):
            from onnxport.translate.unread_inputs import without

            flat = without(flat, unread)
        return flat

    def _get_session(self, options: ONNXRuntimeOptions | None):
        # Only a session made with default options is kept and reused.
        default = options is None or (options.session_options is None
                                      and options.execution_providers is None)
        if self._session is not None and default:
            return self._session
        import onnxruntime as ort

        options = options or ONNXRuntimeOptions()
        session_options = options.session_options or ort.SessionOptions()
        providers = options.execution_providers or ["CPUExecutionProvider"]
        # Through a file: ONNX Runtime then holds the only other copy of the weights.
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "model.onnx")
            self.save(path)
            session = ort.InferenceSession(path, session_options, providers=providers)
        if default:
            self._session = session
        return session

    def release(self) -> None:
        """Drop the ONNX Runtime session (it holds a copy of the weights)."""
        self._session = None

    # -- torch.onnx 2.x's ONNXProgram methods ----------------------------------------------
    def optimize(self) -> None:
        """Run onnxport's graph optimizations in place (what ``export(optimize=True)`` runs;
        again is harmless)."""
        from onnxport import passes

        passes.run_preset(self.model, "default")
        self.release()

    def apply_weights(self, state_dict: dict[str, torch.Tensor]) -> None:
        """Replace weights by name, as torch.onnx's does: a name the model has no weight for is
        skipped with a warning; a shape or dtype that differs is refused before any changes."""
        import warnings

        unknown = [name for name in state_dict if name not in self.model.graph.initializers]
        for name in unknown:
            warnings.warn(f"Weight {name!r} not found in the model. Skipped applying.",
                          stacklevel=2)
        self._apply_state({k: v for k, v in state_dict.items() if k not in unknown})

    def rename_axes(self, rename_mapping: dict[str | ir.SymbolicDim, str]) -> None:
        """Rename symbolic dims everywhere in the graph: ``{"s0": "batch"}`` or
        ``{graph.inputs[0].shape[0]: "batch"}``. A dim that is an expression of renamed ones
        (``s0 + s1``) is renamed within."""
        names = {str(old.value if isinstance(old, ir.SymbolicDim) else old): new
                 for old, new in rename_mapping.items()}
        if not names:
            return
        pattern = re.compile(r"(?<![\w.])(" + "|".join(
            re.escape(n) for n in sorted(names, key=len, reverse=True)) + r")(?![\w.])")

        def renamed(dim):
            if not isinstance(dim, ir.SymbolicDim) or dim.value is None:
                return dim
            return ir.SymbolicDim(pattern.sub(lambda m: names[m.group(1)], dim.value))

        graph = self.model.graph
        values = [*graph.inputs, *graph.outputs, *graph.initializers.values(),
                  *(v for node in ir.traversal.RecursiveGraphIterator(graph)
                    for v in node.outputs)]
        for value in values:
            if value.shape is not None:
                value.shape = ir.Shape([renamed(dim) for dim in value.shape])
        self.release()

    def compute_values(self, value_names: Sequence[str], args=(), kwargs=None
                       ) -> Sequence[torch.Tensor]:
        """The values of the named intermediate (or input, output) values of the main graph on
        these inputs, run in ONNX Runtime."""
        graph = self.model.graph
        values = dict(graph.initializers)
        values.update((v.name, v) for v in graph.inputs if v.name)
        values.update((v.name, v) for node in graph for v in node.outputs if v.name)
        missing = [name for name in value_names if name not in values]
        if missing:
            raise ValueError(f"Value(s) {missing} not found in the model's main graph")
        outputs = list(graph.outputs)
        self.release()
        graph.outputs.clear()
        graph.outputs.extend(values[name] for name in value_names)
        try:
            return self(*args, **(kwargs or {}))
        finally:
            graph.outputs.clear()
            graph.outputs.extend(outputs)
            self.release()


def _flatten_inputs(args: tuple, kwargs: dict, count: int,
                    numbers: Sequence = ()) -> list[torch.Tensor]:
    """The tensors of the arguments, a quantized one as its integers, scale and zero point
    (the three ONNX inputs torch.onnx makes of it), with the inputs of ``numbers`` (number
    arguments) in their places, for a model of ``count`` inputs."""
    from onnxport.capture.quantized_io import flat_tensors
    from onnxport.translate.number_inputs import feeds

    return feeds(flat_tensors((args, kwargs)), args, kwargs, numbers, count)


def _read_state(model_state) -> dict:
    """A state dict, or the weights of a checkpoint file read lazily (``checkpoints``): a
    checkpoint's weights are read only while they are written."""
    if not isinstance(model_state, (str, os.PathLike)):
        if not isinstance(model_state, dict):
            raise InvalidExportOptionsError(
                f"model_state must be a state dict or the path of one, got "
                f"{type(model_state).__name__}")
        return model_state
    from onnxport.checkpoints import read_checkpoint

    return read_checkpoint(os.fspath(model_state))


_IR_DTYPES = {
    torch.float32: ir.DataType.FLOAT, torch.float16: ir.DataType.FLOAT16,
    torch.bfloat16: ir.DataType.BFLOAT16, torch.float64: ir.DataType.DOUBLE,
    torch.int64: ir.DataType.INT64, torch.int32: ir.DataType.INT32,
    torch.int16: ir.DataType.INT16, torch.int8: ir.DataType.INT8,
    torch.uint8: ir.DataType.UINT8, torch.bool: ir.DataType.BOOL,
    torch.complex64: ir.DataType.COMPLEX64, torch.complex128: ir.DataType.COMPLEX128,
}


def _read_nested_external_tensors(model: ir.Model) -> bool:
    """Replace file-backed tensors other than the main graph's initializers (attributes of
    Constant nodes, subgraph initializers: small, and not written by ``write_model``'s
    streaming) by their values, after checking where they are read from. Returns whether
    any was replaced."""
    replaced = False
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        for name, attribute in list(node.attributes.items()):
            if attribute.type == ir.AttributeType.TENSOR and isinstance(
                    attribute.value, ir.ExternalTensor):
                node.attributes[name] = ir.AttrTensor(name, _in_memory(attribute.value))
                replaced = True
            elif attribute.type == ir.AttributeType.TENSORS and any(
                    isinstance(t, ir.ExternalTensor) for t in attribute.value):
                node.attributes[name] = ir.AttrTensors(name, [
                    _in_memory(t) if isinstance(t, ir.ExternalTensor) else t
                    for t in attribute.value])
                replaced = True
            elif attribute.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS):
                graphs = [attribute.value] if attribute.type == ir.AttributeType.GRAPH \
                    else attribute.value
                for graph in graphs:
                    for value in graph.initializers.values():
                        if isinstance(value.const_value, ir.ExternalTensor):
                            value.const_value = _in_memory(value.const_value)
                            replaced = True
    return replaced


def _in_memory(tensor: ir.ExternalTensor) -> ir.Tensor:
    check_external_location(tensor)
    return ir.Tensor(tensor.numpy(), dtype=tensor.dtype, name=tensor.name)


# -- crash-consistent saving --------------------------------------------------------------------
def _side_file_pattern(base: str) -> re.Pattern:
    """Names only this module gives to side files of the model ``base``: the only ones it ever
    deletes."""
    return re.compile(re.escape(base) + r"\.[0-9a-f]{16}\.data")


def _flush_to_disk(stream) -> None:
    stream.flush()
    os.fsync(stream.fileno())


def _sync_folder(folder: str) -> None:
    """Make the renames in ``folder`` durable. Best effort: some file systems cannot sync a
    folder, and a rename already made is consistent either way."""
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


def _new_file_mode() -> int:
    """The mode ``open()`` gives a new file: 0o666 less the process's umask (mkstemp's 0o600
    would hide an exported model from a serving process of another user)."""
    try:  # Linux states the umask without changing it
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    umask = os.umask(0o022)  # elsewhere: read by setting it, then put back at once
    os.umask(umask)
    return 0o666 & ~umask


def _temporary_file(folder: str) -> str:
    """An empty temporary file in ``folder``, with the mode a new file gets there."""
    handle, temporary = tempfile.mkstemp(prefix=".onnxport-", suffix=".tmp", dir=folder)
    os.close(handle)
    os.chmod(temporary, _new_file_mode())
    return temporary


class _atomic_path:
    """A temporary file next to ``destination``, renamed over it only when writing succeeded."""

    def __init__(self, destination, durable: bool = True):
        self.destination = os.fspath(destination)
        self.folder = os.path.dirname(os.path.abspath(self.destination))
        self.durable = durable  # the rename synced too

    def __enter__(self) -> str:
        self.temporary = _temporary_file(self.folder)
        return self.temporary

    def __exit__(self, kind, error, traceback) -> bool:
        try:
            if kind is None:
                if self.durable or not _exchanged(self.temporary, self.destination):
                    os.replace(self.temporary, self.destination)
                if self.durable:
                    _sync_folder(self.folder)
        finally:
            if os.path.exists(self.temporary):
                _remove_quietly(self.temporary)
        return False


_RENAME_EXCHANGE = 2  # renameat2's flag (Linux 3.15+)


def _exchanged(temporary: str, destination: str) -> bool:
    """Swap the new file ``temporary`` with the regular file at ``destination`` in one atomic
    step (Linux's renameat2 RENAME_EXCHANGE); ``temporary`` then holds the old file, which the
    caller removes. Whether it was done: False where there is no regular file to swap with, or
    the system or file system cannot (then a rename replaces it). A rename over an existing
    file makes ext4 write the new file out before the rename returns (auto_da_alloc), a third
    of a large model's save; a swap does not, and readers see the old file or the new one,
    never none."""
    renameat2 = getattr(_libc(), "renameat2", None)
    try:
        if renameat2 is None or not stat.S_ISREG(os.lstat(destination).st_mode):
            return False
    except OSError:
        return False
    at_current_folder = -100
    return renameat2(at_current_folder, os.fsencode(temporary), at_current_folder,
                     os.fsencode(destination), _RENAME_EXCHANGE) == 0


@functools.lru_cache(maxsize=1)
def _libc():
    """The C library of this process, on Linux (None elsewhere)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def _side_files_of(destination: str, pattern: re.Pattern) -> set[str]:
    """The side files of ours the model now at ``destination`` points at (it is only read when
    such files exist, and then it is a small model of references)."""
    folder = os.path.dirname(destination)
    if not os.path.isfile(destination) or not any(
            pattern.fullmatch(name) for name in os.listdir(folder)):
        return set()
    import onnx

    try:
        proto = onnx.load(destination, load_external_data=False)
    except Exception:  # not a model (or a broken one): it points at nothing
        return set()
    return {entry.value for tensor in proto.graph.initializer for entry in tensor.external_data
            if entry.key == "location" and pattern.fullmatch(entry.value)}


def side_files(path: str | os.PathLike) -> list[str]:
    """The paths of the external data files the model ``save`` wrote at ``path`` points at."""
    import onnx

    folder = os.path.dirname(os.path.abspath(path))
    pattern = _side_file_pattern(os.path.basename(path))
    if not any(pattern.fullmatch(name) for name in os.listdir(folder)):
        return []  # one self-contained file, maybe large: not read again
    proto = onnx.load(os.fspath(path), load_external_data=False)
    locations = dict.fromkeys(
        entry.value for tensor in proto.graph.initializer for entry in tensor.external_data
        if entry.key == "location")
    return [os.path.join(folder, location) for location in locations]


def _save_atomically(model: ir.Model, destination: str, external: bool,
                     include_initializers: bool = True) -> None:
    """Write ``destination`` (and its side file) so that an interruption at any point leaves
    either the old model with its old side file or the new model with its new one.

    The side file is named after its content and written completely (and synced) before the
    model that points at it is renamed over the old model, which goes on pointing at its own,
    untouched side file until then; that old side file is deleted last."""
    folder = os.path.dirname(os.path.abspath(destination))
    base = os.path.basename(destination)
    if not os.path.isdir(folder):
        raise InvalidExportOptionsError(f"cannot write {destination!r}: folder {folder!r} does not exist")
    destination = os.path.join(folder, base)
    pattern = _side_file_pattern(base)
    old_side_files = _side_files_of(destination, pattern)
    new_side_file = None
    if external:
        new_side_file, places, created = _write_side_file(model, folder, base)
        try:
            with _atomic_path(destination) as temporary:
                with open(temporary, "wb") as stream:
                    write_model(model, stream, external={
                        name: ExternalSlice(new_side_file, offset, length)
                        for name, (offset, length) in places.items()})
                    _flush_to_disk(stream)
        except BaseException:
            if created and new_side_file is not None:
                _remove_quietly(os.path.join(folder, new_side_file))
            raise
    else:
        # One self-contained file is not synced (as torch.onnx and onnx.save do not; the sync
        # was half of a small model's export): the swap (or rename) alone makes it appear
        # complete or not at all to every reader, and a failed or killed save leaves the old
        # file. Only a power cut soon after could lose the new file's content, as it could
        # torch.onnx's. A side file is synced, since the model must not point at weights that
        # could be lost.
        with _atomic_path(destination, durable=False) as temporary:
            with open(temporary, "wb") as stream:
                write_model(model, stream, include_initializers=include_initializers)
    # The program itself may still read its weights from the old side file (a loaded model
    # saved over its own path): that one stays.
    in_use = {os.path.realpath(tensor.path) for tensor in external_tensors(model)}
    for name in old_side_files - {new_side_file}:
        path = os.path.join(folder, name)
        if os.path.realpath(path) not in in_use:
            _remove_quietly(path)


def _write_side_file(model: ir.Model, folder: str, base: str):
    """Write the weights to ``<base>.<hash>.data`` in ``folder``; returns its name, where each
    weight is, and whether the file is new (else an identical one was there already). No file
    (and name None) when every weight is small enough to stay in the model."""
    temporary = _temporary_file(folder)
    try:
        with open(temporary, "wb") as stream:
            places, digest = write_external_data(model, stream)
            _flush_to_disk(stream)
        if not places:
            return None, places, False
        name = f"{base}.{digest[:16]}.data"
        path = os.path.join(folder, name)
        created = not os.path.exists(path)
        os.replace(temporary, path)
        _sync_folder(folder)
    finally:
        if os.path.exists(temporary):
            _remove_quietly(temporary)
    return name, places, created


def _check_save_arguments(destination, include_initializers, model_state, serializer,
                          external_data) -> None:
    """save()'s arguments, refused with what was given and what is accepted before anything is
    written (a string flag such as include_initializers="no" would count as True)."""
    from onnxport._arguments import check_destination

    if destination is None:
        raise InvalidExportOptionsError(
            "save() needs a destination: a path, an os.PathLike or a binary file object")
    check_destination(destination)
    if not isinstance(include_initializers, bool):
        raise InvalidExportOptionsError(
            f"include_initializers must be True or False, got {include_initializers!r}")
    if external_data is not None and not isinstance(external_data, bool):
        raise InvalidExportOptionsError(
            f"external_data must be True, False or None (automatic), got {external_data!r}")
    if model_state is not None and not isinstance(model_state, (dict, str, os.PathLike)):
        raise InvalidExportOptionsError(
            f"model_state must be a state dict or the path of a checkpoint (.pt, .safetensors), "
            f"got {type(model_state).__name__}")
    if serializer is not None and not callable(getattr(serializer, "serialize", None)):
        raise InvalidExportOptionsError(
            f"serializer must have a serialize(program, destination) method (the "
            f"ONNXProgramSerializer protocol), got {type(serializer).__name__}")


def _as_torch(output: Any) -> Any:
    """An output of ONNX Runtime as torch gives it: an empty optional (scripted code's None)
    as None, a sequence (a list a scripted loop built) as a list of tensors. (ONNX Runtime
    gives uint64 as numpy's ulonglong, which torch.from_numpy refuses.)"""
    if output is None:
        return None
    if isinstance(output, list):
        return [_as_torch(item) for item in output]
    array = np.asarray(output)
    return torch.from_numpy(array.view(np.uint64) if array.dtype.char == "Q" else array)
