"""WrapRangeIndices: a Gather whose indices are a Range that it alone reads, where the Range's
start or limit may be negative, reads them through Where(indices < 0, indices + size, indices)
instead (what Gather does with a negative index: the same result).

ONNX Runtime's GatherToSliceFusion (from its extended optimization level, the default) turns
Gather(x, Range(start, limit, delta)) into Slice(x, start, limit, delta) without looking at
the bounds. A Slice reads a negative bound from the end, so the two differ wherever one is
negative: ``x.index_select(0, torch.arange(n - 1, -1, -1))`` (a flip) ran as an empty Slice,
and ``x[torch.arange(-2, 0)]`` too. The fusion matches a Range with one reader only; the Where
gives it three. Precondition: the pattern; a Range whose start and limit are known never to be
negative (constants, sizes and their sums: position ids) is left to the fusion, which is exact
there."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from onnxport.passes._nodes import ints, producer

# Ops whose result is never negative where their inputs (all, or the first) never are.
_OF_ALL_INPUTS = {"Add", "Mul", "Div", "Max", "Min", "Concat"}
_OF_FIRST_INPUT = {"Squeeze", "Unsqueeze", "Reshape", "Identity", "Cast", "Flatten", "Expand",
                   "Gather", "Slice"}


def never_negative(value: ir.Value | None, depth: int = 8) -> bool:
    """True when every element of ``value`` is known to be at least 0 (False when unknown)."""
    if value is None:
        return False
    if (numbers := ints(value)) is not None:
        return all(number >= 0 for number in numbers)
    node = value.producer()
    if node is None or node.domain != "" or depth == 0:
        return False
    if node.op_type in ("Shape", "Size"):
        return True
    if node.op_type in _OF_FIRST_INPUT:
        return never_negative(node.inputs[0], depth - 1)
    if node.op_type in _OF_ALL_INPUTS:
        return all(never_negative(input, depth - 1) for input in node.inputs)
    return False


def _scalar(graph: ir.Graph, name: str, number: int, dtype: ir.DataType) -> ir.Value:
    while name in graph.initializers:
        name += "_"
    array = np.array(number, dtype=dtype.numpy())
    value = ir.Value(name=name, shape=ir.Shape([]), type=ir.TensorType(dtype),
                     const_value=ir.Tensor(array, name=name))
    graph.register_initializer(value)
    return value


def _wrap(gather: ir.Node, indices: ir.Value) -> None:
    graph, dtype = gather.graph, indices.dtype
    axis = gather.attributes.get_int("axis", 0)
    name, prefix = indices.name, gather.name or indices.name
    metadata = dict(gather.metadata_props)

    def node(op_type, inputs, suffix, out_dtype, shape, **attributes):
        made = ir.node(op_type, inputs, attributes=attributes, name=f"{prefix}__{suffix}",
                       metadata_props=metadata)
        made.outputs[0].name = f"{name}__{suffix}"
        made.outputs[0].dtype, made.outputs[0].shape = out_dtype, shape
        graph.insert_before(gather, made)
        return made.outputs[0]

    shape = node("Shape", [gather.inputs[0]], "data_shape", ir.DataType.INT64, None)
    size = node("Gather", [shape, _scalar(graph, f"{name}__axis", axis, ir.DataType.INT64)],
                "size", ir.DataType.INT64, ir.Shape([]), axis=0)
    if dtype != ir.DataType.INT64:
        size = node("Cast", [size], "size_cast", dtype, ir.Shape([]), to=dtype)
    zero = _scalar(graph, f"{name}__zero", 0, dtype)
    negative = node("Less", [indices, zero], "negative", ir.DataType.BOOL, indices.shape)
    wrapped = node("Add", [indices, size], "plus_size", dtype, indices.shape)
    where = node("Where", [negative, wrapped, indices], "wrapped", dtype, indices.shape)
    gather.replace_input_with(1, where)


class WrapRangeIndices(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for gather in list(ir.traversal.RecursiveGraphIterator(model.graph)):
            if gather.op_type != "Gather" or gather.domain != "" or len(gather.inputs) != 2:
                continue
            indices = gather.inputs[1]
            range_node = producer(indices, "Range")
            if range_node is None or len(indices.uses()) != 1 or \
                    never_negative(range_node.inputs[0]) and never_negative(range_node.inputs[1]):
                continue
            _wrap(gather, indices)
            modified = True
        return ir.passes.PassResult(model, modified)
