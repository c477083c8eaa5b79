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


def _branch(g, subgraph, operands: list, name: str) -> tuple:
    """A branch as an If's subgraph builder and its outputs, each in the dtype torch gave the
    cond's result (a scripted ``a and b`` returns the bool b from one branch and the constant
    False, made an int64 constant, from the other: both branches must agree)."""
    branch = g.subgraph(name)
    expected = g.expected if isinstance(g.expected, (tuple, list)) else [g.expected]
    outputs = subgraph.translate(branch, operands)
    for k, output in enumerate(outputs):
        dtype = _dtype_of(expected[k]) if k < len(expected) else None
        if dtype is not None and isinstance(output, (bool, int, float)):
            outputs[k] = branch.const([output], dtype)  # (a number is a 1-D [1] value)
        elif dtype is not None and isinstance(output, ir.Value) and output.dtype != dtype:
            outputs[k] = cast(branch, output, dtype)
    return branch, outputs


def _optional(g, branch, value: ir.Value | None, like: ir.Value) -> ir.Value:
    """An output that one branch sets and the other leaves None (``y = None; if c: y = x``),
    or a loop's carried value that is None before or after an iteration: ONNX If's branches
    and Loop's iterations must give one type, an optional tensor: ``Optional(value)``, or
    the empty optional of ``like``'s type where ``value`` is None. (``like``: a value of the
    tensor's dtype and shape.)"""
    if g.opset < OPTIONAL_OPSET:
        raise TranslationError(
            "a scripted branch or loop gives a tensor or None (an Optional[Tensor]): ONNX "
            f"gives that an optional type, which If and Loop take from opset {OPTIONAL_OPSET}; "
            f"pass opset_version={OPTIONAL_OPSET} or higher (this export asks for {g.opset})")
    kind = ir.TypeAndShape(ir.TensorType(like.dtype), like.shape)
    if value is None:
        result = branch.op("Optional", type=kind)
    else:
        result = branch.op("Optional", value)
    result.type = ir.OptionalType(ir.TensorType(like.dtype))
    result.shape = like.shape
    return result


def _dtype_of(meta: Any) -> ir.DataType | None:
    if isinstance(meta, torch.Tensor):
        return from_torch_dtype(meta.dtype)
    # (A Python float is a double, as a SymFloat is: ops/symbolic.py.)
    return {**SYMBOLIC_DTYPES, bool: ir.DataType.BOOL, int: ir.DataType.INT64,
            float: ir.DataType.DOUBLE}.get(type(meta))


@translates("higher_order::cond")
def cond(g, pred, true_graph, false_graph, operands=()):
    """cond(Tensor pred, GraphModule true_fn, GraphModule false_fn, Tensor[] operands)
    -> Tensor[]"""
    operands = list(operands)
    (then_g, then_out), (else_g, else_out) = (
        _branch(g, true_graph, operands, true_graph.name),
        _branch(g, false_graph, operands, false_graph.name))
    optional = []
    for k, (a, b) in enumerate(zip(then_out, else_out)):
        if (a is None) != (b is None):
            like = a if b is None else b
            then_out[k], else_out[k] = (_optional(g, then_g, a, like),
                                        _optional(g, else_g, b, like))
            optional.append((k, then_out[k]))
    for branch, outputs in ((then_g, then_out), (else_g, else_out)):
        for output in outputs:
            branch.add_output(output)
    count = len(then_out)
    outputs = g.op("If", _condition(g, pred), then_branch_g=then_g.graph,
                   else_branch_g=else_g.graph, outputs=count)
    results = (outputs,) if count == 1 else outputs
    for result, output in zip(results, then_out):
        if isinstance(output, ir.Value) and output.dtype is not None:
            # (the builder would give an op it knows no rule for its first input's dtype:
            # the condition's bool, where the branches give a float or an int)
            result.dtype = output.dtype
    for k, like in optional:
        results[k].type, results[k].shape = like.type, like.shape
    return results


OPTIONAL_OPSET = 16  # (If and Loop take optional types from opset 16)


def gives_optionals(graph_module: torch.fx.GraphModule) -> bool:
    """Whether a scripted branch or loop in ``graph_module`` gives a tensor or None (one branch
    of a ``cond`` returns None where the other returns a tensor; a loop's carried value is
    None before it or after an iteration), which ONNX expresses from opset 16 only."""
    for module in graph_module.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            name = getattr(node.target, "__name__", None) if node.op == "call_function" \
                else None
            if name == "cond":
                pairs = zip(*(_returned(getattr(module, branch.target))
                              for branch in node.args[1:3]))
            elif name == "onnxport_prim_loop":
                body, carried = getattr(module, node.args[0].target), node.args[2]
                pairs = zip(carried, _returned(body)[1:])
            else:
                continue
            if any((a is None) != (b is None) for a, b in pairs):
                return True
    return False


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
    metas = body_graph.input_metas
    carried_metas = metas[len(metas) - len(carried):]
    optional = _optional_carried(g, body_graph, carried, carried_metas)
    # A number carried (``f = f * 0.5``) is a 1-D [1] tensor of its type's dtype (a float a
    # double, as a SymFloat), the same before the loop and after each iteration.
    numbers = {k: _dtype_of(meta) for k, meta in enumerate(carried_metas)
               if not isinstance(meta, torch.Tensor) and _dtype_of(meta) is not None}
    carried = [_optional(g, g, value, optional[k]) if k in optional else
               value if isinstance(value, ir.Value) else g.const([value], numbers.get(k))
               for k, value in enumerate(carried)]
    body = g.subgraph(body_graph.name)
    iteration = body.add_input(f"{body_graph.name}_iteration", ir.DataType.INT64, [])
    body.add_input(f"{body_graph.name}_condition", ir.DataType.BOOL, [])
    inputs = []
    for i, meta in enumerate(carried_metas):
        value = body.add_input(f"{body_graph.name}_carried_{i}", None, None)
        if i in optional:
            value.type, value.shape = carried[i].type, carried[i].shape
        else:
            body_graph.set_meta(value, meta)
        if i in numbers:
            value.dtype, value.shape = numbers[i], ir.Shape([1])
            carried[i] = cast(g, carried[i], numbers[i])
        inputs.append(value)
    # The iteration number is a SymInt in the body, which lives as a 1-D [1] int64 tensor.
    number = as_1d(body, iteration)
    body_graph.set_meta(number, metas[len(outer)])
    outputs = body_graph.translate(body, [*outer, number, *inputs])
    body.add_output(_condition(body, outputs[0]))
    for k, value in enumerate(outputs[1:]):  # the carried values, then the scanned ones
        if k in optional:  # (stacked by Loop)
            _only_passed_on(inputs[k])
            if value is not inputs[k]:
                value = _optional(g, body, value, optional[k])
        elif k in numbers:
            value = body.const([value], numbers[k]) if isinstance(value, (bool, int, float)) \
                else as_1d(body, value, numbers[k])
            value.shape = value.shape or ir.Shape([1])
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
    results = (results,) if len(outputs) == 2 else results
    for k, dtype in numbers.items():
        results[k].dtype, results[k].shape = dtype, ir.Shape([1])
    for k in optional:
        results[k].type, results[k].shape = carried[k].type, carried[k].shape
    return results


def _optional_carried(g, body_graph, carried: list, metas: list) -> dict[int, ir.Value]:
    """The carried values that are None before the loop or after an iteration (an
    Optional[Tensor]: ``y = None; for ...: y = x``), each with a value of the tensor's dtype
    and shape (the loop's input, or a stand-in made of what torch computed)."""
    returned = _returned(body_graph.module)[1:1 + len(carried)]
    optional = {}
    for k, (value, after) in enumerate(zip(carried, returned)):
        if (value is None) == (after is None):
            continue
        if value is not None:
            optional[k] = value
        else:
            meta = after.meta.get("val") if isinstance(after, torch.fx.Node) else None
            if not isinstance(meta, torch.Tensor):
                raise TranslationError(
                    "a scripted loop carries a value that is None before it and not a tensor "
                    "after an iteration; ONNX Loop carries tensors and optional tensors only")
            like = ir.Value(name="")
            body_graph.set_meta(like, meta)
            optional[k] = like
    return optional


def _returned(module: torch.fx.GraphModule) -> list:
    """What a branch or loop body returns, as a list (a one-result branch may return it bare)."""
    output = next(n for n in module.graph.nodes if n.op == "output")
    return list(output.args[0]) if isinstance(output.args[0], (list, tuple)) \
        else [output.args[0]]


def _only_passed_on(value: ir.Value) -> None:
    """Refuse a loop body that reads an optional it carries other than to pass it on: ONNX
    needs OptionalHasElement/OptionalGetElement there, which translation does not make."""
    if any(user.op_type not in ("Identity", "Optional") for user, _ in value.uses()):
        raise TranslationError(
            "a scripted loop reads a value it carries that may be None (an Optional[Tensor] "
            "set in the loop); onnxport exports such a value only when the loop passes it on "
            "or replaces it: give it a tensor before the loop (a zero-size one) instead of "
            "None")


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


@translates("onnxport::list_of_rows", since_opset=11)
def list_of_rows(g, stacked):
    """A list a scripted loop of a run-time count built and the model returns
    (capture/torchscript/list_scans.py), its items stacked: the ONNX sequence of the rows,
    as torch.onnx returns such a list (ONNX Runtime gives a list of arrays)."""
    rows = g.op("SplitToSequence", stacked, axis_i=0, keepdims_i=0)
    rows.type = ir.SequenceType(ir.TensorType(stacked.dtype))
    rows.shape = ir.Shape(list(stacked.shape)[1:]) if stacked.shape is not None else None
    return rows
