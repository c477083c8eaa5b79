"""Loops of a count known while converting (``range(4)``, ``range(len(res))`` of a list
the graph built, a static size): unrolled into the converted graph, or kept as an ONNX Loop
when long (:data:`LONGEST_UNROLLED`). Loops of a run-time count are :mod:`.loops`."""

from __future__ import annotations

import contextlib
import contextvars
import operator

import torch

from onnxport.capture.script_mutations import nodes_inside
from onnxport.capture.torchscript.loops import _convert_loop, _loop_condition, outer_values
from onnxport.errors import CaptureError

# A loop of a known count of more iterations than this stays a loop (ONNX Loop) instead of
# being unrolled: ProphetNet's ngram mask, 2 x 512 steps, took half a minute unrolled. Capture
# unrolls it after all where the loop kept fails (:func:`unrolling_every_loop`).
LONGEST_UNROLLED = 64
# The meta key of a converted graph that kept such a loop.
KEPT_LOOPS = "onnxport.kept_loops"
_UNROLL_EVERY_LOOP = contextvars.ContextVar("onnxport_unroll_every_loop", default=False)
_KEPT = contextvars.ContextVar("onnxport_kept_loops", default=None)


@contextlib.contextmanager
def unrolling_every_loop():
    """Within this block, loops of a known count are unrolled however long."""
    token = _UNROLL_EVERY_LOOP.set(True)
    try:
        yield
    finally:
        _UNROLL_EVERY_LOOP.reset(token)


def _convert_loop_node(self, node):
    from torch._export.converter import TS2FXGraphConverter

    condition = _loop_condition(self, node)
    trip_count = self.get_fx_value_by_ir_value(next(iter(node.inputs())))
    if isinstance(trip_count, int) and condition is None:
        TS2FXGraphConverter._check_prim_loop_support(self, node)
        if trip_count <= LONGEST_UNROLLED or _UNROLL_EVERY_LOOP.get() or \
                not _kept_as_a_loop(self, node, trip_count):
            if _reads_list_lengths(node) or _branches_on_the_iteration(node):
                _inlined_loop(self, node, trip_count)
            else:
                _unrolled_loop(self, node, trip_count)
        return
    _convert_loop(self, node, trip_count, True if condition is None else condition)


def _kept_as_a_loop(self, node, trip_count: int) -> bool:
    """Convert a long loop of a known count as a loop of a run-time count is; False where
    it cannot be one (a list it edits, a write to a tensor made before it)."""
    try:
        _convert_loop(self, node, trip_count, True)
    except CaptureError:
        return False
    kept = _KEPT.get()
    if kept is not None:
        kept.append(node)
    return True


def _reads_list_lengths(node) -> bool:
    """Whether a loop's body reads the length of a list (``if len(res) > 2:``), which may
    differ from one iteration to the next as the body appends to it."""
    return any(inner.kind() == "aten::len" and
               isinstance(inner.input().type(), torch._C.ListType)
               for inner in nodes_inside(node))


def _branches_on_the_iteration(node) -> bool:
    """Whether a branch in a loop's body decides on the iteration's number (``[2 if i == 0
    else 1 for i in range(x.dim())]``): inlined, each iteration's branch is decided while
    converting; one body called per iteration made it an ONNX If on the number, of ints."""
    (block,) = node.blocks()
    counted = {next(iter(block.inputs()))}
    for inner in nodes_inside(node):
        if inner.kind() == "prim::If" and inner.input() in counted:
            return True
        if any(value in counted for value in inner.inputs()):
            counted |= {value for value in inner.outputs()
                        if isinstance(value.type(), (torch._C.IntType, torch._C.BoolType))}
    return False


def _inlined_loop(self, node, count: int) -> None:
    """A loop of a known count whose body reads a list's length, as its body's nodes
    converted once per iteration into this graph: each iteration sees the list as it is then
    (a length, a branch on it, decided anew). One subgraph called per iteration took the
    first iteration's lengths for all, and dropped what later ones appended."""
    (block,) = node.blocks()
    inputs = list(block.inputs())  # the iteration, then the carried values
    carried = [self.get_fx_value_by_ir_value(value) for value in list(node.inputs())[2:]]
    for iteration in range(count):
        self.name_to_node[inputs[0].debugName()] = iteration
        for value, fx_value in zip(inputs[1:], carried):
            self.name_to_node[value.debugName()] = fx_value
        for inner in block.nodes():
            self.convert_node(inner)
        # (the block returns the condition to go on, always true here, then the carried)
        carried = [self.get_fx_value_by_ir_value(value)
                   for value in list(block.returnNode().inputs())[1:]]
    for output, fx_value in zip(node.outputs(), carried):
        self.name_to_node[output.debugName()] = fx_value


def _unrolled_loop(self, node, count: int) -> None:
    """A loop of a known count as one call of its body per iteration, as torch's converter
    unrolls it; each call takes the carried values and the outer values the body updates in
    place (``res.append(y)`` of a list made before the loop) from the call before. (torch's
    own puts the second and later updated values in the wrong places: an IndexError, or the
    next iteration reading another value.)"""
    from torch._export.converter import execute_subgraph_from_prim_loop

    local = [value.debugName() for value in list(node.inputs())[2:]]
    outer = set(self._identify_inputs_as_arguments(node))
    for block in node.blocks():
        outer |= set(self.blocks_to_lifted_attrs[block])
    outer = list(outer)
    (body,), (body_converter,) = self._convert_block_to_subgraph(node, outer)
    updated = body_converter.name_update_from_subblock_to_parent
    if not self.is_top_level_graph():
        # (a list made in the body that a loop nested in it appends to is the body's own)
        self.name_update_from_subblock_to_parent |= {name for name in updated if name in outer}
    # (A weight only the body reads, an LSTMCell's called in the loop, is read here first.)
    values = [self.get_fx_value_by_fqn(name) for name in local] + outer_values(self, outer)
    carried = node.outputsSize()
    for iteration in range(count):
        call = self.fx_graph.call_function(execute_subgraph_from_prim_loop,
                                           (body, iteration, len(local), *values))
        for k, output in enumerate(node.outputs()):  # (result 0 is the condition)
            values[k] = self.name_to_node[output.debugName()] = self.fx_graph.call_function(
                operator.getitem, (call, 1 + k))
        for k, name in enumerate(updated):
            if name not in outer:
                continue  # (updated by a loop nested in the body, in a value of the body's)
            self.name_to_node[name] = self.fx_graph.call_function(
                operator.getitem, (call, 1 + carried + k))
            values[len(local) + outer.index(name)] = self.name_to_node[name]
