"""``export()``: checks its arguments, then runs capture -> translate -> passes -> save."""

from __future__ import annotations

import contextlib
import io
import os
import threading
import time
from typing import Any, Callable, Mapping, Sequence

import onnx_ir as ir
import torch

from onnxport import _arguments, passes
from onnxport._arguments import DEFAULT_OPSET, MAX_OPSET, MIN_OPSET  # noqa: F401 (kept public)
from onnxport.capture import parameter_names
from onnxport.capture.dynamic import resolve_dynamic
from onnxport.capture.torchscript import capture_model
from onnxport.errors import OnnxExporterError, VerificationError
from onnxport.program import ONNXProgram
from onnxport.translate import TranslationContext, default_registry, translate_graph
from onnxport.translate.custom import check_custom_opsets
from onnxport.translate.registry import aten_name

# torch.export is not thread-safe: it keeps process-wide state (the dispatch mode stack, the
# fake-tensor and tracing contexts, patched functions) that two captures running at once
# corrupt, and the failure then reads as the model's fault. One export runs at a time; an
# RLock so that a model whose forward exports (or a callback that does) does not deadlock.
_EXPORT_LOCK = threading.RLock()
_state = threading.local()


def is_in_onnx_export() -> bool:
    """True only while an export is running in this thread."""
    return getattr(_state, "in_export", False)


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
    **unknown_options: Any,
) -> ONNXProgram:
    """Export ``model`` to ONNX; same call as ``torch.onnx.export``.

    Returns an :class:`ONNXProgram`; writes it to ``f`` when ``f`` is given. A failed export
    leaves no file behind and an existing file at ``f`` untouched. Exports from several
    threads are safe but run one at a time (torch.export is not thread-safe).
    """
    _arguments.check_unknown(unknown_options, _arguments.known_options(export))
    _arguments.check_flags(locals())
    _arguments.check_on_stage(on_stage)
    args, kwargs = _arguments.check_args(args, kwargs)
    opset = _arguments.check_opset(opset_version)
    _arguments.check_model(model, dynamo)
    _arguments.check_destination(f)
    _arguments.check_artifacts_dir(artifacts_dir)
    _arguments.check_names(input_names, output_names)
    _arguments.check_dynamic_axes_type(dynamic_axes, dynamic_shapes)
    _arguments.check_not_yet(
        training=training, operator_export_type=operator_export_type,
        export_modules_as_functions=export_modules_as_functions,
        report=report, profile=profile, dump_exported_program=dump_exported_program)
    custom_opsets = check_custom_opsets(custom_opsets)
    _arguments.check_forward_arguments(model, args, kwargs)

    timings: dict[str, float] = {}

    def stage(name: str):
        if on_stage is not None:
            on_stage(name)
        return _timed(timings, name)

    names = parameter_names(model) if not isinstance(model, torch.export.ExportedProgram) else []
    dynamic = resolve_dynamic(args, kwargs, names, input_names, output_names, dynamic_axes,
                              dynamic_shapes)
    registry = getattr(_state, "registry", None) or default_registry()
    was_training = isinstance(model, torch.nn.Module) and model.training
    with _EXPORT_LOCK:
        outer = is_in_onnx_export()
        _state.in_export = True
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
                    custom_opsets=custom_opsets,
                )
                _arguments.check_against_model(onnx_model, captured.input_names, input_names,
                                               output_names, dynamic.output_dim_names)
                _rename_output_dims(onnx_model, captured.output_dim_names)
            if optimize:
                with stage("optimize"):
                    passes.optimize(onnx_model)
            program = ONNXProgram(onnx_model, captured.exported_program,
                                  input_names=captured.input_names,
                                  output_names=captured.output_names)
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
            _state.in_export = outer
            if was_training:
                model.train()
    return program


@contextlib.contextmanager
def translations_from(registry):
    """Exports in this thread inside the block translate with ``registry`` (an
    ``OnnxRegistry``: custom translations over the built-in ones) instead of the default."""
    outer = getattr(_state, "registry", None)
    _state.registry = registry
    try:
        yield
    finally:
        _state.registry = outer


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
            "ONNX Runtime's outputs differ from PyTorch's (rtol 1e-3, atol 1e-4):\n" + report
            + _first_divergence_note(program, args, kwargs))


def _first_divergence_note(program: ONNXProgram, args: tuple, kwargs: dict) -> str:
    """Where the values first part ways, call by call; said when it can be found."""
    from onnxport.verification.find_mismatch import first_divergence

    try:
        divergence = first_divergence(program, args, kwargs)
    except Exception:  # the search is a help: its own failure must not hide the mismatch
        return ""
    if divergence is None:
        return ""
    return (f"\nThe values first differ at {divergence.describe()}\n(onnxport.verification."
            "find_mismatch(model, args) lists every part that differs)")


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


__all__ = ["export", "export_to_pretty_string", "is_in_onnx_export", "OnnxExporterError"]
