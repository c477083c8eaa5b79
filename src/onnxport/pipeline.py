"""The one runner of an export's stages, in order: capture -> translate -> passes -> check ->
verify -> save, from the per-stage settings of an ``ExportPlan`` (``_arguments`` builds it).
Every front door (``export``, ``dynamo_export``, ``unconvertible_ops``, ``find_mismatch``, the
command line) comes here; no other module calls a stage."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import logging
import threading
import time
import warnings
from typing import Any, Callable, Mapping

import onnx_ir as ir
import torch

from onnxport import _arguments, diagnostics, passes, serialize
from onnxport._arguments import CaptureSettings, ExportPlan, TranslationSettings
from onnxport.capture.strategies import capture_model
from onnxport.compat.autograd_functions import kept_autograd_functions
from onnxport.compat.model_mode import module_modes, restore_module_modes, set_module_mode
from onnxport.diagnostics.session import diagnosing
from onnxport.errors import (InvalidExportOptionsError, InvalidModelError, TranslationError,
                             VerificationError)
from onnxport.fake_weights import drop_fake_weights
from onnxport.passes.manager import CHECK_EACH_PASS
from onnxport.program import ONNXProgram
from onnxport.translate import TranslationContext, translate_graph
from onnxport.translate.graph import missing_translations
from onnxport.translate.number_inputs import add_number_inputs
from onnxport.translate.ops.control_flow import OPTIONAL_OPSET, gives_optionals
from onnxport.translate.unread_inputs import drop_unread_inputs, without
from onnxport.translate.registry import aten_name
from onnxport.verification.validity import check_model, check_structure

# torch.export is not thread-safe: it keeps process-wide state (the dispatch mode stack, the
# fake-tensor and tracing contexts, patched functions) that two captures running at once
# corrupt, and the failure then reads as the model's fault. One export runs at a time; an
# RLock so that a model whose forward exports (or a callback that does) does not deadlock.
# Every run that captures (run, unconvertible_ops) holds it.
EXPORT_LOCK = threading.RLock()
_logger = logging.getLogger("onnxport")  # stage timings; shown by enable_log()
_state = threading.local()  # whether an export is running in this thread: not an option


def is_in_onnx_export() -> bool:
    """True only while an export is running in this thread."""
    return getattr(_state, "in_export", False)


def run(plan: ExportPlan) -> ONNXProgram:
    """Run the export ``plan`` describes and return its program (saved when ``plan.save.f``)."""
    timings: dict[str, float] = {}
    modes = module_modes(plan.model)
    with EXPORT_LOCK, _collection_paused(), diagnosing(plan.diagnostics, timings) as session:
        outer = is_in_onnx_export()
        _state.in_export = True
        try:
            program = _run_checked_at_the_end(plan, session, timings)
        finally:
            _state.in_export = outer
            restore_module_modes(modes)
    return program


def _run_checked_at_the_end(plan: ExportPlan, session, timings: dict[str, float]) -> ONNXProgram:
    """:func:`_run_stages` with the model's structure checked once, at the end; when that
    check fails, the export runs again checked after translation and after each pass, so that
    the error names the one that broke the model."""
    if not CHECK_EACH_PASS.get():
        return _run_stages(plan, session, timings)
    token = CHECK_EACH_PASS.set(False)
    try:
        return _run_stages(plan, session, timings)
    except InvalidModelError:
        CHECK_EACH_PASS.reset(token)
        token = None
        return _run_stages(plan, session, timings)  # (raises naming the stage or pass)
    finally:
        if token is not None:
            CHECK_EACH_PASS.reset(token)


def _run_stages(plan: ExportPlan, session, timings: dict[str, float]) -> ONNXProgram:
    stage = functools.partial(_stage, plan.on_stage, timings)
    translation = plan.translation
    captured, strategy, attempts = _capture(plan.model, plan.args, plan.kwargs, plan.capture,
                                            translation, stage)
    session.exported_program = captured.exported_program
    translation = _opset_for_optionals(captured, translation)
    _name_weights(captured, plan.model, plan.capture.input_names)
    if hasattr(translation.registry, "prepare"):  # operator_export_type's FallbackRegistry
        translation.registry.prepare(captured.exported_program.graph_module, translation.opset)
    for failed, reason in attempts:
        diagnostics.record("OPX0002", f"capture with {failed} failed, {strategy} was "
                           f"used instead: {reason}", strategy=failed)
    with stage("translate"):
        onnx_model, numbers, input_names = _translate(captured, plan.capture, translation)
    _run_passes(onnx_model, plan.passes, captured.weights, stage)
    unread = _drop_unread_inputs(onnx_model, input_names, numbers, plan.capture.dim_names) \
        if translation.drop_unread_inputs else []
    with stage("check"):
        header = check_model(onnx_model, "the export (translation, passes, type casts and "
                                         "module functions)")
    # Fake weights (enable_fake_mode) have shapes, no values: each becomes a MissingWeight,
    # and the passes that need no values run in place of the optimizations left out.
    if plan.passes.fake_weights:
        drop_fake_weights(onnx_model)
        passes.run_preset(onnx_model, "weight-free")
    program = ONNXProgram(onnx_model, captured.exported_program,
                          input_names=without(input_names, unread),
                          output_names=captured.output_names)
    program.number_inputs = numbers
    program.unread_inputs = unread
    program.stage_seconds = timings
    program.diagnostics = session.recorder
    session.program = program
    program.capture_strategy, program.capture_attempts = strategy, attempts
    if plan.verbose:
        print(pretty_string(program))
    if plan.verify:
        with stage("verify"):
            _verify(program, plan.model, plan.args, plan.kwargs)
    if plan.save.f is not None:
        # The checked model, unchanged since (no fake weights dropped, no verification run),
        # is saved from the bytes the check serialized.
        unchanged = not plan.passes.fake_weights and not plan.verify
        with stage("save"), serialize.header_known(onnx_model, header) if unchanged \
                else contextlib.nullcontext():
            program.save(plan.save.f, external_data=plan.save.external_data)
    return program


def _capture(model: Any, args: tuple, kwargs: dict, settings: CaptureSettings,
             translation: TranslationSettings, stage: Callable):
    """The capture stage: the model in the training mode asked for, autograd Functions kept
    as one call where translation has a symbolic for them."""
    registry, opset = translation.registry, translation.opset
    if settings.training is not None:
        set_module_mode(model, settings.training)
    with stage("capture"):
        captured, strategy, attempts = capture_model(
            model, args, kwargs, **settings.capture_options(),
            keep_functions=kept_autograd_functions(opset, translation.operator_export_type),
            keep_op=lambda op: registry.lookup(aten_name(op), opset) is not None)
    return captured, strategy, attempts


def _opset_for_optionals(captured, translation: TranslationSettings) -> TranslationSettings:
    """The settings at opset 16 where scripted code gives a tensor or None (an Optional output
    of a branch or loop) and an older opset was asked for, with a warning: ONNX If and Loop
    take optional types from opset 16 (torch.onnx writes them at the opset asked, a model
    onnx.checker and ONNX Runtime refuse)."""
    if translation.opset >= OPTIONAL_OPSET or \
            not gives_optionals(captured.exported_program.graph_module):
        return translation
    warnings.warn(
        f"the model's scripted code gives a tensor or None (an Optional[Tensor] set in a branch "
        f"or loop), which ONNX If and Loop take from opset {OPTIONAL_OPSET}: the model is "
        f"exported at opset {OPTIONAL_OPSET}, not {translation.opset}. To keep opset "
        f"{translation.opset}, give the value a tensor on every path instead of None",
        UserWarning, stacklevel=_arguments._caller_level())
    return dataclasses.replace(translation, opset=OPTIONAL_OPSET)


def _translation_context(captured) -> TranslationContext:
    return TranslationContext(
        graph_module=captured.exported_program.graph_module,
        user_inputs=captured.user_inputs,
        onnx_input_names=captured.input_names,
        weights=captured.weights,
        user_outputs=captured.user_outputs,
        onnx_output_names=captured.output_names,
        symbol_names=captured.symbol_names,
        upper_bounds=captured.upper_bounds,
    )


def _translate(captured, capture: CaptureSettings,
               translation: TranslationSettings) -> tuple[ir.Model, list, list[str]]:
    """The translate stage, with the checks that need the translated graph: the model, the
    inputs number arguments became (``translate.number_inputs``) and the names of the user
    inputs, numbers among them."""
    onnx_model = translate_graph(_translation_context(captured), translation.registry,
                                 translation.opset, **translation.graph_options())
    if not onnx_model.graph.outputs:  # (ONNX Runtime cannot load a graph of no output)
        raise TranslationError(
            "the model returns no tensor at this example (None, or only empty lists, tuples "
            "or dicts): an ONNX graph needs at least one output; return a tensor")
    numbers = _with_number_inputs(onnx_model, translation.number_arguments,
                                  captured.input_names)
    input_names = _input_names(captured.input_names, numbers)
    _arguments.check_against_model(onnx_model, input_names,
                                   (capture.input_names or [])[:len(captured.input_names)],
                                   capture.output_names, capture.output_dim_names)
    _rename_output_dims(onnx_model, captured.output_dim_names)
    if CHECK_EACH_PASS.get():
        check_structure(onnx_model, "translation")
    return onnx_model, numbers, input_names


def _drop_unread_inputs(onnx_model: ir.Model, input_names: list[str], numbers,
                        dim_names: dict | None) -> list[int]:
    """The inputs the graph does not read removed (``translate.unread_inputs``), with a
    warning naming them; their positions among the call's inputs. An input with a dynamic
    axis asked for that the capture fixed (warning of it) stays: the graph computes with its
    example's size there (torch.zeros(x.chunk(3)[2].size(0))), and ONNX Runtime refuses
    other sizes only of an input it has."""
    numbered = {n.name for n in numbers}
    tensors = [value for value in onnx_model.graph.inputs[:len(input_names)]
               if value.name not in numbered]
    fixed = {tensors[k].name for k, axis in (dim_names or {}) if k < len(tensors)
             and tensors[k].shape is not None and axis < len(tensors[k].shape)
             and isinstance(tensors[k].shape[axis], int)}
    unread = drop_unread_inputs(onnx_model, len(input_names), [*numbered, *fixed])
    if unread:
        names = ", ".join(input_names[k] for k in unread)
        plural = len(unread) > 1
        warnings.warn(
            f"the model does not read input{'s' if plural else ''} {names} (or only a static "
            f"size of {'them' if plural else 'it'}): no input of the ONNX graph, as under "
            "torch.onnx's TorchScript exporter; ONNXProgram still takes every argument, ONNX "
            "Runtime only the inputs kept. dynamo=True keeps every input.", UserWarning,
            stacklevel=_arguments._caller_level())
    return unread


def _input_names(tensor_inputs: list[str], numbers) -> list[str]:
    names = list(tensor_inputs)
    for number in numbers:
        names.insert(number.position, number.name)
    return names


def _with_number_inputs(onnx_model: ir.Model, arguments, input_names: list[str]) -> list:
    """The graph inputs of the number arguments added (torch.onnx's TorchScript exporter's
    calling convention), with a warning that they only stand in their places."""
    numbers = add_number_inputs(onnx_model, arguments, input_names)
    if not numbers:
        return numbers
    plural = len(numbers) > 1
    warnings.warn(
        f"the number argument{'s' if plural else ''} "
        f"{', '.join(f'{n.name}={n.value!r}' for n in numbers)} "
        f"{'are graph inputs in their places' if plural else 'is a graph input in its place'}, "
        "as torch.onnx's TorchScript exporter makes them, but the graph computes with the "
        "example's value: another value fed there changes nothing. Pass a tensor "
        "(torch.tensor(value)) where the value must stay an input.", UserWarning,
        stacklevel=_arguments._caller_level())
    return numbers


def _run_passes(onnx_model: ir.Model, settings, weights, stage: Callable) -> None:
    """The passes, one preset: the optimizations asked for (``default``) or only the required
    rewrites (``required-only``: without them a bfloat16 Conv before opset 22 is invalid ONNX),
    then the module functions outlined."""
    outline = passes.OutlineModuleFunctions(settings.module_functions,
                                            [name for name, _ in weights.values()])
    with stage("passes"):
        passes.run_preset(onnx_model, "default" if settings.optimize else "required-only",
                          **settings.preset_options(), outline=outline)


def unconvertible_ops(model: Any, args: tuple, kwargs: dict, capture: CaptureSettings,
                      translation: TranslationSettings) -> tuple[torch.fx.Graph, list[str]]:
    """Capture ``model`` as ``run`` does and return its graph with the names of every op in it
    (or in the decompositions of its ops) that has no translation, without translating."""
    with EXPORT_LOCK:
        modes = module_modes(model)
        try:
            captured, _, _ = _capture(model, args, kwargs, capture, translation,
                                      contextlib.nullcontext)
        finally:
            restore_module_modes(modes)
    return captured.exported_program.graph, missing_translations(
        _translation_context(captured), translation.registry, translation.opset)


def pretty_string(program: ONNXProgram) -> str:
    """The model as readable text (ONNX's textual syntax, weights elided)."""
    return str(program.model)


def _name_weights(captured, model: Any, input_names) -> None:
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
        raise InvalidExportOptionsError(
            f"input_names names weights {clashes}, which are the names of other weights of "
            f"the model (those not renamed); choose other names")
    # In that order too as graph inputs (keep_initializers_as_inputs=True).
    captured.weights = {by_name[name]: (renamed.get(name, name), captured.weights[by_name[name]][1])
                        for name in order}


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


def _stage(on_stage: Callable[[str], None] | None, timings: dict[str, float], name: str):
    """Stage ``name`` begins: said to ``on_stage``; its time is kept in ``timings``."""
    if on_stage is not None:
        on_stage(name)
    return _timed(timings, name)


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
