"""CommonSubexpressions: onnx_ir's common-subexpression elimination, except that two random
draws are never merged. Precondition: none.

onnx_ir treats RandomUniform/RandomNormal(Like) and Multinomial as random but not Dropout or
Bernoulli, so two training-mode dropouts of one tensor became one node and shared one mask.
Each such node gets a numbered attribute for the duration of the pass, which makes it unequal
to every other. A graph output that onnx_ir's pass replaces by an Identity of its twin keeps
its shape and type (the Identity it makes has none, which onnx.checker refuses). A type
attribute (an empty ``Optional``'s) is a string for the duration of the pass: onnx_ir's pass
hashes attribute values, and a type is not hashable."""

from __future__ import annotations

import onnx_ir as ir
import onnx_ir.passes.common as common

_RANDOM = frozenset({"Dropout", "Bernoulli", "RandomUniform", "RandomNormal", "RandomUniformLike",
                     "RandomNormalLike", "Multinomial"})
_TAG = "_onnxport_draw"


class CommonSubexpressions(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        draws = [node for node in model.graph if node.op_type in _RANDOM and node.domain == ""]
        for number, node in enumerate(draws):
            node.attributes[_TAG] = ir.AttrInt64(_TAG, number)
        typed = {}
        for node in ir.traversal.RecursiveGraphIterator(model.graph):
            for name, attribute in node.attributes.items():
                if attribute.type == ir.AttributeType.TYPE_PROTO:
                    typed[node, name] = attribute
        for (node, name), attribute in typed.items():
            node.attributes[name] = ir.AttrString(name, repr(attribute.value))
        types = [(value.shape, value.type) for value in model.graph.outputs]
        try:
            result = common.CommonSubexpressionEliminationPass()(model)
        finally:
            for node in draws:
                node.attributes.pop(_TAG, None)
            for (node, name), attribute in typed.items():
                node.attributes[name] = attribute
        for value, (shape, type_) in zip(model.graph.outputs, types):
            if value.shape is None:
                value.shape = shape
            if value.type is None:
                value.type = type_
        return ir.passes.PassResult(model, modified=result.modified)
