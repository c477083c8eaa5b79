"""``ONNXProgram``: the exported model; saves it (atomically, with external data when needed)
and runs it in ONNX Runtime on torch inputs."""

from __future__ import annotations

import io
import os
import shutil
import tempfile
from typing import Any, Sequence

import numpy as np
import onnx_ir as ir
import torch

from onnxport.errors import InvalidExportOptionsError
from onnxport.serialize import write_model

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
        self._session = None

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

    # -- saving ----------------------------------------------------------------------------
    def save(self, destination: str | os.PathLike | io.IOBase, *, include_initializers: bool = True,
             model_state: dict | str | os.PathLike | None = None, serializer=None,
             external_data: bool | None = None) -> None:
        """Write the model to a path or a binary file object.

        ``external_data=None`` keeps one self-contained file while the weights fit in protobuf
        and puts them in a side file (``<name>.data``) above that.
        """
        if model_state is not None:
            self._apply_state(model_state)
        if serializer is not None:
            if isinstance(destination, (str, os.PathLike)):
                with _atomic_path(destination) as temporary:
                    with open(temporary, "wb") as stream:
                        serializer.serialize(self, stream)
            else:
                serializer.serialize(self, destination)
            return
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
        if isinstance(model_state, (str, os.PathLike)):
            model_state = torch.load(model_state, weights_only=True, map_location="cpu")
            if "state_dict" in model_state and isinstance(model_state["state_dict"], dict):
                model_state = model_state["state_dict"]
        initializers = self.model.graph.initializers
        from onnx_ir.tensor_adapters import TorchTensor

        for name, tensor in model_state.items():
            if name in initializers and isinstance(tensor, torch.Tensor):
                initializers[name].const_value = TorchTensor(tensor.detach(), name=name)
        self._session = None

    # -- running ---------------------------------------------------------------------------
    def __call__(self, *args, options: ONNXRuntimeOptions | None = None, **kwargs) -> list[torch.Tensor]:
        """Run the model in ONNX Runtime on torch inputs; returns torch tensors."""
        session = self._get_session(options)
        flat = _flatten_inputs(args, kwargs)
        names = [i.name for i in session.get_inputs()]
        if len(flat) != len(names):
            raise InvalidExportOptionsError(
                f"the ONNX model takes {len(names)} inputs ({', '.join(names)}) but "
                f"{len(flat)} tensors were given"
            )
        feeds = {name: _to_numpy(t) for name, t in zip(names, flat)}
        outputs = session.run(None, feeds)
        return [torch.from_numpy(np.asarray(o)) for o in outputs]

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


def _flatten_inputs(args: tuple, kwargs: dict) -> list[torch.Tensor]:
    leaves = torch.utils._pytree.tree_leaves((args, kwargs))
    return [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]


def _to_numpy(tensor: torch.Tensor) -> np.ndarray:
    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        import ml_dtypes

        return tensor.view(torch.uint16).numpy().view(ml_dtypes.bfloat16)
    return tensor.numpy()


class _atomic_path:
    """A temporary file next to ``destination``, renamed over it only when writing succeeded."""

    def __init__(self, destination):
        self.destination = os.fspath(destination)

    def __enter__(self) -> str:
        folder = os.path.dirname(os.path.abspath(self.destination))
        handle, self.temporary = tempfile.mkstemp(prefix=".onnxport-", suffix=".tmp", dir=folder)
        os.close(handle)
        return self.temporary

    def __exit__(self, kind, error, traceback) -> bool:
        if kind is None:
            os.replace(self.temporary, self.destination)
        elif os.path.exists(self.temporary):
            os.remove(self.temporary)
        return False


def _save_atomically(model: ir.Model, destination: str, external: bool,
                     include_initializers: bool = True) -> None:
    folder = os.path.dirname(os.path.abspath(destination))
    base = os.path.basename(destination)
    if not os.path.isdir(folder):
        raise InvalidExportOptionsError(f"cannot write {destination!r}: folder {folder!r} does not exist")
    staging = tempfile.mkdtemp(prefix=".onnxport-", dir=folder)
    try:
        staged = os.path.join(staging, base)
        if external:
            data_name = base + ".data"
            ir.save(model, staged, external_data=data_name)
            os.replace(os.path.join(staging, data_name), os.path.join(folder, data_name))
        else:
            with open(staged, "wb") as stream:
                write_model(model, stream, include_initializers=include_initializers)
        os.replace(staged, destination)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
