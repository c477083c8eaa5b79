"""A captured program checked against the model at larger sizes of its dynamic axes: a
capture records what holds at the example's sizes, which a size of 0 or 1 can hide, and a
trace fixes the sizes a model uses as Python numbers (the axes then kept static here)."""

from __future__ import annotations

import copy
import warnings
from typing import Any

import torch
import torch.utils._pytree as pytree

from onnxport.capture.common import warn_at_caller
from onnxport.capture.program_run import RecordedShapeDiffers, run_program
from onnxport.capture.specialization import upper_bounds
from onnxport.capture.torch_export import CapturedProgram
from onnxport.capture.torchscript import capture_tracing
from onnxport.capture.torchscript.sizes import grown_sizes
from onnxport.errors import DynamicDimensionFixedWarning


def grown_mismatch(model: Any, args: tuple, kwargs: dict, dim_names: dict,
                   program: CapturedProgram, *, distinct: bool = False,
                   differences_only: bool = False, smallest: int = 0,
                   failing_graph_differs: bool = False, shapes: bool = False,
                   values: bool = True, doubled: bool = False) -> str | None:
    """Why ``program`` does not compute what ``model`` does with every dynamic axis of
    ``dim_names`` grown by about half, to ``smallest`` at least (None when it does); where
    the model returns only empty tensors there, one larger (up to 5), which have something
    to compare. ``distinct``: the grown part's floating values differ from the example's
    (else they repeat it, so that data-dependent steps see alike data). ``differences_only``:
    only outputs told apart count; a model or graph that cannot run at those sizes (meta
    weights; a graph that fails loudly there) or outputs that cannot be paired (a cache's
    bookkeeping, dropped) count as matching; ``failing_graph_differs``: but a graph that
    fails where the model runs does not (its sizes hold at the example only: ONNX, which
    broadcasts where torch refuses, may answer there). ``shapes``: each node's size there
    must also be the one its recorded symbolic shape gives (:func:`run_program`), which
    translation builds on. ``values`` False: only the outputs' shapes are compared.
    ``doubled``: the axes grown to twice their size; tried where the model fails at the
    first sizes (a view to ``d // 2`` heads of an odd length), which checked nothing."""
    grown, (grown_args, grown_kwargs) = _grown_inputs(args, kwargs, dim_names, smallest,
                                                      distinct, doubled)
    try:
        with torch.no_grad():
            expected = [t for t in pytree.tree_leaves(model(*grown_args, **grown_kwargs))
                        if isinstance(t, torch.Tensor)]
    except Exception as error:  # noqa: BLE001 - the model itself fails there
        if not doubled:
            return grown_mismatch(model, args, kwargs, dim_names, program, distinct=distinct,
                                  differences_only=differences_only, smallest=smallest,
                                  failing_graph_differs=failing_graph_differs, shapes=shapes,
                                  values=values, doubled=True)
        return None if differences_only else f"eager failed: {type(error).__name__}"
    if smallest and smallest < 5 and expected and all(t.numel() == 0 for t in expected):
        # (x.chunk(3)[-1][1:] of 3 rows is empty, as the first chunk's is: at 4 they differ)
        return grown_mismatch(model, args, kwargs, dim_names, program, distinct=distinct,
                              differences_only=differences_only, smallest=smallest + 1,
                              failing_graph_differs=failing_graph_differs, shapes=shapes,
                              values=values, doubled=doubled)
    try:
        with torch.no_grad():
            actual = run_program(program.exported_program, grown, shapes=shapes)
    except RecordedShapeDiffers as error:
        return str(error)
    except Exception as error:  # noqa: BLE001 - the program fails where the model runs
        if differences_only and not failing_graph_differs and not _narrows_past_the_end(error):
            return None
        return f"the graph fails there: {type(error).__name__}"
    actual = [actual[k] for k in program.user_outputs] if \
        len(actual) != len(expected) and program.user_outputs else actual
    if len(actual) != len(expected):
        if differences_only and not _as_many_at_the_example(model, args, kwargs, len(actual)):
            return None
        return f"{len(actual)} outputs where the model returns {len(expected)}"
    for k, (a, e) in enumerate(zip(actual, expected)):
        if a.shape != e.shape:
            return f"output {k} has shape {list(a.shape)} where the model's has {list(e.shape)}"
        if values and not torch.allclose(a.to(e.dtype), e, rtol=1e-3, atol=1e-4,
                                         equal_nan=True):
            return f"output {k} has other values"
    return None


def _narrows_past_the_end(error: BaseException) -> bool:
    """Whether ``error`` is a narrow past the end of its axis: the graph took a relation of
    sizes that held at the example (the length min(a, b) recorded as b) where the model, which
    ran, does not. ONNX's Slice clamps there and answers (wrongly, where later ops read the
    length recorded), so the failure is no loud one."""
    return isinstance(error, RuntimeError) and "exceeds dimension size" in str(error)


def _as_many_at_the_example(model: Any, args: tuple, kwargs: dict, count: int) -> bool:
    """Whether the model returns ``count`` tensors at the example's sizes: then a program of
    ``count`` outputs lacks the ones the model adds at larger sizes (``x.chunk(2)`` of one
    row is one piece), where one that also lacks some at the example dropped bookkeeping."""
    try:
        with torch.no_grad():
            results = pytree.tree_leaves(model(*copy.deepcopy(args), **copy.deepcopy(kwargs)))
    except Exception:  # noqa: BLE001 - the model cannot run here (meta weights)
        return False
    return sum(isinstance(t, torch.Tensor) for t in results) == count


def bounds_that_bite(model: Any, args: tuple, kwargs: dict, program: CapturedProgram,
                     asked: set[int] = frozenset(), dim_names: dict | None = None,
                     ) -> tuple[dict[tuple[str, int], int], set[tuple[int, int]]]:
    """The dynamic input dims whose range torch bounded (:func:`upper_bounds`: a guard on a
    size, a branch or a count of pieces), each with its bound, where the program does not
    compute what the model does just beyond it, or at twice it (a program whose sizes torch
    simplified within the range answers wrongly there; ONNX would too, silently); and the
    bounded dims, (tensor input position, axis), that the program holds beyond where the
    model runs (a count of pieces the translation computes at run time): the ONNX model keeps
    those as dynamic as the program computes them, with no warning of a bound. A bound beyond :data:`CHECKED_UP_TO` is kept
    unchecked (running the model there would cost too much), and one beyond an int32 is no
    bound (a scripted loop's count is bounded so); nor is one where the model itself fails
    beyond (bert's positions: PyTorch fails there too), nor one of the ``asked`` maxima
    (``Dim("batch", max=64)``: the user's own). The model runs on repeated values (grown
    boxes, indices stay valid: a torchvision kernel crashes on others), the dims of the same
    name in ``dim_names`` grown together (bert's ids and mask)."""
    bounds = upper_bounds(program.exported_program, program.user_inputs)
    biting, held = {}, set()
    for (name, axis), upper in bounds.items():
        if upper >= 2**31 - 1 or upper in asked:
            continue
        key = (program.user_inputs.index(name), axis)
        named = (dim_names or {}).get(key)
        together = {k: None for k, n in (dim_names or {}).items() if n == named} \
            if named is not None else {key: None}
        if upper > CHECKED_UP_TO or any(
                grown_mismatch(model, args, kwargs, together, program, smallest=size,
                               differences_only=True, failing_graph_differs=True,
                               shapes=True) is not None
                for size in (upper + 1, 2 * upper + 1)):
            biting[(name, axis)] = upper
        elif _model_runs(model, args, kwargs, together, upper + 1):
            held.add(key)
    return biting, held


def _model_runs(model: Any, args: tuple, kwargs: dict, dims: dict, smallest: int) -> bool:
    """Whether ``model`` runs with the tensor input ``dims`` grown to ``smallest`` at least."""
    grown_args, grown_kwargs = _grown_inputs(args, kwargs, dims, smallest)[1]
    try:
        with torch.no_grad():
            model(*grown_args, **grown_kwargs)
    except Exception:  # noqa: BLE001 - the model itself fails there
        return False
    return True


def _grown_inputs(args: tuple, kwargs: dict, dims: dict, smallest: int, distinct: bool = False,
                  doubled: bool = False):
    """The tensor inputs with their ``dims`` (position, axis) grown (:func:`grown_sizes`),
    and (args, kwargs) holding them."""
    leaves, spec = pytree.tree_flatten((args, kwargs))
    positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    dynamic = [{axis for (k, axis) in dims if k == position} or None
               for position in range(len(positions))]
    grown = grown_sizes(tuple(leaves[i] for i in positions), dynamic, distinct=distinct,
                        smallest=smallest, doubled=doubled)
    for i, tensor in zip(positions, grown):
        leaves[i] = tensor
    return grown, pytree.tree_unflatten(leaves, spec)


CHECKED_UP_TO = 512  # the largest bound that bounds_that_bite runs the model beyond


def axes_the_trace_fixes(model: Any, args: tuple, kwargs: dict, dim_names: dict,
                         traced: CapturedProgram, grown_together: bool = True,
                         values: bool = True) -> list[tuple[int, int]]:
    """The dynamic axes (tensor input position, axis) at whose larger sizes ``traced``
    computes other results than ``model``: a size the model used as a Python number
    (``range(x.size(0))``, ``torch.tensor(x.size(0))``) was recorded as this example's, which
    nothing in the graph shows. Each axis grown alone, or all of them when no one alone
    tells (empty when the program matches). Where all of them grown together match (or
    ``grown_together`` is False: that was checked already), each dim name is grown alone, and
    all the others without it, past every size of the example: a relation between sizes
    fixed by the trace (``min(x.size(0), x.size(1))`` is the size of one axis in the graph)
    holds while they grow together; the names whose growth, alone or without them, tells are
    static (a growth beyond :data:`AFFORDABLE_GROWTH` is not tried)."""
    def differs(names: dict, smallest: int = 0) -> bool:
        return grown_mismatch(model, args, kwargs, names, traced, distinct=True,
                              differences_only=True, smallest=smallest,
                              values=values) is not None

    if not grown_together or not differs(dim_names):
        groups = sorted(set(dim_names.values()), key=str)
        if len(groups) < 2:
            return []
        leaves = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        past = 2 * max((leaves[k].shape[axis] for k, axis in dim_names
                        if k < len(leaves) and axis < leaves[k].dim()), default=1) + 1
        told = {}

        def tells(names: frozenset) -> bool:
            if names not in told:
                grown = {k: n for k, n in dim_names.items() if n in names}
                told[names] = _affordable(leaves, grown, past) and differs(grown, past)
            return told[names]

        fixed = {name for name in groups if tells(frozenset([name])) or
                 tells(frozenset(groups) - {name})}
        return [key for key, name in dim_names.items() if name in fixed]
    return [key for key in dim_names if differs({key: dim_names[key]})] or list(dim_names)


# How many times the example's elements the inputs of a run of :func:`axes_the_trace_fixes`
# may hold when it grows some names alone (a batch of 1 grown past a sequence of 128 would run
# the model on 257 sequences: that check is left out); inputs of up to AFFORDABLE_ELEMENTS
# elements in all are always affordable (3 x 1 x 3 grown to 3 x 7 x 7 is 16.3 times, and only
# that growth told the trace's min(x.size(2), x.size(0)) from the model's: fuzz seed 76451).
AFFORDABLE_GROWTH = 16
AFFORDABLE_ELEMENTS = 1024


def _affordable(leaves: list[torch.Tensor], grown: dict, size: int) -> bool:
    example = sum(leaf.numel() for leaf in leaves) or 1
    total = 0
    for k, leaf in enumerate(leaves):
        factor = 1.0
        for (position, axis) in grown:
            if position == k and axis < leaf.dim():
                factor *= max(size, leaf.shape[axis]) / max(leaf.shape[axis], 1)
        total += leaf.numel() * factor
    return total <= max(AFFORDABLE_GROWTH * example, AFFORDABLE_ELEMENTS)


def with_axes_the_trace_fixes_static(model: Any, args: tuple, kwargs: dict, options: dict,
                                      traced: CapturedProgram, grown_together: bool = True,
                                      values: bool = True) -> CapturedProgram:
    """``traced``, or the model traced again with static sizes on the dynamic axes at whose
    other sizes ``traced`` computes other results than the model, each named in a warning:
    a trace that fixed a value (a TracingWarning says where) may have fixed a size, and its
    graph then answers wrongly at other sizes, silently (torch.onnx's too).
    ``grown_together``, ``values``: see :func:`axes_the_trace_fixes`, :func:`grown_mismatch`."""
    why = "see the TracingWarning" if values else \
        "a count of a tensor's pieces, len() or a loop, which gives no TracingWarning"
    # Checked again once some are static, all the others grown together: a relation between
    # sizes (min(x.size(2), x.size(0))) that one static axis does not settle, which an axis of
    # 1 hid while the others grew alone (fuzz seed 76451).
    for _ in range(3):
        fixed = axes_the_trace_fixes(model, args, kwargs, options["dim_names"], traced,
                                     grown_together, values)
        if not fixed:
            break
        traced, options = traced_with_static_axes(
            model, args, kwargs, options, fixed,
            "other sizes, as the model used a size as a Python number ("
            f"{why}). Export with dynamo=True, or compute that size with tensor ops "
            "(x.size(0) stays computed), to keep the axis dynamic.")
        grown_together = True
        if not options["dim_names"]:
            break
    return traced


def traced_with_static_axes(model: Any, args: tuple, kwargs: dict, options: dict,
                            fixed: list[tuple[int, int]], why: str,
                            ) -> tuple[CapturedProgram, dict]:
    """The model traced again with the dynamic axes ``fixed`` static, and the options of that
    trace; each axis named in a warning that the traced graph computes other results than
    the model at ``why`` (where, why, and what to do)."""
    dim_names = options["dim_names"]
    options = {**options, "dim_names": {k: v for k, v in dim_names.items() if k not in fixed}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the first trace's warnings were given)
        traced = capture_tracing(model, args, kwargs, **options)
    leaves = [leaf for leaf in pytree.tree_leaves((args, kwargs))
              if isinstance(leaf, torch.Tensor)]
    names = list(traced.input_names)
    for k, axis in fixed:
        which = f"input {names[k]!r}" if k < len(names) else f"tensor input {k}"
        warn_at_caller(
            f"axis {axis} ({dim_names[(k, axis)]!r}) of {which} is kept at its "
            f"example's size, {leaves[k].shape[axis]}: the traced graph computes other results "
            f"than the model at {why}", DynamicDimensionFixedWarning)
    return traced, options
