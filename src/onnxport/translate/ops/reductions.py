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
        if x.dtype == ir.DataType.BOOL:  # amax/amin of bools
            return cast(g, reduce(g, onnx_op, _comparable(g, x), axes, keepdim), ir.DataType.BOOL)
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
    if rank(self) == 0 and dim is not None:
        # A 0-d tensor is its own max along dim 0 (or -1), at index 0; ONNX needs an axis.
        return g.op("Identity", self), g.const(0, ir.DataType.INT64)
    x = _comparable(g, self)
    if dim is None:
        return cast(g, reduce(g, op, x, None, False), self.dtype)
    axis = normalize_axis(dim, rank(self))
    values = cast(g, reduce(g, op, x, [axis], keepdim), self.dtype)
    indices = g.op("ArgMax" if is_max else "ArgMin", x, axis_i=axis, keepdims_i=int(keepdim))
    return values, indices


def _comparable(g, x):
    """Bools as int32: ONNX's ReduceMax/ReduceMin/ArgMax/ArgMin take numbers only."""
    return cast(g, x, ir.DataType.INT32) if x.dtype == ir.DataType.BOOL else x


@translates("aten::argmax", "aten::argmin")
def argmax(g, self, dim=None, keepdim=False):
    """argmax(Tensor self, int? dim=None, bool keepdim=False) -> Tensor"""
    op = "ArgMax" if "argmax" in g.provenance.aten else "ArgMin"
    x = _comparable(g, self)
    if rank(self) == 0:
        return g.const(0, ir.DataType.INT64)  # the only index of a 0-d tensor
    if dim is None:
        x = g.op("Reshape", x, g.const([-1]))
        dim = 0
        result = g.op(op, x, axis_i=0, keepdims_i=0)
        return result
    return g.op(op, x, axis_i=normalize_axis(dim, rank(self)), keepdims_i=int(keepdim))


@translates("aten::softmax", "aten::_softmax", "aten::special_softmax")
def softmax(g, self, dim, *_, **__):
    """softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor"""
    dtype = expected_dtype(g)
    x = cast(g, self, dtype) if dtype is not None else self
    return _softmax_like(g, "Softmax", x, dim, rank(self))


@translates("aten::log_softmax", "aten::_log_softmax", "aten::special_log_softmax")
def log_softmax(g, self, dim, *_, **__):
    """log_softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor"""
    dtype = expected_dtype(g)
    x = cast(g, self, dtype) if dtype is not None else self
    return _softmax_like(g, "LogSoftmax", x, dim, rank(self))


def _softmax_like(g, op_type, x, dim, r):
    if r == 0:
        # ONNX wants rank >= 1; torch treats a 0-d tensor as one element.
        one = g.op(op_type, g.op("Unsqueeze", x, g.const([0])), axis_i=0)
        return g.op("Squeeze", one, g.const([0]))
    return g.op(op_type, x, axis_i=normalize_axis(dim, r))


@translates("aten::cumsum")
def cumsum(g, self, dim, *, dtype=None):
    """cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor"""
    out = expected_dtype(g)
    x = cast(g, self, out) if out is not None else self
    if rank(self) == 0:
        return g.op("Identity", x)  # ONNX CumSum rejects scalars; torch's is the value itself
    axis = g.const(normalize_axis(dim, rank(self)), ir.DataType.INT64)
    if x.dtype == ir.DataType.BOOL:
        # A bool cumsum (dtype=torch.bool) is a running "or": count in int64, then nonzero.
        return cast(g, g.op("CumSum", cast(g, x, ir.DataType.INT64), axis), ir.DataType.BOOL)
    return g.op("CumSum", x, axis)


@translates("aten::var", "aten::std")
def var(g, self, *args, correction=None, keepdim=False, unbiased=None):
    """var.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor

    Also the older overloads: var(Tensor self, bool unbiased=True) and
    var.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False).
    """
    dim = None
    if args and isinstance(args[0], bool):  # var(self, unbiased)
        unbiased = args[0]
    elif args:
        dim = args[0]
        if len(args) > 1:  # var.dim(self, dim, unbiased, keepdim)
            unbiased = args[1]
        if len(args) > 2:
            keepdim = args[2]
    if correction is None:
        correction = 0 if unbiased is False else 1
    axes = _axes(self, dim)
    if axes is not None and not axes:
        axes = None
    x = self if self.dtype in FLOAT_TYPES else cast(g, self, expected_dtype(g) or ir.DataType.FLOAT)
    mean = reduce(g, "ReduceMean", x, axes, True)
    diff = g.op("Sub", x, mean)
    total = reduce(g, "ReduceSum", g.op("Mul", diff, diff), axes, keepdim)
    count = g.op("Cast", g.op("Size", x), to_i=int(x.dtype))
    if axes is not None:
        kept = g.op("Cast", g.op("Size", mean), to_i=int(x.dtype))
        count = g.op("Div", count, kept)
    # torch divides by max(N - correction, 0): no samples left gives 0/0 = nan, as in torch.
    divisor = g.op("Max", g.op("Sub", count, g.const(float(correction), x.dtype)),
                   g.const(0.0, x.dtype))
    result = g.op("Div", total, divisor)
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
    if p is None:
        p = 2
    out_dtype = expected_dtype(g)
    x = cast(g, self, out_dtype) if out_dtype is not None else self
    axes = _axes(self, dim)
    if axes is not None and not axes:
        axes = None
    if p == 1:
        return reduce(g, "ReduceL1", x, axes, keepdim)
    if p == 2:
        return reduce(g, "ReduceL2", x, axes, keepdim)
    if p == float("inf"):
        return reduce(g, "ReduceMax", g.op("Abs", x), axes, keepdim)
    if p == float("-inf"):
        return reduce(g, "ReduceMin", g.op("Abs", x), axes, keepdim)
    if p == 0:
        # The "0-norm" counts the nonzero entries.
        nonzero = g.op("Not", g.op("Equal", x, g.const(0.0, x.dtype)))
        return reduce(g, "ReduceSum", g.op("Cast", nonzero, to_i=int(x.dtype)), axes, keepdim)
    powered = g.op("Pow", g.op("Abs", x), g.const(float(p), x.dtype))
    summed = reduce(g, "ReduceSum", powered, axes, keepdim)
    return g.op("Pow", summed, g.const(1.0 / p, x.dtype))


@translates("aten::logsumexp")
def logsumexp(g, self, dim, keepdim=False):
    """logsumexp(Tensor self, int[1] dim, bool keepdim=False) -> Tensor"""
    x = self if self.dtype in FLOAT_TYPES else cast(g, self, ir.DataType.FLOAT)
    return reduce(g, "ReduceLogSumExp", x, _axes(self, dim), keepdim)
