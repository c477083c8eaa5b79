"""Reductions and softmax-like ops."""

from __future__ import annotations

import onnx_ir as ir

import torch

from onnxport.translate.ops._helpers import (
    FLOAT_TYPES, as_1d, as_tensor, cast, expected_dtype, normalize_axis, rank, reduce, squeeze,
    unsqueeze,
)
from onnxport.translate.ops.shape import size_of
from onnxport.translate.registry import translates

_I64 = ir.DataType.INT64


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
        if onnx_op == "ReduceSum" and x.dtype == ir.DataType.INT64 and g.opset >= 11 \
                and rank(self):
            return _exact_int64_sum(g, x, rank(self), axes, keepdim)
        if onnx_op == "ReduceMean" and not _nonempty(x, axes):
            return _mean_of_maybe_empty(g, x, axes, keepdim)
        result = reduce(g, onnx_op, x, axes, keepdim)
        if onnx_op in ("ReduceMax", "ReduceMin") and x.dtype in FLOAT_TYPES:
            result = _with_nan(g, x, result, axes, keepdim)
        return result

    translation.__name__ = onnx_op.lower()
    translation.__doc__ = f"{names[0]}.dim(Tensor self, int[1]? dim, bool keepdim=False) -> Tensor"
    translates(*names)(translation)


def _nonempty(x: ir.Value, axes) -> bool:
    """Whether the axes reduced over (all when None) have static sizes above 0."""
    if x.shape is None:
        return False
    dims = list(x.shape) if axes is None else [x.shape[axis] for axis in axes]
    return all(isinstance(dim, int) and dim > 0 for dim in dims)


def _mean_of_maybe_empty(g, x: ir.Value, axes, keepdim: bool) -> ir.Value:
    """The sum over the count: over no elements, 0 / 0 is NaN, as torch's mean gives (ONNX
    Runtime's ReduceMean gives 0). Half floats sum and count in float (their count overflows
    at 65504, and torch accumulates them in float too)."""
    if x.dtype in (ir.DataType.FLOAT16, ir.DataType.BFLOAT16):
        return cast(g, _mean_of_maybe_empty(g, cast(g, x, ir.DataType.FLOAT), axes, keepdim),
                    x.dtype)
    total = reduce(g, "ReduceSum", x, axes, keepdim)
    if axes is None:
        count = g.op("Size", x)
    else:
        sizes = g.op("Gather", g.op("Shape", x), g.const(list(axes), ir.DataType.INT64))
        count = g.op("ReduceProd", sizes, keepdims_i=0)
    return g.op("Div", total, cast(g, count, x.dtype))


def _exact_int64_sum(g, x: ir.Value, r: int, axes, keepdim: bool) -> ir.Value:
    """ONNX Runtime's int64 ReduceSum accumulates in double, so a sum beyond 2**53 loses its
    low bits ([2**60 + 1, 2] summed to 2**60); its CumSum adds in int64, exactly. A zero put
    before each reduced axis makes an empty axis sum to 0, and the last element is the sum."""
    if axes is None:  # all of it: one axis of a [1, n] view, then the shape torch gives
        total = _exact_int64_sum(g, g.op("Reshape", x, g.const([1, -1], ir.DataType.INT64)),
                                 2, [1], True)
        return g.op("Reshape", total, g.const([1] * r if keepdim else [], ir.DataType.INT64))
    for axis in axes:
        pads = [0] * (2 * r)
        pads[axis] = 1
        running = g.op("CumSum", g.op("Pad", x, g.const(pads, ir.DataType.INT64)),
                       g.const(axis, ir.DataType.INT64))
        x = g.op("Slice", running, g.const([-1], ir.DataType.INT64),
                 g.const([2**63 - 1], ir.DataType.INT64), g.const([axis], ir.DataType.INT64))
    return x if keepdim else squeeze(g, x, sorted(axes))


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
        values = cast(g, reduce(g, op, x, None, False), self.dtype)
        return _with_nan(g, x, values, None, False) if x.dtype in FLOAT_TYPES else values
    axis = normalize_axis(dim, rank(self))
    values = cast(g, reduce(g, op, x, [axis], keepdim), self.dtype)
    indices = g.op("ArgMax" if is_max else "ArgMin", x, axis_i=axis, keepdims_i=int(keepdim))
    if x.dtype in FLOAT_TYPES:
        found, any_nan = _nan_found(g, x, [axis], keepdim)
        values = g.op("Where", any_nan, g.const(float("nan"), values.dtype), values)
        # torch points at the first NaN.
        first = g.op("ArgMax", found, axis_i=axis, keepdims_i=int(keepdim))
        indices = g.op("Where", any_nan, first, indices)
    return values, indices


def _with_nan(g, x, result, axes, keepdim):
    """``result`` (a ReduceMax/ReduceMin of float ``x`` over ``axes``) made NaN where the
    reduced elements hold a NaN: torch's max and min propagate it, ONNX Runtime's skip it."""
    any_nan = _nan_found(g, x, axes, keepdim)[1]
    return g.op("Where", any_nan, g.const(float("nan"), result.dtype), result)


def _nan_found(g, x, axes, keepdim):
    """(a float mask of the NaNs in ``x``, whether each reduction over ``axes`` meets one)."""
    found = g.op("Cast", g.op("IsNaN", x), to_i=int(ir.DataType.FLOAT))
    any_nan = g.op("Cast", reduce(g, "ReduceMax", found, axes, keepdim),
                   to_i=int(ir.DataType.BOOL))
    return found, any_nan


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
        # The index into the flattened tensor; keepdim keeps every axis, as ones.
        result = _arg(g, op, g.op("Reshape", x, g.const([-1])), 0, False)
        if keepdim:
            result = g.op("Reshape", result, g.const([1] * rank(self), ir.DataType.INT64))
        return result
    return _arg(g, op, x, normalize_axis(dim, rank(self)), keepdim)


def _arg(g, op, x, axis, keepdim):
    result = g.op(op, x, axis_i=axis, keepdims_i=int(keepdim))
    if x.dtype in FLOAT_TYPES:
        # torch orders NaN above everything (for argmin too): the first NaN wins.
        found, any_nan = _nan_found(g, x, [axis], keepdim)
        first = g.op("ArgMax", found, axis_i=axis, keepdims_i=int(keepdim))
        result = g.op("Where", any_nan, first, result)
    return result


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


@translates("aten::diff")
def diff(g, self, n=1, dim=-1, prepend=None, append=None):
    """diff(Tensor self, int n=1, int dim=-1, Tensor? prepend=None, Tensor? append=None) -> Tensor

    Each step is the axis from 1 on less the axis up to its last, two Slices that hold at
    every length (0 and 1 included): torch's decomposition, traced at the example's length,
    took its branch for an empty axis there (the input returned unchanged at every size)."""
    out = expected_dtype(g) or self.dtype
    parts = [cast(g, t, out) for t in (prepend, self, append) if t is not None]
    axis = normalize_axis(dim, rank(self))
    x = g.op("Concat", *parts, axis_i=axis) if len(parts) > 1 else parts[0]
    axes = g.const([axis], ir.DataType.INT64)
    for _ in range(n):
        later = g.op("Slice", x, g.const([1]), g.const([2**63 - 1]), axes)
        earlier = g.op("Slice", x, g.const([0]), g.const([-1]), axes)
        x = g.op("Xor" if out == ir.DataType.BOOL else "Sub", later, earlier)
    return x if n else g.op("Identity", x)


@translates("aten::cov")
def cov(g, self, *, correction=1, fweights=None, aweights=None):
    """cov(Tensor self, *, int correction=1, Tensor? fweights=None, Tensor? aweights=None) -> Tensor

    Its own translation: traced, cov is one call whose decomposition reads the weights'
    values (is_nonzero checks), which a trace cannot keep."""
    return _squeezed_as_torch(g, self, _covariance(g, self, correction, fweights, aweights))


@translates("aten::corrcoef")
def corrcoef(g, self):
    """corrcoef(Tensor self) -> Tensor"""
    c = _covariance(g, self, 1, None, None)
    # c / (std_i std_j), the standard deviations the diagonal's roots; clipped to [-1, 1].
    std = g.op("Sqrt", reduce(g, "ReduceSum", g.op("Mul", c, g.op("EyeLike", c)), [1], False))
    c = g.op("Div", g.op("Div", c, unsqueeze(g, std, [1])), unsqueeze(g, std, [0]))
    one = g.const(1.0, c.dtype)
    return _squeezed_as_torch(g, self, g.op("Min", g.op("Max", c, g.op("Neg", one)), one))


def _covariance(g, self, correction, fweights, aweights) -> ir.Value:
    """The [variables, variables] covariance of ``self``'s rows (a 1-D input: one row)."""
    out = expected_dtype(g)
    out = out if out in FLOAT_TYPES else (self.dtype if self.dtype in FLOAT_TYPES
                                          else ir.DataType.FLOAT)
    x = cast(g, self, out)
    if rank(self) < 2:
        x = g.op("Reshape", x, g.const([1, -1], _I64))
    weights = [cast(g, w, out) for w in (fweights, aweights) if w is not None]
    w = g.op("Mul", *weights) if len(weights) == 2 else (weights[0] if weights else None)
    if w is None:
        mean = reduce(g, "ReduceMean", x, [1], True)
        count = cast(g, size_of(g, x, 1), out)
        factor = g.op("Sub", g.op("Reshape", count, g.const([], _I64)),
                      g.const(float(correction), out))
    else:
        total = reduce(g, "ReduceSum", w, None, False)
        mean = g.op("Div", reduce(g, "ReduceSum", g.op("Mul", x, w), [1], True), total)
        factor = total
        if correction and aweights is None:
            factor = g.op("Sub", total, g.const(float(correction), out))
        elif correction:
            # torch: sum(w) - correction * sum(w * aweights) / sum(w)
            spread = g.op("Div", reduce(g, "ReduceSum", g.op("Mul", w, cast(g, aweights, out)),
                                        None, False), total)
            factor = g.op("Sub", total, g.op("Mul", g.const(float(correction), out), spread))
    # A factor at or below 0 is 0 in torch (with a warning): the result inf or nan.
    factor = g.op("Max", factor, g.const(0.0, out))
    centred = g.op("Sub", x, mean)
    weighted = centred if w is None else g.op("Mul", centred, w)
    product = g.op("MatMul", weighted, g.op("Transpose", centred, perm_i=[1, 0]))
    return g.op("Div", product, factor)


def _squeezed_as_torch(g, self, c: ir.Value) -> ir.Value:
    """torch squeezes the result: 0-d for one variable (a 1-D input, or one row)."""
    expected = g.expected if isinstance(g.expected, torch.Tensor) else None
    one = expected.dim() == 0 if expected is not None else \
        rank(self) < 2 or self.shape[0] == 1
    return g.op("Reshape", c, g.const([], _I64)) if one else c


@translates("aten::var", "aten::std")
def var(g, self, unbiased=True):
    """var(Tensor self, bool unbiased=True) -> Tensor"""
    return _spread(g, _variance(g, self, None, int(bool(unbiased)), False)[0])


@translates("aten::var.dim", "aten::std.dim")
def var_dim(g, self, dim, unbiased=True, keepdim=False):
    """var.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor"""
    return _spread(g, _variance(g, self, dim, int(bool(unbiased)), keepdim)[0])


@translates("aten::var.correction", "aten::std.correction")
def var_correction(g, self, dim=None, *, correction=None, keepdim=False):
    """var.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor"""
    return _spread(g, _variance(g, self, dim, _correction(correction), keepdim)[0])


@translates("aten::var_mean", "aten::std_mean")
def var_mean(g, self, unbiased=True):
    """var_mean(Tensor self, bool unbiased=True) -> (Tensor, Tensor)"""
    return _spread_and_mean(g, self, None, int(bool(unbiased)), False)


@translates("aten::var_mean.dim", "aten::std_mean.dim")
def var_mean_dim(g, self, dim, unbiased=True, keepdim=False):
    """var_mean.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> (Tensor, Tensor)"""
    return _spread_and_mean(g, self, dim, int(bool(unbiased)), keepdim)


@translates("aten::var_mean.correction", "aten::std_mean.correction")
def var_mean_correction(g, self, dim=None, *, correction=None, keepdim=False):
    """var_mean.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> (Tensor, Tensor)"""
    return _spread_and_mean(g, self, dim, _correction(correction), keepdim)


@translates("prims::var")
def prims_var(g, inp, dims, correction=1.0, *, output_dtype=None):
    """var(Tensor inp, int[]? dims, float? correction=1, *, ScalarType? output_dtype=None) -> Tensor"""
    return _variance(g, inp, dims, _correction(correction), False)[0]


def _correction(correction):
    return 1 if correction is None else correction


def _spread(g, variance):
    """The variance, or its square root for the std overloads."""
    return g.op("Sqrt", variance) if "std" in g.provenance.aten else variance


def _spread_and_mean(g, self, dim, correction, keepdim):
    result, mean = _variance(g, self, dim, correction, keepdim)
    if not keepdim:
        axes = _axes(self, dim)
        mean = squeeze(g, mean, axes or list(range(rank(self))))
    return _spread(g, result), mean


def _variance(g, self, dim, correction, keepdim):
    """(the variance, the mean with the reduced axes kept). Each overload reads its own
    arguments: TorchScript hands bools over as 0 and 1, so an ``unbiased`` is not told from a
    ``dim`` by its type (``std(x, unbiased=False)`` once reduced along axis 0)."""
    axes = _axes(self, dim)
    if axes is not None and not axes:
        axes = None
    x = self if self.dtype in FLOAT_TYPES else cast(g, self, expected_dtype(g) or ir.DataType.FLOAT)
    # The mean as sum / count, not ReduceMean: of no elements it is nan, as in torch (ONNX
    # Runtime's ReduceMean of an empty tensor is 0).
    summed = reduce(g, "ReduceSum", x, axes, True)
    count = g.op("Cast", g.op("Size", x), to_i=int(x.dtype))
    if axes is not None:
        kept = g.op("Cast", g.op("Size", summed), to_i=int(x.dtype))
        count = g.op("Div", count, kept)
    mean = g.op("Div", summed, count)
    diff = g.op("Sub", x, mean)
    total = reduce(g, "ReduceSum", g.op("Mul", diff, diff), axes, keepdim)
    # torch divides by max(N - correction, 0): no samples left gives 0/0 = nan, as in torch.
    divisor = g.op("Max", g.op("Sub", count, g.const(float(correction), x.dtype)),
                   g.const(0.0, x.dtype))
    return g.op("Div", total, divisor), mean


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
    if p in (float("inf"), float("-inf")):
        magnitude = g.op("Abs", x)
        result = reduce(g, "ReduceMax" if p > 0 else "ReduceMin", magnitude, axes, keepdim)
        return _with_nan(g, magnitude, result, axes, keepdim)
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


# -- sorting -----------------------------------------------------------------------------------
# ONNX TopK breaks ties by the lower index first, in both directions: a stable sort.
@translates("aten::topk")
def topk(g, self, k, dim=-1, largest=True, sorted=True):
    """topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)"""
    # sorted=False lets torch return the k elements in any order; sorted is one such order.
    return _top(g, self, as_1d(g, as_tensor(g, k, dtype=ir.DataType.INT64)), dim, largest)


@translates("aten::sort")
def sort(g, self, dim=-1, descending=False, *, stable=None):
    """sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)

    Also sort.stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False)."""
    if rank(self) == 0:
        return g.op("Identity", self), g.const(0, ir.DataType.INT64)
    return _top(g, self, _size_along(g, self, dim), dim, descending)


@translates("aten::argsort")
def argsort(g, self, dim=-1, descending=False, *, stable=False):
    """argsort(Tensor self, int dim=-1, bool descending=False) -> Tensor

    Also argsort.stable(Tensor self, *, bool stable, int dim=-1, bool descending=False)."""
    return sort(g, self, dim, descending)[1]


def _size_along(g, x, dim):
    axis = normalize_axis(dim, rank(x))
    size = x.shape[axis]
    if isinstance(size, int):
        return g.const([size], ir.DataType.INT64)
    if g.opset >= 15:
        return g.op("Shape", x, start_i=axis, end_i=axis + 1)
    return g.op("Gather", g.op("Shape", x), g.const([axis]), axis_i=0)


def _top(g, self, k, dim, largest):
    """TopK of ``k`` (a 1-D [1] int64 value) along ``dim``, sorted, ties in index order."""
    if rank(self) == 0:
        # A 0-d tensor is its own (only) element, at index 0 (k is 0 or 1: 1, or torch fails).
        return g.op("Identity", self), g.const(0, ir.DataType.INT64)
    # TopK has no bool kernel: order bools as 0 and 1.
    x = _comparable(g, self)
    values, indices = g.op("TopK", x, k, axis_i=normalize_axis(dim, rank(self)),
                           largest_i=int(bool(largest)), sorted_i=1, outputs=2)
    indices.dtype = ir.DataType.INT64
    return cast(g, values, self.dtype), indices
