"""FuseRotaryEmbedding: x * cos + rotate_half(x) * sin, rotate_half(x) = Concat(-x[.., D/2:],
x[.., :D/2]), becomes RotaryEmbedding(x, cos[.., :D/2], sin[.., :D/2]).
Precondition: opset >= 23, x is 4-D [batch, heads, sequence, D], cos and sin are [b, 1,
sequence, D] whose two halves are equal (constants checked, else Unsqueeze of a Cos or Sin of
Concat(f, f)), as transformers' rotary embeddings build them.

Seven nodes per query or key become one that ONNX Runtime runs as a kernel."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from onnxport.passes._nodes import producer, ints

_ELEMENTWISE = {"Cos", "Sin", "Cast", "Mul", "Div"}


def _slice_range(node: ir.Node | None, x: ir.Value, size: int) -> tuple[int, int] | None:
    """(start, end) of a unit-step Slice of x's last axis, else None."""
    if node is None or node.inputs[0] is not x or len(node.inputs) < 4:
        return None
    starts, ends, axes = (ints(v) for v in node.inputs[1:4])
    steps = ints(node.inputs[4]) if len(node.inputs) > 4 and node.inputs[4] is not None else [1]
    if None in (starts, ends, axes, steps) or len(starts) != 1 or steps != [1]:
        return None
    if axes[0] % 4 != 3:
        return None
    return starts[0], min(ends[0], size)


def _rotated_half(value: ir.Value | None, x: ir.Value, size: int) -> bool:
    concat = producer(value, "Concat")
    if concat is None or len(concat.inputs) != 2 or concat.attributes.get_int("axis") % 4 != 3:
        return False
    neg = producer(concat.inputs[0], "Neg")
    upper = _slice_range(producer(neg.inputs[0], "Slice"), x, size) if neg else None
    lower = _slice_range(producer(concat.inputs[1], "Slice"), x, size)
    return upper == (size // 2, size) and lower == (0, size // 2)


def _is_duplicated_halves(value: ir.Value | None) -> bool:
    """Whether ``value`` is elementwise ops of a Concat(f, f) on the last axis."""
    while value is not None:
        node = value.producer()
        if node is None or node.domain != "":
            return False
        if node.op_type == "Concat":
            rank = len(value.shape) if value.shape is not None else 0
            return (len(node.inputs) == 2 and node.inputs[0] is node.inputs[1]
                    and rank > 0 and node.attributes.get_int("axis") % rank == rank - 1)
        if node.op_type not in _ELEMENTWISE:
            return False
        if node.op_type in ("Mul", "Div"):
            scalar = node.inputs[1].const_value if node.inputs[1] is not None else None
            if scalar is None or scalar.size != 1:
                return False
        value = node.inputs[0]
    return False


def _half_cache(graph: ir.Graph, table: ir.Value | None, x: ir.Value, size: int, name: str):
    """[batch, sequence, D/2] from a [b, 1, sequence, D] table, or None."""
    if table is None or table.shape is None or len(table.shape) != 4:
        return None
    if table.shape[1] != 1 or table.shape[3] != size:
        return None
    batch = x.shape[0]
    if table.const_value is not None:
        if (known := graph.initializers.get(name)) is not None:  # the query's, for the key
            return known, known.shape[0] == batch, []
        array = table.const_value.numpy()[:, 0]
        if not np.array_equal(array[..., : size // 2], array[..., size // 2:]):
            return None
        half = np.ascontiguousarray(array[..., : size // 2])
        if isinstance(batch, int) and half.shape[0] != batch:
            half = np.ascontiguousarray(np.broadcast_to(half, (batch, *half.shape[1:])))
        value = ir.Value(name=name, shape=ir.Shape(half.shape), type=ir.TensorType(table.dtype),
                         const_value=ir.tensor(half, name=name))
        graph.register_initializer(value)
        return value, half.shape[0] == batch, []
    unsqueeze = producer(table, "Unsqueeze")
    if unsqueeze is None or ints(unsqueeze.inputs[1]) not in ([1], [-3]):
        return None
    if not _is_duplicated_halves(unsqueeze.inputs[0]):
        return None
    const = lambda values: ir.tensor(np.array(values, np.int64))  # noqa: E731
    nodes = [ir.node("Constant", [], {"value": const([0])}),
             ir.node("Constant", [], {"value": const([size // 2])}),
             ir.node("Constant", [], {"value": const([-1])})]
    sliced = ir.node("Slice", [unsqueeze.inputs[0], *(n.outputs[0] for n in nodes)], name=name)
    return sliced.outputs[0], table.shape[0] == batch, [*nodes, sliced]


def _batched(cache: ir.Value, x: ir.Value) -> list[ir.Node]:
    """Nodes that expand a [1, sequence, D/2] cache to x's batch (RotaryEmbedding wants it)."""
    batch = ir.node("Shape", [x], {"start": 0, "end": 1})
    ones = ir.node("Constant", [], {"value": ir.tensor(np.array([1, 1], np.int64))})
    shape = ir.node("Concat", [batch.outputs[0], ones.outputs[0]], {"axis": 0})
    expand = ir.node("Expand", [cache, shape.outputs[0]])
    return [batch, ones, shape, expand]


class FuseRotaryEmbedding(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        if model.opset_imports.get("", 0) < 23:
            return ir.passes.PassResult(model, False)
        modified = False
        for add in list(model.graph):
            if add.op_type != "Add" or add.domain != "" or len(add.inputs) != 2:
                continue
            muls = [producer(v, "Mul") for v in add.inputs]
            if None in muls:
                continue
            matched = self._match(model.graph, *muls) or self._match(model.graph, *muls[::-1])
            if matched is None:
                continue
            new_nodes, x, cos, sin = matched
            for index, node in enumerate(new_nodes):
                node.name = f"{add.name}/RotaryCache_{node.op_type}_{index}"
            fused = ir.node("RotaryEmbedding", [x, cos, sin], name=add.name,
                            metadata_props=dict(add.metadata_props))
            old = add.outputs[0]
            fused.outputs[0].shape, fused.outputs[0].type = old.shape, old.type
            ir.convenience.replace_nodes_and_values(model.graph, add, [add], [*new_nodes, fused],
                                                    [old], [fused.outputs[0]])
            modified = True
        return ir.passes.PassResult(model, modified)

    @staticmethod
    def _match(graph: ir.Graph, cos_mul: ir.Node, sin_mul: ir.Node):
        for x, cos in (cos_mul.inputs, cos_mul.inputs[::-1]):
            if x is None or x.shape is None or len(x.shape) != 4 or x.dtype != ir.DataType.FLOAT:
                continue
            size = x.shape[3]
            if not isinstance(size, int) or size % 2:
                continue
            for rotated, sin in (sin_mul.inputs, sin_mul.inputs[::-1]):
                if not _rotated_half(rotated, x, size):
                    continue
                nodes = []
                caches = []
                for table, label in ((cos, "cos"), (sin, "sin")):
                    half = _half_cache(graph, table, x, size, f"{table.name}_{label}_half")
                    if half is None:
                        return None
                    value, batch_matches, made = half
                    nodes += made
                    if not batch_matches:
                        made = _batched(value, x)
                        nodes += made
                        value = made[-1].outputs[0]
                    caches.append(value)
                return nodes, x, caches[0], caches[1]
        return None
