"""FlattenConcats: Concat(.., Concat(a, b), ..) along one axis becomes Concat(.., a, b, ..).
Precondition: the inner Concat has the same axis (same rank: the same number means the same
axis) and feeds only the outer one (else both stay).

torch.cat of a list holding another cat's result (Inception's branches) writes nested Concats;
one Concat copies each element once instead of twice."""

from __future__ import annotations

import onnx_ir as ir


def _axis(node: ir.Node) -> int | None:
    attr = node.attributes.get("axis")
    return attr.value if attr is not None else None


class FlattenConcats(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for node in list(model.graph):
            if node.op_type == "Concat" and node.domain == "" and node.graph is model.graph \
                    and self._flatten(model.graph, node):
                modified = True
        return ir.passes.PassResult(model, modified)

    def _flatten(self, graph: ir.Graph, outer: ir.Node) -> bool:
        axis = _axis(outer)
        inputs, merged = [], []
        for value in outer.inputs:
            inner = value.producer() if value is not None else None
            if inner is not None and inner.op_type == "Concat" and inner.domain == "" \
                    and inner.graph is graph and inner not in merged \
                    and _axis(inner) == axis \
                    and len(value.uses()) == 1 and not value.is_graph_output():
                inputs.extend(inner.inputs)
                merged.append(inner)
            else:
                inputs.append(value)
        if not merged:
            return False
        flat = ir.node("Concat", inputs, attributes={"axis": axis}, name=outer.name)
        flat.outputs[0].name = outer.outputs[0].name
        flat.metadata_props.update(outer.metadata_props)
        ir.convenience.replace_nodes_and_values(graph, outer, [outer], [flat],
                                                outer.outputs, flat.outputs)
        for inner in merged:
            graph.remove(inner, safe=True)
        return True
