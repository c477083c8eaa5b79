"""Capture by tracing (``dynamo=False`` and the last strategy of ``fallback=True``): one run of
the TorchScript tracer, then torch's TorchScript-to-FX converter; one fake-tensor pass over that
straight-line program (torch.export over it when that pass cannot) makes it an ExportedProgram,
so that translate/ gets the same kind of graph as from torch.export.

One module per phase, in the order an export runs them:
  trace.py       one run of the tracer over the model (script.py: a scripted model instead;
                 unrecorded_numbers.py: numbers the tracer keeps silently, warned of)
  branches.py    scripted branches the graph decides, decided (raises, warnings, ranks)
                 (ranks.py: the ranks of scripted code's values, from the inputs';
                 uninitialized.py: the results a branch leaves unset, typed as the other's)
  convert.py     torch's TorchScript-to-FX converter (loops.py: scripted loops as prim_loop;
                 list_scans.py: lists they append to; unrolling.py: loops of a known count;
                 size_lists.py: x.shape as a list of sizes, and Python's ops on it;
                 pieces.py: a piece of a split, computed from the size)
  aten_graph.py  the converted graph on ATen overloads, its weights made placeholders
  sizes.py       sizes the tracer read back from tensors: symbols, or this run's numbers
  constants.py   tensors filled through views with constants, folded to their values
  propagate.py   one fake-tensor pass that makes the graph an ExportedProgram (fake_calls.py:
                 one call of it on fake values; subgraphs.py: loop bodies and branches)
  replay.py      torch.export over the traced program, when that pass cannot
(fx_helpers.py: small helpers over FX graphs that the phases share.)"""

from __future__ import annotations

import logging
import warnings
from typing import Any, Callable, Mapping, Sequence

import torch
import torch.utils._pytree as pytree

from onnxport.capture import quirks
from onnxport.capture.dynamic import onnx_input_names, tensor_input_slots
from onnxport.capture.torch_export import CapturedProgram, capture_torch_export, parameter_names
from onnxport.capture.torchscript.convert import _to_fx
from onnxport.capture.torchscript.list_scans import LIST_EDITS, ReturnedListError, sequence_outputs
from onnxport.capture.torchscript.loops import prim_loop
from onnxport.capture.torchscript.propagate import SCRIPTED, _propagated, _propagated_static
from onnxport.capture.torchscript.replay import (_REPLAY_PREFIX, _export_traced,
                                              _warn_fixed_or_bounded)
from onnxport.capture.torchscript.script import (_NUMBERS, _frozen, _script_state,
                                                is_tensor_sequence)
from onnxport.capture.torchscript.sizes import (_drop_runtime_asserts, _read_back_hints,
                                              ones_as_twos)
from onnxport.capture.torchscript.trace import _PREFIX, _TracedCall, _trace
from onnxport.capture.torchscript.unrolling import KEPT_LOOPS, unrolling_every_loop
from onnxport.errors import CaptureError, InvalidExportOptionsError, TracingWarning

# TracingWarning lives in onnxport.errors; it is imported from here too.
__all__ = ["TracingWarning", "capture_tracing"]


def capture_tracing(
    model: Any,
    args: tuple,
    kwargs: dict,
    *,
    dim_names: Mapping[tuple[int, int], str] | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    output_dim_names: Mapping[str, dict[int, str]] | None = None,
    keep_op: Callable[[Any], bool] | None = None,
) -> CapturedProgram:
    """Trace ``model`` once on the example inputs and describe the result like
    :func:`capture_torch_export` does.

    Loops are unrolled and only the branches taken are kept; a tensor read as a Python value
    becomes a constant (each gives a :class:`TracingWarning` naming its line). Sizes read with
    ``x.size()`` or ``x.shape`` stay computed from the input, so the dims in ``dim_names`` are
    dynamic; so do sizes computed from them with tensor ops and read back as numbers
    (torchvision's detection transform and anchors), unless an op fixes one (a warning names
    it).
    """
    if isinstance(model, torch.export.ExportedProgram):
        raise InvalidExportOptionsError(
            "an ExportedProgram cannot be traced (dynamo=False); pass it with dynamo=True, or "
            "pass the nn.Module it was exported from")
    dim_names = dict(dim_names or {})
    slots = tensor_input_slots(args, kwargs, parameter_names(model))
    leaves, spec = pytree.tree_flatten((args, kwargs))
    positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    tensors = tuple(leaves[i] for i in positions)
    if len(tensors) != len(slots):  # both flatten the same pytree; a mismatch is our bug
        raise CaptureError(f"tracing found {len(tensors)} tensor inputs, expected {len(slots)}")
    readable: list[str | None] = []
    if isinstance(model, (torch.jit.ScriptModule, torch.jit.ScriptFunction)):
        if kwargs or not all(isinstance(arg, (torch.Tensor, *_NUMBERS))
                             or is_tensor_sequence(arg) for arg in args):
            raise InvalidExportOptionsError(
                "a scripted model (ScriptModule, ScriptFunction) takes its example inputs as "
                "positional tensors, lists or tuples of tensors, numbers, bools and strings; "
                "dicts, nested lists and keyword arguments cannot be bound: pass the original "
                "nn.Module, or script a wrapper that takes them apart")
    dynamic = [
        {axis: torch.export.Dim.DYNAMIC for (k, axis) in dim_names if k == position} or None
        for position in range(len(tensors))
    ]
    if isinstance(model, (torch.jit.ScriptModule, torch.jit.ScriptFunction)):
        program = _scripted_program(_frozen(model), args, tensors, dynamic, set(dim_names))
    else:
        wrapper = _TracedCall(model, leaves, spec, positions)
        state = _trace(wrapper, tensors, dynamic=bool(dim_names))
        program = _program_keeping_loops(lambda: _to_fx(state), tensors, dynamic)
        readable = wrapper.output_names
    names = onnx_input_names(input_names, [slot.name for slot in slots])
    captured = capture_torch_export(
        program, (), {}, dim_names=dim_names, input_names=names, output_names=output_names,
        output_dim_names=output_dim_names, keep_op=keep_op)
    _name_outputs(captured, readable, len(output_names or []))
    captured.weights = {
        name: (target.removeprefix(_REPLAY_PREFIX).removeprefix(_PREFIX), tensor)
        for name, (target, tensor) in captured.weights.items()
    }
    return captured


def _program(graph_module: torch.fx.GraphModule, tensors: tuple,
             dynamic: list) -> torch.export.ExportedProgram:
    """The converted graph as an ExportedProgram: propagated here, else exported again."""
    # An op that fails on fake tensors is reported by the CaptureError that names it; torch
    # would also log it to stderr, with a traceback. (A filter, not setLevel: each setLevel
    # clears the cached levels of every logger, torch's hundreds, twice an export.)
    fake_log = logging.getLogger("torch._subclasses.fake_tensor")
    fake_log.addFilter(_critical_only)
    try:
        with quirks.applied("replay"), warnings.catch_warnings():
            # (torch.cond's note on a branch the graph decided already, one per If: a scripted
            # ViT gave 72 of them)
            warnings.filterwarnings("ignore", "Pred is a Python constant", UserWarning)
            fixed: list = []
            program = _propagated_program(graph_module, tensors, dynamic, fixed)
            if program is None:
                _refuse_run_time_loops(graph_module)
                try:
                    program = _export_traced(graph_module, tensors, dynamic, fixed)
                except CaptureError:
                    program = _propagated_fixing_dims(graph_module, tensors, dynamic, fixed)
                    if program is None:
                        raise
                _drop_runtime_asserts(program)
            _refuse_list_edits(program.graph_module)
    finally:
        fake_log.removeFilter(_critical_only)
    return program


def _program_keeping_loops(convert: Callable[[], torch.fx.GraphModule], tensors: tuple,
                           dynamic: list) -> torch.export.ExportedProgram:
    """:func:`_program` of the graph ``convert`` makes; where that graph kept a long loop of a
    known count as a loop (unrolling.LONGEST_UNROLLED) and fails, of the graph converted again
    with every such loop unrolled."""
    graph_module = convert()
    try:
        return _program(graph_module, tensors, dynamic)
    except CaptureError:
        if not graph_module.meta.get(KEPT_LOOPS):
            raise
    with unrolling_every_loop():
        return _program(convert(), tensors, dynamic)


def _propagated_program(graph_module: torch.fx.GraphModule, tensors: tuple, dynamic: list,
                        fixed: list) -> torch.export.ExportedProgram | None:
    """The converted graph propagated on fake tensors, or None where torch.export must
    take it; the dynamic dims its last run fixed are put in ``fixed``."""
    if not any(dynamic):
        return _propagated_static(graph_module, tensors, dynamic)
    program = _propagated(graph_module, tensors, dynamic,
                          hints=_read_back_hints(graph_module, tensors), fixed=fixed)
    twos = ones_as_twos(tensors, dynamic) if program is None else None
    if twos is not None:
        # A batch of 1: a guard of the fake run (on a layout: bart's copy into a slice of its
        # shifted ids) may hold at 1 only. The graph, traced at 1, is run from 2: a graph that
        # holds at 1 only fails there, and capture checks the program against the model at a
        # larger size (strategies._small_dims_the_trace_fixes). One whose sizes read back fail
        # there (a view to a size computed at 1) is left to torch.export too.
        try:
            hints = _read_back_hints(graph_module, twos)
        except Exception:  # noqa: BLE001 - torch raises many kinds: the graph fails at 2
            return None
        fixed.clear()
        program = _propagated(graph_module, twos, dynamic, hints=hints, fixed=fixed)
    return program


def _propagated_fixing_dims(graph_module: torch.fx.GraphModule, tensors: tuple,
                            dynamic: list, fixed: list) -> torch.export.ExportedProgram | None:
    """Where neither propagation nor torch.export took the graph with its dynamic dims (sizes
    read back from values, torchvision's region proposals): propagated with the dims the
    graph ``fixed`` (a weight of 4 channels, a batch a Python loop unrolled) static, with a
    warning, as the default path leaves them, the others dynamic; None when that fails too.
    Run from the inputs the last propagation took: with a dim of 1 in the example grown to 2
    (:func:`ones_as_twos`), as the run specializes such a dim, not the graph."""
    inputs = ones_as_twos(tensors, dynamic) or tensors
    fixed = [(k, axis) for k, axis in fixed if inputs[k].shape[axis] > 1]
    if not fixed:
        return None
    narrowed = [{axis: dim for axis, dim in axes.items() if (k, axis) not in fixed} or None
                if axes else axes for k, axes in enumerate(dynamic)]
    try:
        program = _propagated(graph_module, inputs, narrowed,
                              hints=_read_back_hints(graph_module, inputs))
    except Exception:  # noqa: BLE001 - a last try: the caller raises its own error
        return None
    if program is not None:
        _warn_fixed_or_bounded(program, dynamic)
    return program


def _refuse_list_edits(graph_module: torch.fx.GraphModule) -> None:
    """An edit of a list in place (``ys.remove(2)``, ``sizes.sort()``) left to the run:
    torch.export's run of the ATen op edits a copy of the Python list it is given (the reads
    after it saw the list unedited), and no translation edits a list. Refused."""
    for module in graph_module.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            if node.target in LIST_EDITS:
                raise CaptureError(
                    f"scripted code edits a list in place ({node.target._schema.name} at "
                    f"{node.meta.get('stack_trace') or node.name}) whose items or arguments "
                    "are known only at run time; ONNX has no such list to edit. Build a new "
                    "list (or a tensor) instead of editing one, or keep the sizes it depends "
                    "on static")


def _refuse_run_time_loops(graph_module: torch.fx.GraphModule) -> None:
    """torch.export runs a loop of a run-time count (:data:`prim_loop`) in Python, which
    fixes the count to this example's: silently wrong at any other size. Refused instead."""
    _refuse_list_edits(graph_module)
    for module in graph_module.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            if node.target is prim_loop and not isinstance(node.args[1], int):
                where = node.meta.get("stack_trace") or node.name
                raise CaptureError(
                    f"a scripted loop of a run-time count ({where}) holds an op that could "
                    "not be propagated here, and torch.export would fix its count to this "
                    "example's; the capture stops rather than export a loop wrong at other "
                    "sizes. Give the loop a static count, or export without dynamic axes")


def _critical_only(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.CRITICAL


def _scripted_program(scripted, args: tuple, tensors: tuple, dynamic: list,
                      dynamic_axes: set) -> torch.export.ExportedProgram:
    """A scripted model's program. Its loops over sizes of the inputs stay loops; when that
    fails (a list appended to in the loop, which ONNX Loop has no carried value for), the
    sizes of the static axes are fixed to the example's, as tracing fixes them, and the loops
    over them unrolled. A list of a run-time length the model still returns is then an ONNX
    sequence."""
    state = static = None
    try:
        state = _script_state(scripted, args, dynamic=dynamic_axes)
        return _program_keeping_loops(lambda: _scripted_graph(state), tensors, dynamic)
    except CaptureError as error:
        first = last = error
    try:
        static = _script_state(scripted, args, static_sizes=dynamic_axes)
        if static is not None:
            return _program_keeping_loops(lambda: _scripted_graph(static), tensors, dynamic)
    except CaptureError as error:
        last = error
    if not isinstance(last, ReturnedListError):
        program = _scripted_at_the_example_s_sizes(scripted, args, tensors, dynamic, first)
        if program is None:
            raise first
        return program
    with sequence_outputs():
        return _program_keeping_loops(lambda: _scripted_graph(static or state), tensors,
                                      dynamic)


def _scripted_at_the_example_s_sizes(scripted, args: tuple, tensors: tuple, dynamic: list,
                                     why: CaptureError) -> torch.export.ExportedProgram | None:
    """The last try of a scripted model with dynamic axes, which failed with them (``why``):
    every size the graph reads the example's (a branch on ``x.size(0) == 3`` returning
    ``list(x)`` in one branch and nothing in the other, which ONNX If cannot return), each
    dynamic axis fixed, with a warning that says why; None when that fails too."""
    from onnxport.errors import DynamicDimensionFixedWarning

    if not any(dynamic):
        return None
    try:
        state = _script_state(scripted, args, static_sizes=set())
        if state is None:
            return None
        program = _program_keeping_loops(lambda: _scripted_graph(state), tensors,
                                         [None] * len(tensors))
    except CaptureError:
        return None
    for k, axes in enumerate(dynamic):
        for axis in axes or ():
            warnings.warn(
                f"axis {axis} of tensor input {k} is fixed to {tensors[k].shape[axis]} by the "
                "model (scripted): the ONNX model has it static, with the branches and loops "
                "on it decided, as its code could not be captured with the axis dynamic: "
                f"{why}", DynamicDimensionFixedWarning, stacklevel=2)
    return program


def _scripted_graph(state) -> torch.fx.GraphModule:
    """The converted graph of scripted code, marked so: its sizes read from values
    (``torch.zeros(int(n[0]))``) stay data-dependent, where a trace would have fixed them."""
    graph_module = _to_fx(state)
    graph_module.meta[SCRIPTED] = True
    return graph_module


def _name_outputs(captured: CapturedProgram, readable: list[str | None], given: int) -> None:
    """Outputs not named by the user take their path in the model's output (``logits``,
    ``past_key_values.0.key`` as ``present.0.key``), as on the dynamo path."""
    if len(readable) != len(captured.output_names):
        return
    taken = set(captured.input_names) | set(captured.output_names[:given])
    for k in range(given, len(readable)):
        name = readable[k]
        if name and name not in taken:
            captured.output_names[k] = name
        taken.add(captured.output_names[k])
