"""CommonSubexpressions: onnx_ir's common-subexpression elimination, except that two random
draws are never merged. Precondition: none.

onnx_ir treats RandomUniform/RandomNormal(Like) and Multinomial as random but not Dropout or
Bernoulli, so two training-mode dropouts of one tensor became one node and shared one mask.
Each such node gets a numbered attribute for the duration of the pass, which makes it unequal
to every other."""

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
        try:
            result = common.CommonSubexpressionEliminationPass()(model)
        finally:
            for node in draws:
                node.attributes.pop(_TAG, None)
        return ir.passes.PassResult(model, modified=result.modified)
