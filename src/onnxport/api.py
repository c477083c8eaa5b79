"""``export()``: checks its arguments, then runs capture -> translate -> passes -> save."""

from __future__ import annotations

import contextlib
import gc
import io
import logging
import os
import threading
import time
import types
import warnings
from typing import Any, Callable, Mapping, Sequence

import onnx_ir as ir
import torch

from onnxport import _arguments, diagnostics, passes
from onnxport._arguments import DEFAULT_OPSET, MAX_OPSET, MIN_OPSET  # noqa: F401 (kept public)
from onnxport.capture import parameter_names
from onnxport.capture.torch_export import var_positional
from onnxport.capture.dynamic import resolve_dynamic
from onnxport.capture.quirks.autograd_functions import keep_autograd_functions, record_calls
from onnxport.capture.strategies import capture_model
from onnxport._model_mode import module_modes, restore_module_modes, set_module_mode
from onnxport.translate.fallback import fallback_registry
from onnxport.diagnostics import report as reports
from onnxport.errors import OnnxExporterError, UnsupportedOpsError, VerificationError
from onnxport.program import ONNXProgram
from onnxport.verification.validity import check_model, check_structure
from onnxport.translate import TranslationContext, default_registry, translate_graph
from onnxport.translate.custom import check_custom_opsets, kept_autograd_functions
from onnxport.translate.registry import aten_name

# torch.export is not thread-safe: it keeps process-wide state (the dispatch mode stack, the
# fake-tensor and tracing contexts, patched functions) that two captures running at once
# corrupt, and the failure then reads as the model's fault. One export runs at a time; an
# RLock so that a model whose forward exports (or a callback that does) does not deadlock.
# Every front door that captures (export, utils.unconvertible_ops) holds it.
EXPORT_LOCK = threading.RLock()
_logger = logging.getLogger("onnxport")  # stage timings; shown by enable_log()
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
    dynamo: bool | None = None,
    external_data: bool | None = None,
    dynamic_shapes: Any = None,
    report: bool = False,
    optimize: bool = True,
    fused_ops: bool = True,
    verify: bool = False,
    profile: bool = False,
    dump_exported_program: bool = False,
    artifacts_dir: str | os.PathLike = ".",
    fallback: bool | None = None,
    training: Any = None,
    operator_export_type: Any = None,
    do_constant_folding: bool = True,
    custom_opsets: Mapping[str, int] | None = None,
    export_modules_as_functions: Any = False,
    autograd_inlining: bool = True,
    on_stage: Callable[[str], None] | None = None,
    custom_translation_table: Mapping[Any, Any] | None = None,
    **unknown_options: Any,
) -> ONNXProgram:
    """Export ``model`` to ONNX; same call as ``torch.onnx.export``.

    ``dynamo`` and ``fallback`` left at None: torch.export, and the TorchScript path (tracing)
    with a ``FallbackWarning`` when torch.export fails; ``fallback=False`` or ``dynamo=True``
    make that failure an error, ``dynamo=False`` traces only.
    Returns an :class:`ONNXProgram`; writes it to ``f`` when ``f`` is given. A failed export
    leaves no file behind and an existing file at ``f`` untouched. Exports from several
    threads are safe but run one at a time (torch.export is not thread-safe).
    """
    _arguments.check_unknown({k: v for k, v in unknown_options.items()
                              if k not in _arguments.LEGACY_OPTIONS},
                             _arguments.known_options(export))
    _arguments.check_flags(locals())
    _arguments.check_on_stage(on_stage)
    args, kwargs = _arguments.check_args(args, kwargs)
    opset = _arguments.check_opset(opset_version)
    dynamo, fallback, warn_on_fallback = _arguments.capture_path(dynamo, fallback)
    _arguments.check_model(model, dynamo)
    _arguments.check_destination(f)
    _arguments.check_artifacts_dir(artifacts_dir)
    _arguments.check_names(input_names, output_names)
    _arguments.check_dynamic_axes_type(dynamic_axes, dynamic_shapes)
    module_functions = passes.modules_to_export_as_functions(
        model, export_modules_as_functions, opset)
    training = _arguments.check_training(training)
    operator_export_type = _arguments.check_operator_export_type(operator_export_type)
    operator_export_type = _arguments.check_legacy_options(unknown_options,
                                                           operator_export_type)
    if unknown_options.get("use_external_data_format") and external_data is None:
        external_data = True
    custom_opsets = check_custom_opsets(custom_opsets)
    _arguments.check_forward_arguments(model, args, kwargs)
    _arguments.check_devices(model, args, kwargs)

    timings: dict[str, float] = {}

    def stage(name: str):
        if on_stage is not None:
            on_stage(name)
        return _timed(timings, name)

    names = parameter_names(model) if not isinstance(model, torch.export.ExportedProgram) else \
        _exported_program_argument_names(model, args)
    dynamic = resolve_dynamic(args, kwargs, names, input_names, output_names, dynamic_axes,
                              dynamic_shapes,
                              None if isinstance(model, torch.export.ExportedProgram)
                              else var_positional(model))
    registry = getattr(_state, "registry", None) or default_registry()
    if custom_translation_table:
        registry = _table_registry(custom_translation_table, opset)
    registry = fallback_registry(registry, operator_export_type)
    modes = module_modes(model)
    settings = getattr(_state, "diagnostic_options", None)
    recorder = diagnostics.Recorder(
        verbosity_level=getattr(settings, "verbosity_level", logging.INFO))
    artifacts = dict(report=report, profile=profile, dump_exported_program=dump_exported_program,
                     artifacts_dir=artifacts_dir, name=reports.artifact_name(model))
    with EXPORT_LOCK, _collection_paused(), \
            _diagnosing(recorder, timings, settings, **artifacts) as session:
        outer = is_in_onnx_export()
        _state.in_export = True
        try:
            set_module_mode(model, training)
            with stage("capture"), keep_autograd_functions(
                    kept_autograd_functions(opset, operator_export_type)):
                captured, strategy, attempts = capture_model(
                    model, args, kwargs, dynamo=dynamo, fallback=fallback,
                    warn_on_fallback=warn_on_fallback,
                    dynamic_shapes=dynamic.dynamic_shapes, dim_names=dynamic.dim_names,
                    input_names=input_names, output_names=output_names,
                    output_dim_names=dynamic.output_dim_names,
                    keep_op=lambda op: registry.lookup(aten_name(op), opset) is not None,
                )
                record_calls(captured.exported_program.graph_module)
            session.exported_program = captured.exported_program
            _name_weights(captured, model, input_names)
            if hasattr(registry, "prepare"):  # operator_export_type's FallbackRegistry
                registry.prepare(captured.exported_program.graph_module, opset)
            for failed, reason in attempts:
                diagnostics.record("OPX0002", f"capture with {failed} failed, {strategy} was "
                                   f"used instead: {reason}", strategy=failed)
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
                    custom_opsets=custom_opsets, fused_ops=fused_ops,
                )
                _arguments.check_against_model(onnx_model, captured.input_names,
                                               (input_names or [])[:len(captured.input_names)],
                                               output_names, dynamic.output_dim_names)
                _rename_output_dims(onnx_model, captured.output_dim_names)
                check_structure(onnx_model, "translation")
            with stage("passes"):
                passes.run_preset(onnx_model, "default" if optimize else "required-only",
                                  fused_ops=fused_ops, outline=passes.OutlineModuleFunctions(
                                      module_functions, [n for n, _ in captured.weights.values()]))
            with stage("check"):
                check_model(onnx_model, "the export (translation, passes, type casts and "
                                        "module functions)")
            program = ONNXProgram(onnx_model, captured.exported_program,
                                  input_names=captured.input_names,
                                  output_names=captured.output_names)
            program.stage_seconds = timings
            program.diagnostics = recorder
            session.program = program
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
            restore_module_modes(modes)
    return program


def _table_registry(table: Mapping[Any, Any], opset: int):
    """torch.onnx's ``custom_translation_table``: ``{torch op: function}`` (an OpOverload such as
    ``torch.ops.aten.add.Tensor``, a packet such as ``torch.ops.aten.add`` for every overload, or
    the name ``"aten::add.Tensor"``), the function ``fn(g, *args, **kwargs)`` or an onnxscript
    function, or a list of them (the first is used). An overlay over the built-in op library
    for this export only, as an ``OnnxRegistry`` is."""
    from onnxport.errors import InvalidExportOptionsError
    from onnxport.registry_api import OnnxRegistry

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


def _exported_program_argument_names(program, args: tuple) -> list[str]:
    """The forward's argument names of an ExportedProgram, for dynamic_shapes keyed by them:
    its placeholders are named after them when every argument is one tensor."""
    user_inputs = list(program.graph_signature.user_inputs)
    return user_inputs if len(user_inputs) == len(args) else []


def _name_weights(captured, model: Any, input_names: Sequence[str] | None) -> None:
    """``input_names`` past the model's inputs name its weights, in the order torch.onnx's
    traced graph takes them: the state_dict's (AlexNet's ``learned_0``...``learned_15``)."""
    extra = list(input_names or [])[len(captured.input_names):]
    if not extra:
        return
    by_name = {onnx_name: fx_name for fx_name, (onnx_name, _) in captured.weights.items()}
    if isinstance(model, torch.nn.Module):
        order = [name for name in torch.jit._unique_state_dict(model, keep_vars=True)
                 if name in by_name]
    else:
        order = list(by_name)
    order += [name for name in by_name if name not in order]
    renamed = dict(zip(order, extra))
    clashes = sorted(set(extra) & (set(order) - set(renamed)))
    if clashes:
        from onnxport.errors import InvalidExportOptionsError

        raise InvalidExportOptionsError(
            f"input_names names weights {clashes}, which are the names of other weights of "
            f"the model (those not renamed); choose other names")
    # In that order too as graph inputs (keep_initializers_as_inputs=True).
    captured.weights = {by_name[name]: (renamed.get(name, name), captured.weights[by_name[name]][1])
                        for name in order}


@contextlib.contextmanager
def translations_from(registry):
    """Exports in this thread inside the block translate with ``registry`` (an
    ``OnnxRegistry``: custom translations over the built-in ones) instead of the default."""
    with _thread_setting("registry", registry):
        yield


@contextlib.contextmanager
def diagnostic_settings(options):
    """Exports in this thread inside the block report with ``options`` (a
    ``DiagnosticOptions``: which levels are kept, whether warnings fail the export)."""
    with _thread_setting("diagnostic_options", options):
        yield


@contextlib.contextmanager
def _thread_setting(name: str, value):
    """``_state.<name>`` is ``value`` in this thread inside the block, as it was after it."""
    outer = getattr(_state, name, None)
    setattr(_state, name, value)
    try:
        yield
    finally:
        setattr(_state, name, outer)


@contextlib.contextmanager
def _diagnosing(recorder, timings: dict[str, float], settings, *, report: bool, profile: bool,
                dump_exported_program: bool, artifacts_dir, name: str):
    """Around one export: makes ``recorder`` the one the stages report to, records the Python
    warnings raised (and raises them again after), the failure if any, and writes the
    artifacts asked for, also when the export failed (that is when they help most)."""
    session = types.SimpleNamespace(program=None, exported_program=None)
    profiler = _start_profiler() if profile else None
    failure = None
    caught: list = []
    try:
        with diagnostics.recording(recorder), warnings.catch_warnings(record=True) as caught:
            try:
                yield session
            except BaseException as error:
                failure = error
                _record_failure(recorder, error, timings)
                if isinstance(error, Exception) and not hasattr(error, "recorder"):
                    error.recorder = recorder  # what the export recorded until it failed
                raise
            finally:
                if profiler is not None:
                    profiler.disable()
                for caught_warning in caught:
                    _record_warning(recorder, caught_warning)
    finally:
        for w in caught:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
        recorder.stage_seconds = dict(timings)
        try:
            _write_artifacts(session, recorder, failure, report=report, profiler=profiler,
                             profile=profile, dump_exported_program=dump_exported_program,
                             folder=artifacts_dir, name=name)
        except OSError:
            if failure is None:
                raise
    # torch's own warnings about its internals (raised from torch's files) say nothing of
    # this export: they are recorded, but do not fail it.
    failing = [r for r in recorder.warnings if not r.properties.get("from_torch")]
    if settings is not None and settings.warnings_as_errors and failing:
        listed = "\n".join(f"  - {r.location + ': ' if r.location else ''}{r.message}"
                           for r in failing)
        raise OnnxExporterError(
            f"{len(failing)} warning(s) during the export, and "
            f"DiagnosticOptions(warnings_as_errors=True) makes them errors:\n{listed}")


def _start_profiler():
    import cProfile

    profiler = cProfile.Profile()
    try:
        profiler.enable()
    except ValueError:  # another profiler is active (a debugger, an outer cProfile)
        return None
    return profiler


_TORCH_FOLDER = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


def _record_warning(recorder, caught) -> None:
    category = caught.category.__name__
    # torch's TracerWarning and the capture's TracingWarning: a value fixed at its traced one.
    rule = "OPX0005" if category in ("TracerWarning", "TracingWarning") else "OPX0004"
    from_torch = {"from_torch": True} if (
        rule == "OPX0004" and os.path.abspath(caught.filename).startswith(_TORCH_FOLDER)) else {}
    recorder.record(rule, f"{category}: {caught.message}",
                    file=diagnostics.relative_path(caught.filename), line=caught.lineno,
                    category=category, **from_torch)


def _record_failure(recorder, error: BaseException, timings: dict[str, float]) -> None:
    if isinstance(error, UnsupportedOpsError):
        for op, places in sorted(error.missing.items()):
            recorder.record("OPX0003", f"{op} has no translation at opset {error.opset} and no "
                            "decomposition into ops that have one",
                            source=places[0] if places else None, op=op, places=places)
    stage = list(timings)[-1] if timings else "argument checks"
    first_line = (str(error).strip().splitlines() or [""])[0]
    recorder.record("OPX0007", f"the export failed during {stage}: {type(error).__name__}: "
                    f"{first_line}", stage=stage)


def _write_artifacts(session, recorder, failure, *, report: bool, profiler, profile: bool,
                     dump_exported_program: bool, folder, name: str) -> None:
    if not (report or profile or dump_exported_program):
        return
    program = session.program
    if report:
        text = reports.report_markdown(
            recorder, title=name.removeprefix("onnx_export_"),
            model=program.model if program is not None else None,
            status="success" if failure is None else "failed", error=failure,
            verification=getattr(program, "verification", None))
        reports.write_text(folder, name + ".md", text)
    if profile:
        reports.write_text(folder, name + "_profile.txt",
                           reports.profile_text(profiler, recorder.stage_seconds))
    if dump_exported_program and session.exported_program is not None:
        reports.write_text(folder, name + "_exported_program.txt", str(session.exported_program))
        _save_exported_program(session.exported_program, os.path.join(os.fspath(folder),
                                                                       name + ".pt2"))


def _save_exported_program(program, path: str) -> None:
    """The ExportedProgram as torch.export.save writes it (``torch.export.load`` reads it back),
    as torch.onnx's dump_exported_program does; the text beside it is for reading."""
    try:
        torch.export.save(program, path)
    except Exception as error:  # noqa: BLE001 - a graph torch cannot serialize
        with contextlib.suppress(OSError):
            os.remove(path)
        # The TorchScript path's graph may hold calls torch's serializer does not know (a
        # scripted loop); the text dump is still written.
        warnings.warn(f"dump_exported_program: torch.export.save could not write {path} "
                      f"({type(error).__name__}: {(str(error).strip().splitlines() or [''])[0]});"
                      " the text dump beside it was written", UserWarning)


@contextlib.contextmanager
def _collection_paused():
    """Python's cyclic garbage collector off during an export: the many objects an export
    makes (graph nodes, fake tensors, ONNX values) trigger full collections that walk the
    whole heap, torch's objects included, and find little to free (timings in
    benchmarks/README.md); what the export leaves is collected after it, at most once."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextlib.contextmanager
def _timed(timings: dict[str, float], name: str):
    start = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = time.perf_counter() - start
        _logger.info("%s took %.3f s", name, timings[name])


def export_to_pretty_string_from(program: ONNXProgram) -> str:
    """The model as readable text (ONNX's textual syntax, weights elided)."""
    return str(program.model)


def export_to_pretty_string(model: Any, args: Any = (), **options) -> str:
    """Export ``model`` without writing a file and return the graph as readable text."""
    options.pop("f", None)
    return export_to_pretty_string_from(export(model, args, None, **options))


def _verify(program: ONNXProgram, model: Any, args: tuple, kwargs: dict) -> None:
    from onnxport.verification.compare import format_report, tolerance_for, verify_program

    rtol, atol = tolerance_for(model, args, kwargs)
    results = verify_program(program, model, args, kwargs, rtol=rtol, atol=atol)
    program.verification = results
    for result in results:
        if not result.passed:
            diagnostics.record("OPX0006", f"output {result.name} differs from PyTorch's: max abs "
                               f"diff {result.max_abs_diff:.3g}, max rel diff "
                               f"{result.max_rel_diff:.3g}", output=result.name)
    report = format_report(results)
    if not all(r.passed for r in results):
        raise VerificationError(
            f"ONNX Runtime's outputs differ from PyTorch's (rtol {rtol:g}, atol {atol:g}):\n"
            + report
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
