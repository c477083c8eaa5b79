"""The checks on ``export()``'s arguments: every one is refused with a message naming the
argument, what was given and what is accepted, before anything is captured or written."""

from __future__ import annotations

import difflib
import inspect
import io
import os
import tempfile
import warnings
from typing import Any, Callable, Iterable, Mapping, Sequence

import onnx_ir as ir
import torch
import torch.utils._pytree as pytree

from onnxport.errors import InvalidExportOptionsError

MIN_OPSET = 13
MAX_OPSET = 23
DEFAULT_OPSET = 18

# The flags of export(); None is accepted where it means "automatic" or "not given".
_FLAGS = ("export_params", "keep_initializers_as_inputs", "report", "optimize",
          "verify", "profile", "dump_exported_program", "do_constant_folding",
          "autograd_inlining", "fused_ops")
_OPTIONAL_FLAGS = ("verbose", "external_data", "dynamo", "fallback")


def check_flags(options: Mapping[str, Any]) -> None:
    """Booleans must be booleans: ``verify="no"`` is a non-empty string, which Python would
    take for True, the opposite of what was meant."""
    for name in _FLAGS + _OPTIONAL_FLAGS:
        value = options[name]
        if isinstance(value, bool) or (value is None and name in _OPTIONAL_FLAGS):
            continue
        accepted = "True, False or None" if name in _OPTIONAL_FLAGS else "True or False"
        if name in ("external_data", "dynamo", "fallback"):
            accepted += " (automatic)"
        raise InvalidExportOptionsError(
            f"{name} must be {accepted}, got {value!r} ({type(value).__name__})")


def check_unknown(unknown_options: Mapping[str, Any], known: Iterable[str]) -> None:
    if not unknown_options:
        return
    known = sorted(known)
    problems = []
    for name in unknown_options:
        close = [k for k in known if k.startswith(name) or name.startswith(k)]
        close += difflib.get_close_matches(name, known, n=3, cutoff=0.5)
        close = list(dict.fromkeys(close))[:3]
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        problems.append(f"{name!r}{hint}")
    raise InvalidExportOptionsError(
        f"export() got unknown keyword argument(s) {', '.join(problems)}\n"
        f"export() takes: {', '.join(known)}")


def check_on_stage(on_stage: Any) -> None:
    if on_stage is not None and not callable(on_stage):
        raise InvalidExportOptionsError(
            f"on_stage must be a function called with each stage's name, or None; got "
            f"{on_stage!r} ({type(on_stage).__name__})")


def check_args(args: Any, kwargs: Any) -> tuple[tuple, dict]:
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, Mapping):
        raise InvalidExportOptionsError(
            f"kwargs must be a dict of keyword arguments, got {type(kwargs).__name__}")
    if isinstance(args, torch.Tensor):
        args = (args,)
    elif isinstance(args, list):
        args = tuple(args)
    elif not isinstance(args, tuple):
        raise InvalidExportOptionsError(
            f"args must be a tuple of the model's positional inputs (or a single tensor), "
            f"got {type(args).__name__}; wrap it as args=(value,)")
    kwargs = dict(kwargs)
    if args and isinstance(args[-1], dict) and not kwargs:
        # torch.onnx's convention: a dict at the end of args holds the keyword arguments.
        kwargs = dict(args[-1])
        args = args[:-1]
    _check_no_complex(args, kwargs)
    return args, kwargs


def _check_no_complex(args: tuple, kwargs: dict) -> None:
    leaves, _ = pytree.tree_flatten_with_path((args, kwargs))
    for path, leaf in leaves:
        if isinstance(leaf, torch.Tensor) and leaf.is_complex():
            where = ("args" if path[0].idx == 0 else "kwargs") + pytree.keystr(path[1:])
            raise InvalidExportOptionsError(
                f"input {where} is a {leaf.dtype} tensor; complex inputs are not supported in "
                "ONNX: pass torch.view_as_real(x) instead (and torch.view_as_complex inside "
                "the model)")


def check_forward_arguments(model: Any, args: tuple, kwargs: dict) -> None:
    """Bind the inputs to the forward's signature now, so that a wrong count is said in the
    model's own terms rather than as a capture failure deep inside torch.export."""
    if isinstance(model, (torch.export.ExportedProgram, torch.jit.ScriptModule)):
        return  # a script method's signature lists self: the capture checks the inputs
    function = model.forward if isinstance(model, torch.nn.Module) else model
    label = "model.forward" if isinstance(model, torch.nn.Module) else "model"
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*args, **kwargs)
    except TypeError as error:
        parameters = signature.parameters.values()
        positional = [p.name for p in parameters
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if len(args) > len(positional) and not any(p.kind == p.VAR_POSITIONAL for p in parameters):
            raise InvalidExportOptionsError(
                f"{label} takes {len(positional)} positional input(s) "
                f"({', '.join(positional) or 'none'}), {len(args)} were given in args; "
                "pass one value per input (keyword inputs go in kwargs)") from None
        raise InvalidExportOptionsError(
            f"args={_describe(args)} and kwargs={_describe(kwargs)} do not fit {label}"
            f"{signature}: {error}") from None


def check_devices(model: Any, args: tuple, kwargs: dict) -> None:
    """The model's weights on one device and the inputs on it too, said with the names of the
    weights and inputs that differ (torch's own error names neither)."""
    weights = {}
    if isinstance(model, torch.nn.Module):
        if not all(_is_real(t) for t in model.parameters()):
            return  # fake mode: the devices are pretended
        for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
            if _is_real(tensor):
                weights.setdefault(tensor.device, name)
    if len(weights) > 1:
        where = " and ".join(f"{device} ({name}, ...)" for device, name in weights.items())
        raise InvalidExportOptionsError(
            f"the model's weights are on several devices: {where}; move the whole model to "
            f"one device (model.to(device)) before exporting")
    inputs = {}
    leaves, _ = torch.utils._pytree.tree_flatten_with_path((args, kwargs))
    for path, leaf in leaves:
        # A 0-d CPU tensor mixes with any device in torch, as a number does.
        if isinstance(leaf, torch.Tensor) and _is_real(leaf) and not (
                leaf.dim() == 0 and leaf.device.type == "cpu"):
            inputs.setdefault(leaf.device, _input_label(path))
    device = next(iter(weights), None)
    others = {d: label for d, label in inputs.items() if d != device} if device else {}
    if device is not None and others:
        other, label = next(iter(others.items()))
        raise InvalidExportOptionsError(
            f"input {label} is on {other} but the model's weights are on {device} "
            f"({weights[device]}, ...); move the inputs to the model's device "
            f"(x.to({str(device)!r})) or the model to theirs")
    if device is None and len(inputs) > 1:
        where = " and ".join(f"{d} ({label})" for d, label in inputs.items())
        raise InvalidExportOptionsError(
            f"the inputs are on several devices: {where}; move them to one device")


def _is_real(tensor: torch.Tensor) -> bool:
    return not isinstance(tensor, torch._subclasses.fake_tensor.FakeTensor)


def _input_label(path) -> str:
    """``args[0]`` / ``kwargs['x']`` and where inside them, from a pytree key path."""
    top, *rest = path[1:]
    head = f"args[{top.idx}]" if path[0].idx == 0 else f"kwargs[{top.key!r}]"
    return head + "".join(str(key) for key in rest)


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"Tensor{tuple(value.shape)}"
    if isinstance(value, tuple):
        return "(" + ", ".join(_describe(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_describe(v)}" for k, v in value.items()) + "}"
    return type(value).__name__


def capture_path(dynamo: bool | None, fallback: bool | None) -> tuple[bool, bool, bool]:
    """(try torch.export, fall back to tracing when it fails, warn when falling back).

    Left at their defaults (None), torch.export is tried and tracing follows when it fails,
    with a warning: the default path never gives up where tracing works. ``dynamo=True``
    alone or ``fallback=False`` keep torch.export's failure an error; ``dynamo=False`` traces.
    """
    use_export = dynamo is not False
    if fallback is None:
        return use_export, dynamo is None, dynamo is None
    return use_export, fallback, False


def check_opset(opset_version: Any) -> int:
    if opset_version is None:
        return DEFAULT_OPSET
    if isinstance(opset_version, bool) or not isinstance(opset_version, int) or not (
        MIN_OPSET <= opset_version <= MAX_OPSET
    ):
        raise InvalidExportOptionsError(
            f"opset_version={opset_version!r} is not supported; onnxport exports opsets "
            f"{MIN_OPSET} to {MAX_OPSET} (default {DEFAULT_OPSET})")
    return opset_version


def check_model(model: Any, dynamo: bool) -> None:
    if not isinstance(model, (torch.nn.Module, torch.export.ExportedProgram)) and not callable(model):
        raise InvalidExportOptionsError(
            f"model must be an nn.Module, an ExportedProgram or a function, got "
            f"{type(model).__name__}")


def check_destination(f: Any) -> None:
    if f is None:
        return
    if isinstance(f, (str, os.PathLike)):
        path = os.fspath(f)
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not path:
            raise InvalidExportOptionsError("f is an empty path; give a file name such as 'model.onnx'")
        if os.path.isdir(path):
            raise InvalidExportOptionsError(f"f={path!r} is a folder; give a file name inside it")
        folder = os.path.dirname(os.path.abspath(path))
        if os.path.exists(folder) and not os.path.isdir(folder):
            raise InvalidExportOptionsError(
                f"cannot write f={path!r}: {folder!r} is a file, not a folder")
        if not os.path.isdir(folder):
            raise InvalidExportOptionsError(
                f"cannot write f={path!r}: folder {folder!r} does not exist; create it first")
        _check_writable(path, folder)
        return
    if hasattr(f, "write"):
        if isinstance(f, io.TextIOBase):
            raise InvalidExportOptionsError(
                "f is a text file object; open it in binary mode ('wb')")
        return
    raise InvalidExportOptionsError(
        f"f must be a path, an os.PathLike, a binary file object or None, got {type(f).__name__}")


def _check_writable(path: str, folder: str) -> None:
    """Create and remove a file in ``folder`` now, so that a folder no file can be made in
    (read-only, /proc) is said before the export runs, in the user's terms."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise InvalidExportOptionsError(
            f"cannot write f={path!r}: no file can be created in folder {folder!r} "
            f"({error.strerror or error})") from None


def check_artifacts_dir(artifacts_dir: Any) -> None:
    if not isinstance(artifacts_dir, (str, os.PathLike)):
        raise InvalidExportOptionsError(
            f"artifacts_dir must be a folder path (str or os.PathLike), got "
            f"{type(artifacts_dir).__name__} {artifacts_dir!r}")


def check_names(input_names: Any, output_names: Any) -> None:
    """Names are non-empty strings, and unique across inputs and outputs: ONNX gives every
    value one name, so a repeated one makes an invalid model."""
    for argument, names in (("input_names", input_names), ("output_names", output_names)):
        if names is None:
            continue
        if not isinstance(names, (list, tuple)):
            raise InvalidExportOptionsError(
                f"{argument} must be a list of strings, got {type(names).__name__} {names!r}")
        for name in names:
            if not isinstance(name, str) or not name:
                raise InvalidExportOptionsError(
                    f"{argument} must be a list of non-empty strings, got {name!r} in {names!r}")
        repeated = sorted({n for n in names if list(names).count(n) > 1})
        if repeated:
            raise InvalidExportOptionsError(
                f"{argument} has repeated names {repeated} in {list(names)!r}; every name must "
                "be unique")
    both = sorted(set(input_names or ()) & set(output_names or ()))
    if both:
        raise InvalidExportOptionsError(
            f"{both} given both in input_names and in output_names; an ONNX value has one "
            "name, so inputs and outputs need different names")


def check_dynamic_axes_type(dynamic_axes: Any, dynamic_shapes: Any) -> None:
    if dynamic_axes is not None and not isinstance(dynamic_axes, Mapping):
        raise InvalidExportOptionsError(
            f"dynamic_axes must be a dict {{input or output name: {{axis: name}} or [axes]}} "
            f"or None, got {type(dynamic_axes).__name__} {dynamic_axes!r}")
    for name, axes in (dynamic_axes or {}).items():
        if not isinstance(name, str) or not name:
            raise InvalidExportOptionsError(
                f"dynamic_axes keys are input or output names (non-empty strings), got {name!r}")
        for dim_name in axes.values() if isinstance(axes, Mapping) else ():
            if not isinstance(dim_name, str) or not dim_name:
                raise InvalidExportOptionsError(
                    f"dynamic_axes[{name!r}] = {axes!r}: dimension names are non-empty strings "
                    f"such as 'batch', got {dim_name!r}; or give a list of axes to have names "
                    "made up")
    if dynamic_shapes is not None and not isinstance(dynamic_shapes, (Mapping, tuple, list)):
        raise InvalidExportOptionsError(
            f"dynamic_shapes must be a dict (by input name), a tuple or a list, or None; got "
            f"{type(dynamic_shapes).__name__}")


def check_against_model(model: ir.Model, user_inputs: Sequence[str],
                        input_names: Sequence[str] | None, output_names: Sequence[str] | None,
                        output_dim_names: Mapping[str, Mapping[int, str]]) -> None:
    """What can only be checked on the translated graph: that the names given do not take
    a weight's name, and that dynamic_axes on outputs name outputs and axes that exist."""
    graph = model.graph
    weights = set(graph.initializers) | {v.name for v in graph.inputs if v.name not in user_inputs}
    for argument, names in (("input_names", input_names), ("output_names", output_names)):
        taken = sorted(set(names or ()) & weights)
        if taken:
            raise InvalidExportOptionsError(
                f"{argument} gives {taken}, which is already the name of a weight of the model; "
                "choose another name (weights keep their state_dict names)")
    outputs = {v.name: v for v in graph.outputs}
    unknown = [name for name in output_dim_names if name not in outputs]
    if unknown:
        # torch.onnx warns and exports: one dynamic_axes dict often serves several calls of a
        # model, and a key for an input this call leaves out (seq_lengths) is no mistake.
        warnings.warn(
            f"dynamic_axes names {', '.join(map(repr, unknown))}, which "
            f"{'is' if len(unknown) == 1 else 'are'} neither an input nor an output of this "
            f"export; left out. Its inputs are {', '.join(user_inputs) or 'none'} (named by "
            f"input_names or the forward's parameters) and its outputs "
            f"{', '.join(outputs) or 'none'} (named by output_names).", UserWarning,
            stacklevel=_caller_level())
    for name, axes in output_dim_names.items():
        if name not in outputs:
            continue
        value = outputs[name]
        rank = len(value.shape) if value.shape is not None else None
        for axis in axes:
            if rank is not None and not -rank <= axis < rank:
                raise InvalidExportOptionsError(
                    f"dynamic_axes[{name!r}] names axis {axis}, but output {name!r} has {rank} "
                    f"dimensions (shape {value.shape})")


def _caller_level() -> int:
    """The stacklevel of the first frame outside onnxport (the user's export call)."""
    import sys

    package = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level


# Options of torch.onnx 1.x that are accepted, with a warning, and have no effect.
# Options of torch.onnx 1.x's export, accepted with a FutureWarning (what each did, and
# why it has no effect here).
LEGACY_OPTIONS = {
    "example_outputs": "the outputs are computed from the model (ignored, as in torch.onnx "
                       "since 1.11)",
    "strip_doc_string": "onnxport writes no stack traces into doc strings (ignored)",
    "_retain_param_name": "weights always keep their state_dict names (ignored)",
    "enable_onnx_checker": "the model is always valid ONNX (ignored)",
    "aten": "use operator_export_type=OperatorExportTypes.ONNX_ATEN instead",
    "export_raw_ir": "use operator_export_type instead",
    "use_external_data_format": "external_data=True is today's name",
}


def check_legacy_options(options: Mapping[str, Any], operator_export_type: Any) -> Any:
    """Warn for each torch.onnx 1.x option given; returns the operator_export_type, which
    ``aten=True`` sets."""
    from onnxport.compat.enums import OperatorExportTypes

    for name in options:
        if name not in LEGACY_OPTIONS:
            continue
        warnings.warn(f"export({name}=...) is from torch.onnx 1.x and deprecated: "
                      f"{LEGACY_OPTIONS[name]}; remove the argument.", FutureWarning,
                      stacklevel=3)
    if options.get("export_raw_ir"):
        raise InvalidExportOptionsError(
            "export_raw_ir=True (torch.onnx 1.x's export of its internal graph) is not "
            "supported; use operator_export_type=OperatorExportTypes.ONNX_FALLTHROUGH to keep "
            "ops without an ONNX translation as they are")
    if options.get("aten"):
        return OperatorExportTypes.ONNX_ATEN
    return operator_export_type


def check_training(training: Any):
    """``training``: a TrainingMode, or torch.onnx 1.x's bool (True = TRAINING)."""
    from onnxport.compat.enums import TrainingMode

    if training is None or training is False:
        return TrainingMode.EVAL
    if training is True:
        return TrainingMode.TRAINING
    mode = _our_member(training, TrainingMode)
    if mode is not None:
        return mode
    raise InvalidExportOptionsError(
        f"training must be a TrainingMode (EVAL, PRESERVE or TRAINING) or a bool, got "
        f"{training!r}")


def check_operator_export_type(operator_export_type: Any):
    from onnxport.compat.enums import OperatorExportTypes

    if operator_export_type is None:
        return OperatorExportTypes.ONNX
    export_type = _our_member(operator_export_type, OperatorExportTypes)
    if export_type is not None:
        return export_type
    raise InvalidExportOptionsError(
        f"operator_export_type must be an OperatorExportTypes (ONNX, ONNX_ATEN, "
        f"ONNX_ATEN_FALLBACK or ONNX_FALLTHROUGH), got {operator_export_type!r}")


def _our_member(value: Any, enum: type) -> Any:
    """``value`` as a member of our ``enum``: itself, or the member of the same name when it is
    torch.onnx's enum of that name (a pybind11 enum); None otherwise."""
    if isinstance(value, enum):
        return value
    if type(value).__name__ == enum.__name__ and getattr(value, "name", None) in enum.__members__:
        return enum[value.name]
    return None


def known_options(function: Callable) -> list[str]:
    return [name for name, p in inspect.signature(function).parameters.items()
            if p.kind != p.VAR_KEYWORD]
