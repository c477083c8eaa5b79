"""MergeTransposes: Transpose(Transpose(x, p), q) becomes Transpose(x, p∘q), or x where p∘q is
the identity. Precondition: the inner Transpose feeds only the outer one (else both stay), and
both carry their perm (the default reverses the axes of an input of unknown rank)."""

from __future__ import annotations

import onnx_ir as ir

from onnxport.passes._nodes import perm as _perm


class MergeTransposes(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for node in list(model.graph):
            if node.op_type == "Transpose" and node.domain == "" and node.graph is model.graph \
                    and self._merge(model.graph, node):
                modified = True
        return ir.passes.PassResult(model, modified)

    def _merge(self, graph: ir.Graph, outer: ir.Node) -> bool:
        inner_value = outer.inputs[0]
        inner = inner_value.producer() if inner_value is not None else None
        if inner is None or inner.op_type != "Transpose" or inner.domain != "" \
                or inner.graph is not graph or len(inner_value.uses()) != 1 \
                or inner_value.is_graph_output():
            return False
        p, q = _perm(inner), _perm(outer)
        if p is None or q is None or len(p) != len(q):
            return False
        composed = [p[i] for i in q]
        source = inner.inputs[0]
        if composed == list(range(len(composed))) and not outer.outputs[0].is_graph_output():
            ir.convenience.replace_all_uses_with(outer.outputs[0], source)
            graph.remove(outer, safe=True)
        else:
            outer.replace_input_with(0, source)
            outer.attributes["perm"] = ir.AttrInt64s("perm", composed)
        graph.remove(inner, safe=True)
        return True
