"""DropNeverTakenWhere: Where(c, z, x) becomes x when c is never true: a constant without a True,
or Equal(ReduceMax(m), -inf) where m has no -inf (a constant, or a Where of such values).
Precondition: c and z broadcast into x's shape (the Where's result is x's shape).

The second form is the guard an attention adds for rows its mask hides entirely (torch gives
them zeros, Softmax of -inf alone gives nan). A float mask made with finfo.min (T5's position
bias plus padding mask) never holds -inf, and a constant mask (T5's decoder) folds the guard's
condition to all False; each layer's Where over its attention is then dead work."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from onnxport.passes._nodes import is_minus_infinity, producer


# Ops whose output elements are elements of their first input.
_MOVING_ONLY = {"Expand", "Reshape", "Unsqueeze", "Squeeze", "Transpose", "Identity", "Flatten"}


def _never_minus_infinity(value: ir.Value | None, depth: int = 6) -> bool:
    """True when no element of ``value`` can be -inf (nan is allowed: Equal(nan, -inf) is
    False too)."""
    if value is None:
        return False
    if value.const_value is not None:
        array = value.const_value.numpy()
        return array.dtype.kind == "f" and not bool(np.isneginf(array).any())
    node = value.producer()
    if node is None or node.domain != "" or depth == 0:
        return False
    if node.op_type == "Where":
        return len(node.inputs) == 3 and all(_never_minus_infinity(v, depth - 1)
                                             for v in node.inputs[1:])
    return node.op_type in _MOVING_ONLY and _never_minus_infinity(node.inputs[0], depth - 1)


_ELEMENTWISE = {"Add", "Sub", "Mul", "Div"}


def _broadcasts_into(dims: list | None, value: ir.Value | None, depth: int = 6) -> bool:
    """``dims`` broadcast to ``value``'s shape is that shape (each of ``dims`` is 1 or equal to
    its dim). Where the shape is not recorded, it is read from what made ``value``: a Softmax
    keeps its input's shape, an elementwise op has at least each operand's dims, a 4-D
    Attention is [B, H, L, E] with its mask broadcast to [B, H, L, S]."""
    if dims is None or value is None:
        return False
    if value.shape is not None:
        target = list(value.shape)
        return len(dims) <= len(target) and all(
            d == 1 or d == t for d, t in zip(dims, target[len(target) - len(dims):]))
    node = value.producer()
    if node is None or node.domain != "" or depth == 0:
        return False
    if node.op_type == "Softmax":
        return _broadcasts_into(dims, node.inputs[0], depth - 1)
    if node.op_type in _ELEMENTWISE:
        return any(_broadcasts_into(dims, v, depth - 1) for v in node.inputs)
    if node.op_type == "Attention" and _four_dimensional(node) and len(dims) == 4 and \
            dims[3] == 1:
        leading = [*dims[:3], 1]  # the output's last dim is the value's head size
        return any(_broadcasts_into(leading, v, depth - 1) for v in node.inputs[:4:3])
    return False


def _four_dimensional(attention: ir.Node) -> bool:
    """The [B, H, L, D] form (the 3-D one's output has no heads axis for a mask's to match)."""
    query = attention.inputs[0]
    return query is not None and query.shape is not None and len(query.shape) == 4


def _feeds_shape_of(mask: ir.Value, value: ir.Value, depth: int = 6) -> bool:
    """``value``'s shape is at least ``mask``'s broadcast over the leading dims: an Attention
    masked by it (4-D), or Softmax/elementwise ops of it."""
    node = value.producer()
    if node is None or node.domain != "" or depth == 0:
        return False
    if node.op_type == "Attention":
        return _four_dimensional(node) and len(node.inputs) > 3 and node.inputs[3] is mask
    if node.op_type == "Softmax" or node.op_type in _ELEMENTWISE:
        return any(v is mask or (v is not None and _feeds_shape_of(mask, v, depth - 1))
                   for v in node.inputs)
    return False


def _never_true_and_fits(condition: ir.Value | None, kept: ir.Value) -> bool:
    """``condition`` is never true and broadcasts into ``kept``'s shape."""
    if condition is None:
        return False
    if condition.const_value is not None:
        array = condition.const_value.numpy()
        return not bool(array.any()) and _broadcasts_into(list(array.shape), kept)
    equal = producer(condition, "Equal")
    if equal is None or len(equal.inputs) != 2:
        return False
    for reduced, bound in (equal.inputs, reversed(equal.inputs)):
        reduce_max = producer(reduced, "ReduceMax")
        if reduce_max is None or not is_minus_infinity(bound):
            continue
        mask = reduce_max.inputs[0]
        keepdims = reduce_max.attributes.get_int("keepdims", 1)
        # The reduced axes are 1 with keepdims; the Attention form also needs the last axis
        # reduced, which is the guard's (its reduction over the keys).
        if keepdims and _never_minus_infinity(mask) and _feeds_shape_of(mask, kept) and \
                _reduces_last_axis(reduce_max, mask):
            return True
    return False


def _reduces_last_axis(reduce_max: ir.Node, mask: ir.Value) -> bool:
    axes = reduce_max.inputs[1] if len(reduce_max.inputs) > 1 else None
    if axes is not None:
        if axes.const_value is None:
            return False
        numbers = [int(a) for a in axes.const_value.numpy().reshape(-1)]
    elif "axes" in reduce_max.attributes:
        numbers = list(reduce_max.attributes["axes"].value)
    else:
        return True  # all axes
    return -1 in numbers or (mask.shape is not None and len(mask.shape) - 1 in numbers)


class DropNeverTakenWhere(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for node in list(ir.traversal.RecursiveGraphIterator(model.graph)):
            if node.op_type != "Where" or node.domain != "" or len(node.inputs) != 3:
                continue
            condition, taken, kept = node.inputs
            if kept is None or taken is None or taken.const_value is None or \
                    taken.const_value.numpy().ndim != 0:
                continue
            if not _never_true_and_fits(condition, kept):
                continue
            result = node.outputs[0]
            if result.is_graph_output() and (kept.is_graph_output() or kept.is_graph_input()
                                             or kept.producer() is None):
                continue
            # Their shapes are equal (checked above); later passes read the recorded one (an
            # identity Reshape after an Attention is dropped when its input's shape is known).
            if kept.shape is None:
                kept.shape = result.shape
            ir.convenience.replace_all_uses_with(result, kept, replace_graph_outputs=True)
            if kept.is_graph_output():
                result.name, kept.name = None, result.name  # the output keeps its name
            node.graph.remove(node, safe=True)
            modified = True
        return ir.passes.PassResult(model, modified)
