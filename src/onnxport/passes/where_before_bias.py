"""WhereBeforeBias: Where(c, b, f) with a constant tensor b and a scalar constant f becomes
Add(b, Where(p, 0, f)), where p is c without an all-True And operand. Precondition: b + f is f
in every element (f is finfo.min or -inf next to b), static shapes, p smaller than the result,
and the result's shape unchanged.

T5's mask is its position bias where the padding mask lets a key through, finfo.min elsewhere:
one Where broadcasting a [B, 1, L, S] condition against the [1, H, L, S] bias, which ONNX
Runtime broadcasts slowly. Selecting on the padding mask's own [B, 1, 1, S] and adding the bias
(as T5 itself does) gives the same numbers in a faster broadcast."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir


def _static(value: ir.Value | None) -> tuple[int, ...] | None:
    if value is None or value.shape is None:
        return None
    dims = tuple(value.shape)
    return dims if all(isinstance(d, int) for d in dims) else None


def _all_true(value: ir.Value | None) -> bool:
    tensor = value.const_value if value is not None else None
    return tensor is not None and tensor.dtype == ir.DataType.BOOL and bool(tensor.numpy().all())


def _selector(condition: ir.Value) -> ir.Value:
    """``condition`` without an And with an all-True constant."""
    node = condition.producer()
    if node is not None and node.op_type == "And" and node.domain == "" and len(node.inputs) == 2:
        first, second = node.inputs
        if _all_true(first) and second is not None:
            return second
        if _all_true(second) and first is not None:
            return first
    return condition


def _zero_initializer(graph: ir.Graph, dtype: ir.DataType) -> ir.Value:
    name = f"padding_zero_{dtype.name.lower()}"
    if name in graph.initializers:
        return graph.initializers[name]
    value = ir.Value(name=name, shape=ir.Shape([]), type=ir.TensorType(dtype),
                     const_value=ir.tensor(np.zeros((), dtype.numpy()), name=name))
    graph.register_initializer(value)
    return value


class WhereBeforeBias(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        modified = False
        for node in list(graph):
            if node.op_type != "Where" or node.domain != "" or len(node.inputs) != 3:
                continue
            condition, bias, fill = node.inputs
            if condition is None or bias is None or fill is None or \
                    bias.const_value is None or fill.const_value is None:
                continue
            fill_array, bias_array = fill.const_value.numpy(), bias.const_value.numpy()
            if fill_array.size != 1 or bias_array.dtype.kind != "f" or \
                    fill_array.dtype != bias_array.dtype:
                continue
            # Exact: b + f rounds to f everywhere (|b| below half an ulp of f).
            if not np.array_equal(bias_array + fill_array.reshape(()),
                                  np.broadcast_to(fill_array.reshape(()), bias_array.shape)):
                continue
            selector = _selector(condition)
            shapes = [_static(v) for v in (condition, selector)]
            if None in shapes:
                continue
            result_dims = np.broadcast_shapes(shapes[0], bias_array.shape, fill_array.shape)
            if np.broadcast_shapes(shapes[1], bias_array.shape) != result_dims or \
                    int(np.prod(shapes[1])) >= int(np.prod(result_dims)):
                continue
            zero = _zero_initializer(graph, fill.dtype)
            padding = ir.node("Where", [selector, zero, fill], name=f"{node.name}_padding",
                              metadata_props=dict(node.metadata_props))
            padding.outputs[0].dtype = fill.dtype
            padding.outputs[0].shape = ir.Shape(
                np.broadcast_shapes(shapes[1], fill_array.shape))
            total = ir.node("Add", [bias, padding.outputs[0]], name=f"{node.name}_bias",
                            metadata_props=dict(node.metadata_props))
            graph.insert_before(node, [padding, total])
            result = node.outputs[0]
            total.outputs[0].dtype, total.outputs[0].shape = result.dtype, result.shape
            ir.convenience.replace_all_uses_with(result, total.outputs[0],
                                                 replace_graph_outputs=True)
            name = result.name
            graph.remove(node, safe=True)
            total.outputs[0].name = name
            modified = True
        return ir.passes.PassResult(model, modified)
