"""FuseConsecutiveUnsqueeze: Unsqueeze(Unsqueeze(x, a), b) becomes one Unsqueeze(x, axes).
Precondition: both axes are constants, x's rank is known and the inner result has no other use."""

from __future__ import annotations

import onnx_ir as ir


def _axes(node: ir.Node) -> list[int] | None:
    if len(node.inputs) < 2 or node.inputs[1] is None:
        return None
    tensor = node.inputs[1].const_value
    if tensor is None:
        return None
    return [int(a) for a in tensor.numpy().reshape(-1)]


def _merged_axes(rank: int, inner: list[int], outer: list[int]) -> list[int]:
    """The axes of the final result that the two Unsqueezes inserted."""
    middle_rank = rank + len(inner)
    inserted = [False] * middle_rank
    for axis in inner:
        inserted[axis % middle_rank] = True
    final_rank = middle_rank + len(outer)
    outer = sorted(a % final_rank for a in outer)
    final = []
    source = iter(inserted)
    for position in range(final_rank):
        final.append(True if position in outer else next(source))
    return [i for i, is_new in enumerate(final) if is_new]


class FuseConsecutiveUnsqueeze(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        modified = False
        for node in list(graph):
            if node.op_type != "Unsqueeze" or node.domain != "":
                continue
            inner_value = node.inputs[0]
            inner = inner_value.producer() if inner_value is not None else None
            if inner is None or inner.op_type != "Unsqueeze" or inner.domain != "":
                continue
            if len(inner_value.uses()) != 1 or inner_value.is_graph_output():
                continue
            source = inner.inputs[0]
            inner_axes, outer_axes = _axes(inner), _axes(node)
            if source is None or source.shape is None or inner_axes is None or outer_axes is None:
                continue
            axes = _merged_axes(len(source.shape), inner_axes, outer_axes)
            axes_value = ir.Value(name=f"{node.outputs[0].name}_axes", shape=ir.Shape([len(axes)]),
                                  type=ir.TensorType(ir.DataType.INT64),
                                  const_value=ir.tensor(axes, dtype=ir.DataType.INT64,
                                                        name=f"{node.outputs[0].name}_axes"))
            graph.register_initializer(axes_value)
            node.replace_input_with(0, source)
            node.replace_input_with(1, axes_value)
            graph.remove(inner, safe=True)
            modified = True
        return ir.passes.PassResult(model, modified)
