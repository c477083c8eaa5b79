"""Small readers of ONNX nodes that several passes share."""

from __future__ import annotations

import math

import onnx_ir as ir


def perm(node: ir.Node) -> list[int] | None:
    """A Transpose's perm attribute, None when it has none (reverse all axes)."""
    attr = node.attributes.get("perm")
    return list(attr.value) if attr is not None else None


def reshape_after(graph: ir.Graph, node: ir.Node, value: ir.Value, shape: ir.Value,
                  name: str, rows_shape: ir.Shape) -> ir.Value:
    """Put Reshape(value, shape) right after ``node``: the Reshape's result takes ``value``'s
    name, shape, dtype and uses (graph outputs too), and ``value`` becomes the [rows, width]
    intermediate (``rows_shape``) named ``<name>__rows``. Returns the result."""
    unflatten = ir.node("Reshape", [None, shape], name=name,
                        metadata_props=dict(node.metadata_props))
    graph.insert_after(node, unflatten)
    result = unflatten.outputs[0]
    ir.convenience.replace_all_uses_with(value, result, replace_graph_outputs=True)
    unflatten.replace_input_with(0, value)
    result.name, value.name = value.name, f"{value.name}__rows"
    result.shape, result.dtype = value.shape, value.dtype
    value.shape = rows_shape
    return result


def producer(value: ir.Value | None, op_type: str) -> ir.Node | None:
    """The node of the default domain that makes ``value``, when it is an ``op_type``."""
    node = value.producer() if value is not None else None
    if node is None or node.op_type != op_type or node.domain != "":
        return None
    return node


def ints(value: ir.Value | None) -> list[int] | None:
    """A constant's values as Python ints, flattened; None for a computed value."""
    tensor = value.const_value if value is not None else None
    return None if tensor is None else [int(v) for v in tensor.numpy().reshape(-1)]


def scalar(value: ir.Value | None) -> float | None:
    """A one-element constant's value as a float; None for anything else."""
    tensor = value.const_value if value is not None else None
    if tensor is None or tensor.size != 1:
        return None
    return float(tensor.numpy().reshape(-1)[0])


def is_minus_infinity(value: ir.Value | None) -> bool:
    """True for a one-element constant -inf (an attention mask's fill)."""
    number = scalar(value)
    return number is not None and math.isinf(number) and number < 0
