"""RotateHalfMatMul: rotate_half(x) = Concat(-x[.., D/2:], x[.., :D/2]) on the last axis (two
Slices or a Split, a Neg, a Concat) becomes MatMul(x, P), P the [D, D] signed permutation.
Precondition: x float or double with a static, even last axis D <= MAX_HEAD_SIZE; x finite (0 * inf
in the MatMul would be nan where the Concat copied).

Rotary embeddings below opset 23 (no RotaryEmbedding op) rotate each query and key this way. For
small heads the three data-moving ops cost more than one small matrix product; from D = 64 the
MatMul's D multiply-adds per element cost more than they save (ONNX Runtime timings in
benchmarks/README.md). Each output is one x times +-1 plus exact zeros, so the numbers do not
change."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from onnxport.passes._nodes import producer, ints

MAX_HEAD_SIZE = 32


def _last_axis(axis: int | None, rank: int) -> bool:
    return axis is not None and axis % rank == rank - 1


def _half(value: ir.Value, size: int) -> tuple[ir.Value, str] | None:
    """(x, "lower" or "upper") when ``value`` is x[.., :D/2] or x[.., D/2:] (a Slice or a
    Split output) of x's last axis, else None."""
    node = value.producer()
    if node is None or node.domain != "" or node.inputs[0] is None:
        return None
    x = node.inputs[0]
    if x.shape is None or len(x.shape) < 2 or x.shape[-1] != size:
        return None
    rank = len(x.shape)
    if node.op_type == "Split":
        sizes = ints(node.inputs[1]) if len(node.inputs) > 1 else None
        if sizes != [size // 2, size // 2] or len(node.outputs) != 2 \
                or not _last_axis(node.attributes.get_int("axis", 0), rank):
            return None
        return x, ("lower" if value is node.outputs[0] else "upper")
    if node.op_type != "Slice" or len(node.inputs) < 4:
        return None
    starts, ends, axes = (ints(v) for v in node.inputs[1:4])
    steps = ints(node.inputs[4]) if len(node.inputs) > 4 and node.inputs[4] is not None else [1]
    if None in (starts, ends, axes, steps) or len(starts) != 1 or steps != [1] \
            or not _last_axis(axes[0], rank):
        return None
    span = (starts[0], min(ends[0], size))
    if span == (0, size // 2):
        return x, "lower"
    if span == (size // 2, size):
        return x, "upper"
    return None


def rotation(size: int, dtype: np.dtype) -> np.ndarray:
    """P with x @ P = rotate_half(x) for rows x of ``size``."""
    half = size // 2
    matrix = np.zeros((size, size), dtype)
    columns = np.arange(half)
    matrix[columns + half, columns] = -1  # output j < D/2 is -x[j + D/2]
    matrix[columns, columns + half] = 1  # output j >= D/2 is x[j - D/2]
    return matrix


class RotateHalfMatMul(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        made: dict[tuple[int, ir.DataType], ir.Value] = {}
        modified = False
        for concat in list(graph):
            if concat.op_type != "Concat" or concat.domain != "" or len(concat.inputs) != 2:
                continue
            x = self._rotated(concat)
            if x is None:
                continue
            size, dtype = x.shape[-1], x.dtype
            if (size, dtype) not in made:
                name = f"rotate_half_{size}"
                while name in graph.initializers:
                    name += "_"
                array = rotation(size, dtype.numpy())
                made[(size, dtype)] = ir.Value(name=name, shape=ir.Shape(array.shape),
                                               type=ir.TensorType(dtype),
                                               const_value=ir.tensor(array, name=name))
                graph.register_initializer(made[(size, dtype)])
            matmul = ir.node("MatMul", [x, made[(size, dtype)]], name=f"{concat.name}/MatMul",
                             metadata_props=dict(concat.metadata_props))
            old = concat.outputs[0]
            new = matmul.outputs[0]
            new.shape, new.dtype = x.shape, dtype
            ir.convenience.replace_nodes_and_values(graph, concat, [concat], [matmul],
                                                    [old], [new])
            modified = True
        return ir.passes.PassResult(model, modified)

    @staticmethod
    def _rotated(concat: ir.Node) -> ir.Value | None:
        """x when ``concat`` is Concat(-x[.., D/2:], x[.., :D/2]) with D small enough."""
        neg = producer(concat.inputs[0], "Neg")
        if neg is None or neg.inputs[0] is None or concat.inputs[1] is None:
            return None
        x = neg.inputs[0].producer().inputs[0] if neg.inputs[0].producer() else None
        if x is None or x.shape is None or len(x.shape) < 2:
            return None
        size = x.shape[-1]
        if not isinstance(size, int) or size % 2 or size > MAX_HEAD_SIZE \
                or x.dtype not in (ir.DataType.FLOAT, ir.DataType.DOUBLE) \
                or not _last_axis(concat.attributes.get_int("axis"), len(x.shape)):
            return None
        upper, lower = _half(neg.inputs[0], size), _half(concat.inputs[1], size)
        if upper is None or lower is None or upper[0] is not x or lower[0] is not x:
            return None
        return x if (upper[1], lower[1]) == ("upper", "lower") else None
