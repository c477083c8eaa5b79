"""``export()``'s arguments checked and turned into one plan for the pipeline: settings for
each stage. Every argument is refused with a message naming the argument, what was given and
what is accepted, before anything is captured or written."""

from __future__ import annotations

import dataclasses
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
from onnxport.translate.number_inputs import NumberArguments, number_arguments

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


def bind_scripted_keywords(model: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """A scripted model's keyword inputs put in their places among the positional ones, the
    parameters between taking their defaults, as torch.onnx binds them: a scripted graph
    takes its inputs by position only."""
    if not kwargs or not isinstance(model, (torch.jit.ScriptModule, torch.jit.ScriptFunction)):
        return args, kwargs
    try:
        function = model.forward if isinstance(model, torch.jit.ScriptModule) else model
        parameters = [a for a in function.schema.arguments if a.name != "self"]
    except (AttributeError, RuntimeError):
        return args, kwargs  # (the capture refuses keyword inputs it cannot bind)
    names = [parameter.name for parameter in parameters]
    unknown = [key for key in kwargs if key not in names[len(args):]]
    if unknown:
        raise InvalidExportOptionsError(
            f"kwargs {', '.join(map(repr, unknown))}: no parameter of the scripted model's "
            f"forward({', '.join(names)}) after the {len(args)} given in args; name one of "
            f"{', '.join(names[len(args):]) or 'none'}")
    bound = list(args)
    for parameter in parameters[len(args):1 + max(names.index(key) for key in kwargs)]:
        if parameter.name in kwargs:
            bound.append(kwargs[parameter.name])
        elif parameter.has_default_value():
            bound.append(parameter.default_value)
        else:
            raise InvalidExportOptionsError(
                f"the scripted model's input {parameter.name!r} has no default and is given "
                "neither in args nor in kwargs; pass it")
    return tuple(bound), {}


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
        # A 0-d CPU tensor mixes with any device in torch, as a number does; CPU integers
        # are what some torch APIs take beside cuda data (pack_padded_sequence's lengths, CPU
        # indices into a cuda tensor), and eager says when a model cannot use them.
        if isinstance(leaf, torch.Tensor) and _is_real(leaf) and not (
                leaf.device.type == "cpu" and (leaf.dim() == 0 or not (
                    leaf.is_floating_point() or leaf.is_complex()))):
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


def check_legacy_options(options: Mapping[str, Any], operator_export_type: Any,
                         stacklevel: int = 3) -> Any:
    """Warn for each torch.onnx 1.x option given (at the frame ``stacklevel`` up: the user's
    call); returns the operator_export_type, which ``aten=True`` sets."""
    from onnxport.compat.enums import OperatorExportTypes

    for name in options:
        if name not in LEGACY_OPTIONS:
            continue
        warnings.warn(f"export({name}=...) is from torch.onnx 1.x and deprecated: "
                      f"{LEGACY_OPTIONS[name]}; remove the argument.", FutureWarning,
                      stacklevel=stacklevel)
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


# -- the plan: one settings object per stage -------------------------------------------------
@dataclasses.dataclass
class CaptureSettings:
    """How the model is captured (capture/): which strategies, the dynamic dims, the names."""

    dynamo: bool = True
    fallback: bool = False
    warn_on_fallback: bool = False
    training: Any = None  # a TrainingMode; None leaves the modules' modes as they are
    input_names: Sequence[str] | None = None
    output_names: Sequence[str] | None = None
    dynamic_shapes: Any = None
    dim_names: Any = None
    output_dim_names: Any = None

    def capture_options(self) -> dict[str, Any]:
        """The keywords of ``capture_model`` that come from these settings."""
        return {"dynamo": self.dynamo, "fallback": self.fallback,
                "warn_on_fallback": self.warn_on_fallback,
                "dynamic_shapes": self.dynamic_shapes, "dim_names": self.dim_names,
                "input_names": self.input_names, "output_names": self.output_names,
                "output_dim_names": self.output_dim_names}


@dataclasses.dataclass
class TranslationSettings:
    """How the captured graph is translated (translate/): with which registry, at which opset."""

    registry: Any
    opset: int = DEFAULT_OPSET
    operator_export_type: Any = None
    export_params: bool = True
    keep_initializers_as_inputs: bool = False
    custom_opsets: Mapping[str, int] = dataclasses.field(default_factory=dict)
    fused_ops: bool = True
    # The graph inputs number arguments become (torch.onnx's TorchScript exporter's rules)
    number_arguments: NumberArguments = dataclasses.field(default_factory=NumberArguments)
    # The user inputs the graph does not read leave it (the same rules; not dynamo=True's)
    drop_unread_inputs: bool = False

    def graph_options(self) -> dict[str, Any]:
        """The keywords of ``translate_graph`` that come from these settings."""
        return {"export_params": self.export_params,
                "keep_initializers_as_inputs": self.keep_initializers_as_inputs,
                "custom_opsets": self.custom_opsets, "fused_ops": self.fused_ops}


@dataclasses.dataclass
class PassSettings:
    """Which rewrites run on the ONNX model (passes/, and the module functions outlined)."""

    optimize: bool = True
    fused_ops: bool = True
    module_functions: list = dataclasses.field(default_factory=list)
    fake_weights: bool = False  # captured under enable_fake_mode: weights without values

    def preset_options(self) -> dict[str, Any]:
        """The keywords of the ``default`` pass preset that come from these settings."""
        return {"fused_ops": self.fused_ops}


@dataclasses.dataclass
class SaveSettings:
    """Where the program is written (``f``; None: not written), and how."""

    f: Any = None
    external_data: bool | None = None


@dataclasses.dataclass
class ExportPlan:
    """One export: the model and its inputs, the settings of each stage, and what runs around
    them (diagnostics, verification, the printout, the stage callback)."""

    model: Any
    args: tuple
    kwargs: dict
    capture: CaptureSettings
    translation: TranslationSettings
    passes: PassSettings
    save: SaveSettings
    diagnostics: Any  # diagnostics.session.DiagnosticsSettings
    verify: bool = False
    verbose: bool | None = None
    on_stage: Callable[[str], None] | None = None


def bound_options(function: Callable, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """``function(*args, **kwargs)``'s arguments by name, its defaults filled in: what a front
    door passes to :func:`plan_export` for a call of ``export`` it makes itself."""
    signature = inspect.signature(function)
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    return {name: value for name, value in bound.arguments.items()
            if signature.parameters[name].kind != inspect.Parameter.VAR_KEYWORD}


def plan_export(options: Mapping[str, Any], unknown_options: Mapping[str, Any], *,
                registry: Any = None, diagnostic_options: Any = None,
                fake_weights: bool = False, stacklevel: int = 3) -> ExportPlan:
    """``export()``'s arguments (``options``: each of its parameters by name) checked, in the
    order users meet the errors, and turned into an :class:`ExportPlan`. ``registry``
    replaces the default op library (an ``OnnxRegistry``), ``diagnostic_options`` (a
    ``DiagnosticOptions``) the default reporting; ``fake_weights``: the model's weights are
    fake tensors (``enable_fake_mode``), to be left without values; ``stacklevel`` is the user's frame, as
    ``warnings.warn`` counts from here (3: export's caller, when export calls this)."""
    check_unknown({k: v for k, v in unknown_options.items() if k not in LEGACY_OPTIONS},
                  options)
    check_flags(options)
    check_on_stage(options["on_stage"])
    model = options["model"]
    args, kwargs = check_args(options["args"], options["kwargs"])
    opset = check_opset(options["opset_version"])
    dynamo, fallback, warn_on_fallback = capture_path(options["dynamo"], options["fallback"])
    check_model(model, dynamo)
    check_destination(options["f"])
    check_artifacts_dir(options["artifacts_dir"])
    check_names(options["input_names"], options["output_names"])
    check_dynamic_axes_type(options["dynamic_axes"], options["dynamic_shapes"])
    from onnxport.capture.quantized_io import with_quantized_io
    from onnxport.passes import modules_to_export_as_functions
    from onnxport.compat.custom_symbolics import check_custom_opsets

    module_functions = modules_to_export_as_functions(
        model, options["export_modules_as_functions"], opset)
    training = check_training(options["training"])
    operator_export_type = check_operator_export_type(options["operator_export_type"])
    operator_export_type = check_legacy_options(unknown_options, operator_export_type,
                                                stacklevel=stacklevel + 1)
    external_data = options["external_data"]
    if unknown_options.get("use_external_data_format") and external_data is None:
        external_data = True
    custom_opsets = check_custom_opsets(options["custom_opsets"])
    check_forward_arguments(model, args, kwargs)
    args, kwargs = bind_scripted_keywords(model, args, kwargs)
    check_devices(model, args, kwargs)
    model, args, kwargs, options = with_quantized_io(model, args, kwargs, options)
    numbers = _number_arguments(model, args, kwargs, options)
    options = {**options, "input_names": _tensor_input_names(options["input_names"], args,
                                                             kwargs)}
    capture = _capture_settings(options, model, args, kwargs, dynamo=dynamo, fallback=fallback,
                                warn_on_fallback=warn_on_fallback, training=training)
    translation = TranslationSettings(
        registry=_registry(registry, options["custom_translation_table"], opset,
                           operator_export_type),
        opset=opset, operator_export_type=operator_export_type,
        export_params=options["export_params"],
        keep_initializers_as_inputs=options["keep_initializers_as_inputs"],
        custom_opsets=custom_opsets, fused_ops=options["fused_ops"], number_arguments=numbers,
        drop_unread_inputs=_follows_torchscript_rules(model, options))
    return ExportPlan(
        model=model, args=args, kwargs=kwargs, capture=capture, translation=translation,
        passes=PassSettings(optimize=options["optimize"], fused_ops=options["fused_ops"],
                            module_functions=module_functions, fake_weights=fake_weights),
        save=SaveSettings(f=options["f"], external_data=external_data),
        diagnostics=_diagnostics_settings(options, model, diagnostic_options),
        verify=options["verify"], verbose=options["verbose"], on_stage=options["on_stage"])


def _capture_settings(options: Mapping[str, Any], model: Any, args: tuple, kwargs: dict,
                      **settings: Any) -> CaptureSettings:
    """The capture's settings, with the dynamic dims of ``dynamic_axes``/``dynamic_shapes``
    resolved against the model's inputs and outputs."""
    from onnxport.capture import parameter_names
    from onnxport.capture.dynamic import resolve_dynamic
    from onnxport.capture.torch_export import var_positional

    exported = isinstance(model, torch.export.ExportedProgram)
    names = _exported_program_argument_names(model, args) if exported else \
        parameter_names(model)
    input_names, output_names = options["input_names"], options["output_names"]
    dynamic = resolve_dynamic(args, kwargs, names, input_names, output_names,
                              options["dynamic_axes"], options["dynamic_shapes"],
                              None if exported else var_positional(model))
    return CaptureSettings(input_names=input_names, output_names=output_names,
                           dynamic_shapes=dynamic.dynamic_shapes, dim_names=dynamic.dim_names,
                           output_dim_names=dynamic.output_dim_names, **settings)


def _follows_torchscript_rules(model: Any, options: Mapping[str, Any]) -> bool:
    """Whether the graph's inputs follow torch.onnx's TorchScript exporter (numbers are
    inputs, unread inputs leave), as on both our paths; its dynamo exporters (``dynamo=True``,
    ``dynamo_export``, an ExportedProgram) keep the tensors and drop the numbers."""
    return options["dynamo"] is not True and not isinstance(model, torch.export.ExportedProgram)


def _number_arguments(model: Any, args: tuple, kwargs: dict,
                      options: Mapping[str, Any]) -> NumberArguments:
    """The graph inputs number arguments become (``_follows_torchscript_rules``)."""
    if not _follows_torchscript_rules(model, options):
        return NumberArguments()
    from onnxport.capture import parameter_names

    return number_arguments(args, kwargs, parameter_names(model), options["input_names"])


def _tensor_input_names(input_names: Sequence[str] | None, args: tuple,
                        kwargs: dict) -> Sequence[str] | None:
    """``input_names`` without the names of number arguments (int, float, bool): torch.onnx's
    TorchScript exporter makes such an argument a graph input, named in turn with the tensors;
    a capture here fixes it to the example's value, so its name goes and the names after it
    still name the tensors (then the weights) they name there."""
    if not input_names:
        return input_names
    import torch.utils._pytree as pytree

    # (None and strings are no graph inputs there either, and take no name)
    leaves = [leaf for leaf in pytree.tree_leaves((args, kwargs))
              if leaf is not None and not isinstance(leaf, str)]
    numbers = [isinstance(leaf, (bool, int, float)) for leaf in leaves]
    if not any(numbers[:len(input_names)]):
        return input_names
    return [name for name, number in zip(input_names, numbers) if not number] + \
        list(input_names[len(leaves):])


def _exported_program_argument_names(program, args: tuple) -> list[str]:
    """The forward's argument names of an ExportedProgram, for dynamic_shapes keyed by them:
    its placeholders are named after them when every argument is one tensor."""
    user_inputs = list(program.graph_signature.user_inputs)
    return user_inputs if len(user_inputs) == len(args) else []


def _registry(registry: Any, table: Mapping[Any, Any] | None, opset: int,
              operator_export_type: Any):
    """The op library the export translates with: the default one or ``registry``, or the
    ``custom_translation_table`` over it, as ``operator_export_type`` asks."""
    from onnxport.translate import default_registry
    from onnxport.compat.operator_export_type import fallback_registry

    registry = registry or default_registry()
    if table:
        registry = _table_registry(table, opset)
    return fallback_registry(registry, operator_export_type)


def _table_registry(table: Mapping[Any, Any], opset: int):
    """torch.onnx's ``custom_translation_table``: ``{torch op: function}`` (an OpOverload such as
    ``torch.ops.aten.add.Tensor``, a packet such as ``torch.ops.aten.add`` for every overload, or
    the name ``"aten::add.Tensor"``), the function ``fn(g, *args, **kwargs)`` or an onnxscript
    function, or a list of them (the first is used). An overlay over the built-in op library
    for this export only, as an ``OnnxRegistry`` is."""
    from onnxport.compat.registry_api import OnnxRegistry

    if not isinstance(table, Mapping):
        raise InvalidExportOptionsError(
            f"custom_translation_table must be a dict {{torch op: function}}, got "
            f"{type(table).__name__}")
    registry = OnnxRegistry(opset)
    for op, functions in table.items():
        function = functions[0] if isinstance(functions, (list, tuple)) and functions \
            else functions
        if isinstance(op, torch._ops.OpOverload):
            name, overload = op._schema.name, op._overloadname
        elif isinstance(op, torch._ops.OpOverloadPacket):
            name, overload = op._qualified_op_name, None
        elif isinstance(op, str) and "::" in op:
            name, _, overload = op.partition(".")
            overload = overload or None
        else:
            raise InvalidExportOptionsError(
                f"custom_translation_table key {op!r} is not a torch op: give "
                "torch.ops.aten.add.Tensor, torch.ops.aten.add or 'aten::add.Tensor'")
        namespace, _, op_name = name.partition("::")
        registry.register_op(function, namespace, op_name, overload)
    return registry


def _diagnostics_settings(options: Mapping[str, Any], model: Any, diagnostic_options: Any):
    import logging

    from onnxport.diagnostics.report import artifact_name
    from onnxport.diagnostics.session import DiagnosticsSettings

    return DiagnosticsSettings(
        name=artifact_name(model), report=options["report"], profile=options["profile"],
        dump_exported_program=options["dump_exported_program"],
        artifacts_dir=options["artifacts_dir"],
        verbosity_level=getattr(diagnostic_options, "verbosity_level", logging.INFO),
        warnings_as_errors=getattr(diagnostic_options, "warnings_as_errors", False))
