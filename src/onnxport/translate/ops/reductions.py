"""Reductions and softmax-like ops."""

from __future__ import annotations

import onnx_ir as ir

from onnxport.translate.ops._helpers import (
    FLOAT_TYPES, cast, expected_dtype, normalize_axis, rank, reduce,
)
from onnxport.translate.registry import translates


def _axes(self, dim):
    if dim is None:
        return None
    dims = dim if isinstance(dim, (list, tuple)) else [dim]
    r = rank(self)
    return [normalize_axis(d, r) for d in dims] if r else None


def _reduction(onnx_op: str, *names: str):
    def translation(g, self, dim=None, keepdim=False, *, dtype=None, **_):
        if isinstance(dim, bool):  # all-reduce overloads: (self, *, dtype) or (self, keepdim)
            dim, keepdim = None, dim
        x = self
        out_dtype = expected_dtype(g)
        if out_dtype is not None and out_dtype != x.dtype and onnx_op != "ReduceMax":
            x = cast(g, x, out_dtype)
        axes = _axes(self, dim)
        if axes is not None and not axes:
            axes = None
        return reduce(g, onnx_op, x, axes, keepdim)

    translation.__name__ = onnx_op.lower()
    translation.__doc__ = f"{names[0]}.dim(Tensor self, int[1]? dim, bool keepdim=False) -> Tensor"
    translates(*names)(translation)


_reduction("ReduceMean", "aten::mean")
_reduction("ReduceSum", "aten::sum")
_reduction("ReduceProd", "aten::prod")
_reduction("ReduceMax", "aten::amax")
_reduction("ReduceMin", "aten::amin")


@translates("aten::max", "aten::min")
def max_(g, self, dim=None, keepdim=False):
    """max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"""
    is_max = "max" in g.provenance.aten
    op = "ReduceMax" if is_max else "ReduceMin"
    if dim is None:
        return reduce(g, op, self, None, False)
    axis = normalize_axis(dim, rank(self))
    values = reduce(g, op, self, [axis], keepdim)
    indices = g.op("ArgMax" if is_max else "ArgMin", self, axis_i=axis, keepdims_i=int(keepdim))
    return values, indices


@translates("aten::argmax", "aten::argmin")
def argmax(g, self, dim=None, keepdim=False):
    """argmax(Tensor self, int? dim=None, bool keepdim=False) -> Tensor"""
    op = "ArgMax" if "argmax" in g.provenance.aten else "ArgMin"
    x = self
    if dim is None:
        x = g.op("Reshape", self, g.const([-1]))
        dim = 0
        result = g.op(op, x, axis_i=0, keepdims_i=0)
        return result
    return g.op(op, x, axis_i=normalize_axis(dim, rank(self)), keepdims_i=int(keepdim))


@translates("aten::softmax", "aten::_softmax", "aten::special_softmax")
def softmax(g, self, dim, *_, **__):
    """softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor"""
    dtype = expected_dtype(g)
    x = cast(g, self, dtype) if dtype is not None else self
    return g.op("Softmax", x, axis_i=normalize_axis(dim, rank(self)))


@translates("aten::log_softmax", "aten::_log_softmax", "aten::special_log_softmax")
def log_softmax(g, self, dim, *_, **__):
    """log_softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor"""
    dtype = expected_dtype(g)
    x = cast(g, self, dtype) if dtype is not None else self
    return g.op("LogSoftmax", x, axis_i=normalize_axis(dim, rank(self)))


@translates("aten::cumsum")
def cumsum(g, self, dim, *, dtype=None):
    """cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor"""
    out = expected_dtype(g)
    x = cast(g, self, out) if out is not None else self
    return g.op("CumSum", x, g.const(normalize_axis(dim, rank(self)), ir.DataType.INT64))


@translates("aten::var", "aten::std")
def var(g, self, dim=None, *, correction=None, keepdim=False, unbiased=None):
    """var.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor"""
    if isinstance(dim, bool):
        unbiased, dim = dim, None
    if correction is None:
        correction = 0 if unbiased is False else 1
    axes = _axes(self, dim)
    mean = reduce(g, "ReduceMean", self, axes, True)
    diff = g.op("Sub", self, mean)
    squared = g.op("Mul", diff, diff)
    if correction == 0:
        result = reduce(g, "ReduceMean", squared, axes, keepdim)
    else:
        total = reduce(g, "ReduceSum", squared, axes, keepdim)
        count = g.op("Cast", g.op("Size", self), to_i=int(self.dtype))
        if axes is not None:
            kept = g.op("Cast", g.op("Size", mean), to_i=int(self.dtype))
            count = g.op("Div", count, kept)
        result = g.op("Div", total, g.op("Sub", count, g.const(float(correction), self.dtype)))
    if "std" in g.provenance.aten:
        result = g.op("Sqrt", result)
    return result


@translates("aten::any", "aten::all")
def any_(g, self, dim=None, keepdim=False):
    """any.dim(Tensor self, int dim, bool keepdim=False) -> Tensor"""
    is_any = "any" in g.provenance.aten
    as_int = g.op("Cast", cast(g, self, ir.DataType.BOOL), to_i=int(ir.DataType.INT64))
    axes = _axes(self, dim)
    reduced = reduce(g, "ReduceMax" if is_any else "ReduceMin", as_int, axes, keepdim)
    return g.op("Cast", reduced, to_i=int(ir.DataType.BOOL))


@translates("aten::norm", "aten::linalg_vector_norm")
def norm(g, self, p=2, dim=None, keepdim=False, *, dtype=None):
    """linalg_vector_norm(Tensor self, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor"""
    axes = _axes(self, dim)
    if p == 1:
        return reduce(g, "ReduceL1", self, axes, keepdim)
    if p == 2:
        return reduce(g, "ReduceL2", self, axes, keepdim)
    if p == float("inf"):
        return reduce(g, "ReduceMax", g.op("Abs", self), axes, keepdim)
    powered = g.op("Pow", g.op("Abs", self), g.const(float(p), self.dtype))
    summed = reduce(g, "ReduceSum", powered, axes, keepdim)
    return g.op("Pow", summed, g.const(1.0 / p, self.dtype))


@translates("aten::logsumexp")
def logsumexp(g, self, dim, keepdim=False):
    """logsumexp(Tensor self, int[1] dim, bool keepdim=False) -> Tensor"""
    x = self if self.dtype in FLOAT_TYPES else cast(g, self, ir.DataType.FLOAT)
    return reduce(g, "ReduceLogSumExp", x, _axes(self, dim), keepdim)
