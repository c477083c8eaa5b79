"""Control flow: torch.export's higher-order ops (cond, while_loop, scan, map) become ONNX If,
Loop and Scan, whose branches and bodies are subgraphs translated with the same registry and
builder as the main graph.

Branches and bodies read the values of the enclosing graph (operands, weights) by name, as
ONNX subgraphs may; only a loop's carried values and a scan's states and slices are inputs
of its body.
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
from onnx_ir.tensor_adapters import from_torch_dtype
import torch

from onnxport.errors import TranslationError
from onnxport.translate.ops._helpers import SYMBOLIC_DTYPES, as_1d, cast, filled
from onnxport.translate.registry import translates


def _condition(g, pred: Any) -> ir.Value:
    """ONNX If and Loop take a bool tensor of one element; torch gives a 0-d bool tensor, a
    SymBool (a 1-element value here) or a Python bool."""
    if isinstance(pred, (bool, int)):
        return g.const(bool(pred))
    if not isinstance(pred, ir.Value):
        raise TranslationError(
            f"a condition must be a tensor or a bool, not {type(pred).__name__}")
    pred = cast(g, pred, ir.DataType.BOOL)
    if pred.shape is not None and len(pred.shape) == 0:
        return pred
    # A SymBool is a 1-D [1] value; a Loop body's condition input is declared 0-d, and ONNX
    # shape inference rejects a condition of another rank flowing into it.
    scalar = g.op("Reshape", pred, g.const([], ir.DataType.INT64))
    scalar.shape = ir.Shape([])
    return scalar


def _branch(g, subgraph, operands: list, name: str) -> ir.Graph:
    """A branch as an If's subgraph, each output in the dtype torch gave the cond's result (a
    scripted ``a and b`` returns the bool b from one branch and the constant False, made an
    int64 constant, from the other: both branches must agree)."""
    branch = g.subgraph(name)
    expected = g.expected if isinstance(g.expected, (tuple, list)) else [g.expected]
    outputs = subgraph.translate(branch, operands)
    for k, output in enumerate(outputs):
        dtype = _dtype_of(expected[k]) if k < len(expected) else None
        if dtype is not None and isinstance(output, (bool, int, float)):
            output = branch.const([output], dtype)  # (a number is a 1-D [1] value)
        elif dtype is not None and isinstance(output, ir.Value) and output.dtype != dtype:
            output = cast(branch, output, dtype)
        branch.add_output(output)
    return branch.graph


def _dtype_of(meta: Any) -> ir.DataType | None:
    if isinstance(meta, torch.Tensor):
        return from_torch_dtype(meta.dtype)
    return {**SYMBOLIC_DTYPES, bool: ir.DataType.BOOL, int: ir.DataType.INT64}.get(type(meta))


@translates("higher_order::cond")
def cond(g, pred, true_graph, false_graph, operands=()):
    """cond(Tensor pred, GraphModule true_fn, GraphModule false_fn, Tensor[] operands)
    -> Tensor[]"""
    operands = list(operands)
    then_branch = _branch(g, true_graph, operands, true_graph.name)
    else_branch = _branch(g, false_graph, operands, false_graph.name)
    count = len(then_branch.outputs)
    outputs = g.op("If", _condition(g, pred), then_branch_g=then_branch,
                   else_branch_g=else_branch, outputs=count)
    return (outputs,) if count == 1 else outputs


@translates("higher_order::while_loop")
def while_loop(g, cond_graph, body_graph, carried_inputs, additional_inputs=()):
    """while_loop(GraphModule cond_fn, GraphModule body_fn, Tensor[] carried_inputs,
    Tensor[] additional_inputs) -> Tensor[]"""
    metas = body_graph.input_metas
    # A carried Python int is a SymInt in the body, which lives as a 1-D [1] int64 tensor.
    carried = [as_1d(g, g.const(value))
               if isinstance(meta, torch.SymInt) and not isinstance(value, ir.Value) else value
               for value, meta in zip(carried_inputs, metas)]
    additional = list(additional_inputs)
    # ONNX Loop tests its condition before the first iteration too, given as an input.
    (first,) = cond_graph.translate(g, carried + additional)
    body = g.subgraph(body_graph.name)
    body.add_input(f"{body_graph.name}_iteration", ir.DataType.INT64, [])
    body.add_input(f"{body_graph.name}_condition", ir.DataType.BOOL, [])
    inputs = []
    for i, meta in enumerate(metas[:len(carried)]):
        value = body.add_input(f"{body_graph.name}_carried_{i}", None, None)
        body_graph.set_meta(value, meta)
        inputs.append(value)
    updated = body_graph.translate(body, inputs + additional)
    (next_condition,) = cond_graph.translate(body, updated + additional)
    body.add_output(_condition(body, next_condition))
    for value in updated:
        body.add_output(value)
    results = g.op("Loop", None, _condition(g, first), *carried, body_g=body.graph,
                   outputs=len(carried))
    return (results,) if len(carried) == 1 else results


def _scan(g, combine_graph, states: list, xs: list, additional: list) -> tuple:
    """An ONNX Scan over the first dimension of ``xs``: the combine graph's inputs are the
    states, one slice of each of ``xs`` and the additional inputs (read from the outer
    graph); its outputs are the next states and the slices of the stacked outputs."""
    if not xs:
        raise TranslationError(
            "a scan with no tensor to scan over (only `length`) has no ONNX Scan form; "
            "pass the sequence as xs, or use while_loop")
    body = g.subgraph(combine_graph.name)
    inputs = []
    for i, meta in enumerate(combine_graph.input_metas[:len(states) + len(xs)]):
        kind = "state" if i < len(states) else "slice"
        value = body.add_input(f"{combine_graph.name}_{kind}_{i}", None, None)
        combine_graph.set_meta(value, meta)
        inputs.append(value)
    outputs = combine_graph.translate(body, inputs + additional)
    for value in outputs:
        body.add_output(value)
    results = g.op("Scan", *states, *xs, body_g=body.graph, num_scan_inputs_i=len(xs),
                   outputs=len(outputs))
    return (results,) if len(outputs) == 1 else results


@translates("higher_order::scan", since_opset=9)
def scan(g, combine_graph, init, xs, additional_inputs=()):
    """scan(GraphModule combine_fn, Tensor[] init, Tensor[] xs, Tensor[] additional_inputs)
    -> Tensor[]  (the final carries, then the stacked outputs)"""
    return _scan(g, combine_graph, list(init), list(xs), list(additional_inputs))


@translates("higher_order::map_impl", since_opset=9)
def map_impl(g, body_graph, xs, additional_inputs=()):
    """map_impl(GraphModule f, Tensor[] xs, Tensor[] additional_inputs) -> Tensor[]"""
    return _scan(g, body_graph, [], list(xs), list(additional_inputs))


@translates("higher_order::onnxport_prim_loop", since_opset=11)
def prim_loop(g, body_graph, trip_count, carried, outer=(), condition=True):
    """onnxport_prim_loop(GraphModule body, SymInt trip_count, Tensor[] carried,
    Any[] outer, SymBool condition=True) -> Tensor[]

    A TorchScript ``for i in range(n)`` or ``while`` loop (capture/torchscript/loops.py): the body
    takes the outer values, the iteration number and the carried values, and returns the
    condition to go on (always true in a ``for``) and the next carried values, whose shapes
    may change from one iteration to the next (ONNX Loop allows that; torch's while_loop does
    not), then the values it scans (one per iteration, stacked: a list the loop appends to).
    Carried numbers (a counter) are 1-D [1] tensors, as every SymInt."""
    carried = [value if isinstance(value, ir.Value) else g.const([value]) for value in carried]
    metas = body_graph.input_metas
    body = g.subgraph(body_graph.name)
    iteration = body.add_input(f"{body_graph.name}_iteration", ir.DataType.INT64, [])
    body.add_input(f"{body_graph.name}_condition", ir.DataType.BOOL, [])
    inputs = []
    for i, meta in enumerate(metas[len(metas) - len(carried):]):
        value = body.add_input(f"{body_graph.name}_carried_{i}", None, None)
        body_graph.set_meta(value, meta)
        inputs.append(value)
    # The iteration number is a SymInt in the body, which lives as a 1-D [1] int64 tensor.
    number = as_1d(body, iteration)
    body_graph.set_meta(number, metas[len(outer)])
    outputs = body_graph.translate(body, [*outer, number, *inputs])
    body.add_output(_condition(body, outputs[0]))
    for value in outputs[1:]:  # the carried values, then the scanned ones (stacked by Loop)
        body.add_output(value)
    if isinstance(trip_count, ir.Value):
        count = g.op("Reshape", cast(g, trip_count, ir.DataType.INT64),
                     g.const([], ir.DataType.INT64))
    elif int(trip_count) >= 2 ** 63 - 1:
        count = None  # a while loop: no count
    else:
        count = g.const(int(trip_count))
    start = _condition(g, condition) if isinstance(condition, ir.Value) else (
        None if condition is True else g.const(bool(condition)))
    if start is None and not carried:  # (an empty last input would be dropped)
        start = g.const(True)
    results = g.op("Loop", count, start, *carried, body_g=body.graph,
                   outputs=len(outputs) - 1)
    return (results,) if len(outputs) == 2 else results


@translates("onnxport::uninitialized")
def uninitialized(g):
    """A branch's result the run never reads (capture/torchscript/uninitialized.py): an empty
    tensor of the type the other branch gives it, so that If's branches agree."""
    expected = g.expected
    if not isinstance(expected, torch.Tensor):
        return g.const(torch.zeros(0))
    # Of the other's shape where it is static (a file declares it), else empty along the
    # dims known at run time only.
    sizes = [size if isinstance(size, int) else 0 for size in expected.shape]
    return filled(g, sizes, 0, from_torch_dtype(expected.dtype))
