"""Functions of whole matrices with a direct ONNX form: det, logdet, slogdet (ONNX Det), and
bilinear (one Einsum)."""

from __future__ import annotations

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
