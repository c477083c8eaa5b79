"""Losses torch has no decomposition of in the exported graph: margin_ranking_loss and
hinge_embedding_loss (reduction: 0 none, 1 mean, 2 sum)."""

from __future__ import annotations

from onnxport.translate.ops._helpers import cast, expected_dtype
from onnxport.translate.registry import translates


def _reduced(g, loss, reduction: int):
    if reduction == 1:
        return g.op("ReduceMean", loss, keepdims_i=0)
    if reduction == 2:
        return g.op("ReduceSum", loss, keepdims_i=0)
    return loss


@translates("aten::margin_ranking_loss")
def margin_ranking_loss(g, input1, input2, target, margin=0.0, reduction=1):
    """margin_ranking_loss(Tensor input1, Tensor input2, Tensor target, float margin=0., int reduction=Mean) -> Tensor"""
    dtype = expected_dtype(g) or input1.dtype
    input1, input2, target = (cast(g, v, dtype) for v in (input1, input2, target))
    # max(0, -target * (input1 - input2) + margin)
    loss = g.op("Add", g.op("Neg", g.op("Mul", target, g.op("Sub", input1, input2))),
                g.const(float(margin), dtype))
    return _reduced(g, g.op("Max", loss, g.const(0.0, dtype)), reduction)


@translates("aten::hinge_embedding_loss")
def hinge_embedding_loss(g, self, target, margin=1.0, reduction=1):
    """hinge_embedding_loss(Tensor self, Tensor target, float margin=1., int reduction=Mean) -> Tensor"""
    dtype = expected_dtype(g) or self.dtype
    self, target = cast(g, self, dtype), cast(g, target, dtype)
    zero = g.const(0.0, dtype)
    # As torch: the margin term where target != 1, self where target != -1, both summed.
    margin_term = g.op("Max", g.op("Sub", g.const(float(margin), dtype), self), zero)
    margin_term = g.op("Where", g.op("Equal", target, g.const(1.0, target.dtype)), zero,
                       margin_term)
    self_term = g.op("Where", g.op("Equal", target, g.const(-1.0, target.dtype)), zero, self)
    return _reduced(g, g.op("Add", margin_term, self_term), reduction)
