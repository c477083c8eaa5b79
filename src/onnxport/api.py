"""``export()``: checks its arguments, then runs capture -> translate -> passes -> save."""

from __future__ import annotations

import contextlib
import io
import os
import time
from typing import Any, Callable, Mapping, Sequence

import onnx_ir as ir
import torch

from onnxport import passes
from onnxport.capture import parameter_names
from onnxport.capture.dynamic import resolve_dynamic
from onnxport.capture.torchscript import capture_model
from onnxport.errors import InvalidExportOptionsError, OnnxExporterError, VerificationError
from onnxport.program import ONNXProgram
from onnxport.translate import TranslationContext, default_registry, translate_graph
from onnxport.translate.registry import aten_name

MIN_OPSET = 13
MAX_OPSET = 23
DEFAULT_OPSET = 18

_in_export = False


def is_in_onnx_export() -> bool:
    """True only while an export is running."""
    return _in_export


def export(
    model: Any,
    args: Any = (),
    f: str | os.PathLike | io.IOBase | None = None,
    *,
    kwargs: Mapping[str, Any] | None = None,
    export_params: bool = True,
    verbose: bool | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    opset_version: int | None = None,
    dynamic_axes: Mapping[str, Any] | None = None,
    keep_initializers_as_inputs: bool = False,
    dynamo: bool = True,
    external_data: bool | None = None,
    dynamic_shapes: Any = None,
    report: bool = False,
    optimize: bool = True,
    verify: bool = False,
    profile: bool = False,
    dump_exported_program: bool = False,
    artifacts_dir: str | os.PathLike = ".",
    fallback: bool = False,
    training: Any = None,
    operator_export_type: Any = None,
    do_constant_folding: bool = True,
    custom_opsets: Mapping[str, int] | None = None,
    export_modules_as_functions: Any = False,
    autograd_inlining: bool = True,
    on_stage: Callable[[str], None] | None = None,
) -> ONNXProgram:
    """Export ``model`` to ONNX; same call as ``torch.onnx.export``.

    Returns an :class:`ONNXProgram`; writes it to ``f`` when ``f`` is given. A failed export
    leaves no file behind and an existing file at ``f`` untouched.
    """
    global _in_export
    timings: dict[str, float] = {}

    def stage(name: str):
        if on_stage is not None:
            on_stage(name)
        return _timed(timings, name)

    args, kwargs = _check_args(args, kwargs)
    opset = _check_opset(opset_version)
    _check_model(model, dynamo)
    _check_destination(f)
    _check_names("input_names", input_names)
    _check_names("output_names", output_names)
    if external_data not in (None, True, False):
        raise InvalidExportOptionsError(
            f"external_data must be True, False or None (automatic), got {external_data!r}")
    _check_not_yet(training=training, operator_export_type=operator_export_type,
                    export_modules_as_functions=export_modules_as_functions,
                    report=report, profile=profile, dump_exported_program=dump_exported_program,
                    custom_opsets=custom_opsets)

    names = parameter_names(model) if not isinstance(model, torch.export.ExportedProgram) else []
    dynamic = resolve_dynamic(args, kwargs, names, input_names, output_names, dynamic_axes,
                              dynamic_shapes)
    registry = default_registry()
    was_training = isinstance(model, torch.nn.Module) and model.training
    _in_export = True
    try:
        if isinstance(model, torch.nn.Module):
            model.eval()
        with stage("capture"):
            captured, strategy, attempts = capture_model(
                model, args, kwargs, dynamo=dynamo, fallback=fallback,
                dynamic_shapes=dynamic.dynamic_shapes, dim_names=dynamic.dim_names,
                input_names=input_names, output_names=output_names,
                output_dim_names=dynamic.output_dim_names,
                keep_op=lambda op: registry.lookup(aten_name(op), opset) is not None,
            )
        with stage("translate"):
            context = TranslationContext(
                graph_module=captured.exported_program.graph_module,
                user_inputs=captured.user_inputs,
                onnx_input_names=captured.input_names,
                weights=captured.weights,
                user_outputs=captured.user_outputs,
                onnx_output_names=captured.output_names,
                symbol_names=captured.symbol_names,
            )
            onnx_model = translate_graph(
                context, registry, opset, export_params=export_params,
                keep_initializers_as_inputs=keep_initializers_as_inputs,
            )
            _rename_output_dims(onnx_model, captured.output_dim_names)
        if optimize:
            with stage("optimize"):
                passes.optimize(onnx_model)
        program = ONNXProgram(onnx_model, captured.exported_program,
                              input_names=captured.input_names, output_names=captured.output_names)
        program.stage_seconds = timings
        program.capture_strategy, program.capture_attempts = strategy, attempts
        if verbose:
            print(export_to_pretty_string_from(program))
        if verify:
            with stage("verify"):
                _verify(program, model, args, kwargs)
        if f is not None:
            with stage("save"):
                program.save(f, external_data=external_data)
    finally:
        _in_export = False
        if was_training:
            model.train()
    return program


@contextlib.contextmanager
def _timed(timings: dict[str, float], name: str):
    start = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = time.perf_counter() - start


def export_to_pretty_string_from(program: ONNXProgram) -> str:
    """The model as readable text (ONNX's textual syntax, weights elided)."""
    return str(program.model)


def export_to_pretty_string(model: Any, args: Any = (), **options) -> str:
    """Export ``model`` without writing a file and return the graph as readable text."""
    options.pop("f", None)
    return export_to_pretty_string_from(export(model, args, None, **options))


def _verify(program: ONNXProgram, model: Any, args: tuple, kwargs: dict) -> None:
    from onnxport.verification.compare import format_report, verify_program

    results = verify_program(program, model, args, kwargs)
    program.verification = results
    report = format_report(results)
    if not all(r.passed for r in results):
        raise VerificationError(
            "ONNX Runtime's outputs differ from PyTorch's (rtol 1e-3, atol 1e-4):\n" + report)


def _rename_output_dims(model: ir.Model, output_dim_names: Mapping[str, Mapping[int, str]]) -> None:
    for value in model.graph.outputs:
        names = output_dim_names.get(value.name)
        if not names or value.shape is None:
            continue
        dims = list(value.shape)
        for axis, name in names.items():
            if -len(dims) <= axis < len(dims):
                dims[axis] = ir.SymbolicDim(name)
        value.shape = ir.Shape(dims)


# -- argument checks -----------------------------------------------------------------------
def _check_args(args: Any, kwargs: Any) -> tuple[tuple, dict]:
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
    return args, kwargs


def _check_opset(opset_version: Any) -> int:
    if opset_version is None:
        return DEFAULT_OPSET
    if isinstance(opset_version, bool) or not isinstance(opset_version, int) or not (
        MIN_OPSET <= opset_version <= MAX_OPSET
    ):
        raise InvalidExportOptionsError(
            f"opset_version={opset_version!r} is not supported; onnxport exports opsets "
            f"{MIN_OPSET} to {MAX_OPSET} (default {DEFAULT_OPSET})")
    return opset_version


def _check_model(model: Any, dynamo: bool) -> None:
    if not isinstance(model, (torch.nn.Module, torch.export.ExportedProgram)) and not callable(model):
        raise InvalidExportOptionsError(
            f"model must be an nn.Module, an ExportedProgram or a function, got "
            f"{type(model).__name__}")


def _check_destination(f: Any) -> None:
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
        if not os.path.isdir(folder):
            raise InvalidExportOptionsError(
                f"cannot write f={path!r}: folder {folder!r} does not exist; create it first")
        if not os.access(folder, os.W_OK):
            raise InvalidExportOptionsError(
                f"cannot write f={path!r}: folder {folder!r} is not writable")
        return
    if hasattr(f, "write"):
        if isinstance(f, io.TextIOBase):
            raise InvalidExportOptionsError(
                "f is a text file object; open it in binary mode ('wb')")
        return
    raise InvalidExportOptionsError(
        f"f must be a path, an os.PathLike, a binary file object or None, got {type(f).__name__}")


def _check_names(argument: str, names: Any) -> None:
    if names is None:
        return
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise InvalidExportOptionsError(f"{argument} must be a list of strings, got {names!r}")
    if len(set(names)) != len(names):
        raise InvalidExportOptionsError(f"{argument} has repeated names: {names!r}")


def _check_not_yet(**options: Any) -> None:
    """Options of torch.onnx.export that this version accepts only at their default."""
    defaults = {"training": (None,), "operator_export_type": (None,),
                "export_modules_as_functions": (False,),
                "report": (False,), "profile": (False,), "dump_exported_program": (False,),
                "custom_opsets": (None,)}
    for name, value in options.items():
        if value is not None and not any(value is d or value == d for d in defaults[name]):
            if name == "training" and str(value).endswith("EVAL"):
                continue
            if name == "operator_export_type" and str(value).endswith("ONNX"):
                continue
            raise InvalidExportOptionsError(
                f"{name}={value!r} is not supported in this version of onnxport; leave it at "
                f"its default")


__all__ = ["export", "export_to_pretty_string", "is_in_onnx_export", "OnnxExporterError"]
