"""CommonSubexpressions: onnx_ir's common-subexpression elimination, except that two random
draws are never merged. Precondition: none.

onnx_ir treats RandomUniform/RandomNormal(Like) and Multinomial as random but not Dropout or
Bernoulli, so two training-mode dropouts of one tensor became one node and shared one mask.
Each such node gets a numbered attribute for the duration of the pass, which makes it unequal
to every other.

A graph output replaced by an equal value takes that value, renamed, without its type: the
type it had is put back (an output of the main graph must state its shape)."""

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
        types = {v.name: (v.type, v.shape) for v in model.graph.outputs}
        try:
            result = common.CommonSubexpressionEliminationPass()(model)
        finally:
            for node in draws:
                node.attributes.pop(_TAG, None)
        for value in model.graph.outputs:
            kept_type, kept_shape = types.get(value.name, (None, None))
            if value.type is None:
                value.type = kept_type
            if value.shape is None and kept_shape is not None:
                value.shape = ir.Shape(list(kept_shape))
        return ir.passes.PassResult(model, modified=result.modified)
