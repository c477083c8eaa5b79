"""Functions of whole matrices with a direct ONNX form: det, logdet, slogdet (ONNX Det), and
bilinear (one Einsum)."""

from __future__ import annotations

from onnxport.translate.ops._helpers import reduce
from onnxport.translate.registry import translates


@translates("aten::linalg_det", "aten::det", "aten::_linalg_det", since_opset=11)
def det(g, A):
    """linalg_det(Tensor A) -> Tensor"""
    result = g.op("Det", A)
    if "_linalg_det" in g.provenance.aten:
        # (det, LU, pivots): only det has an ONNX counterpart; the others are not used by
        # linalg_det's decomposition's callers.
        return result, g.op("Identity", A), g.op("Identity", A)
    return result


@translates("aten::logdet", since_opset=11)
def logdet(g, self):
    """logdet(Tensor self) -> Tensor"""
    # torch: NaN for a negative determinant, -inf for zero; Log does the same.
    return g.op("Log", g.op("Det", self))


@translates("aten::linalg_slogdet", "aten::slogdet", "aten::_linalg_slogdet", since_opset=11)
def slogdet(g, A):
    """linalg_slogdet(Tensor A) -> (Tensor sign, Tensor logabsdet)"""
    determinant = g.op("Det", A)
    sign, logabsdet = g.op("Sign", determinant), g.op("Log", g.op("Abs", determinant))
    if "_linalg_slogdet" in g.provenance.aten:
        return sign, logabsdet, g.op("Identity", A), g.op("Identity", A)
    return sign, logabsdet


@translates("aten::bilinear", since_opset=12)
def bilinear(g, input1, input2, weight, bias=None):
    """bilinear(Tensor input1, Tensor input2, Tensor weight, Tensor? bias=None) -> Tensor"""
    out = g.op("Einsum", input1, weight, input2, equation_s="...i,oij,...j->...o")
    return out if bias is None else g.op("Add", out, bias)


@translates("aten::_cdist_forward", "aten::cdist")
def cdist(g, x1, x2, p=2.0, compute_mode=None):
    """_cdist_forward(Tensor x1, Tensor x2, float p, int? compute_mode) -> Tensor"""
    # All pairwise differences [..., P, R, M], then the p-norm over M (exact, no mm trick).
    difference = g.op("Abs", g.op("Sub", g.op("Unsqueeze", x1, g.const([-2])),
                                  g.op("Unsqueeze", x2, g.const([-3]))))
    last = g.const([-1])
    if p == 0:
        nonzero = g.op("Cast", g.op("Not", g.op("Equal", difference, g.const(0.0, x1.dtype))),
                       to_i=int(x1.dtype))
        return g.op("ReduceSum", nonzero, last, keepdims_i=0)
    if p == 1:
        return g.op("ReduceSum", difference, last, keepdims_i=0)
    if p == 2:
        return g.op("Sqrt", g.op("ReduceSum", g.op("Mul", difference, difference), last,
                                 keepdims_i=0))
    if p == float("inf"):
        return reduce(g, "ReduceMax", difference, [-1], False)
    powered = g.op("Pow", difference, g.const(float(p), x1.dtype))
    return g.op("Pow", g.op("ReduceSum", powered, last, keepdims_i=0),
                g.const(1.0 / float(p), x1.dtype))
