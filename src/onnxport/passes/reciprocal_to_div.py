"""ReciprocalToDiv: Mul(x, Reciprocal(v)) (either operand order) becomes Div(x, v).
Precondition: none beyond the pattern; a Reciprocal left without users is then dropped.

ONNX Runtime's LayerNorm and SimplifiedLayerNorm (RMSNorm) fusions look for Div(x, Sqrt(..)),
so the rsqrt of an RMSNorm or a hand-written LayerNorm only fuses in this form; it stays
plain ONNX, and x / v differs from x * (1 / v) by one fp32 rounding at most."""

from __future__ import annotations

import onnx_ir as ir


def _reciprocal_input(value: ir.Value | None) -> ir.Value | None:
    node = value.producer() if value is not None else None
    if node is None or node.op_type != "Reciprocal" or node.domain != "":
        return None
    return node.inputs[0]


class ReciprocalToDiv(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for node in list(ir.traversal.RecursiveGraphIterator(model.graph)):
            if node.op_type != "Mul" or node.domain != "" or len(node.inputs) != 2:
                continue
            left, right = node.inputs
            if (denominator := _reciprocal_input(right)) is not None:
                reciprocal, numerator = right.producer(), left
            elif (denominator := _reciprocal_input(left)) is not None:
                reciprocal, numerator = left.producer(), right
            else:
                continue
            if numerator is None or denominator is None:
                continue
            node.op_type = "Div"
            node.replace_input_with(0, numerator)
            node.replace_input_with(1, denominator)
            if not reciprocal.outputs[0].uses() and not reciprocal.outputs[0].is_graph_output():
                reciprocal.graph.remove(reciprocal, safe=True)
            modified = True
        return ir.passes.PassResult(model, modified)
