"""Order statistics built on a sort: median, nanmedian, kthvalue; searchsorted by counting."""

from __future__ import annotations

import onnx_ir as ir

from onnxport.translate.ops._helpers import FLOAT_TYPES, cast, normalize_axis, rank, reduce
from onnxport.translate.ops.reductions import sort
from onnxport.translate.ops.shape import size_of
from onnxport.translate.registry import translates

_I64 = ir.DataType.INT64


def _pick(g, values, indices, position, axis: int, keepdim: bool):
    """values and indices at ``position`` (an int64 tensor, 1 along ``axis``) along ``axis``."""
    value = g.op("GatherElements", values, position, axis_i=axis)
    index = g.op("GatherElements", indices, position, axis_i=axis)
    index.dtype = _I64
    if not keepdim:
        axes = g.const([axis], _I64)
        value, index = g.op("Squeeze", value, axes), g.op("Squeeze", index, axes)
        index.dtype = _I64
    return value, index


def _position_like(g, x, axis: int, position):
    """``position`` (a scalar int64 value) spread to ``x``'s shape with 1 along ``axis``."""
    shape = g.op("Shape", x)
    ones = g.op("ScatterElements", shape, g.const([axis], _I64), g.const([1], _I64), axis_i=0)
    return g.op("Expand", g.op("Reshape", position, g.const([1], _I64)), ones)


def _flat(g, x):
    flat = g.op("Reshape", x, g.const([-1], _I64))
    flat.shape = ir.Shape([None])
    return flat


def _length(g, x, axis: int):
    return g.op("Gather", g.op("Shape", x), g.const(axis, _I64), axis_i=0)


def _order_statistic(g, self, dim, keepdim, position_of):
    if rank(self) == 0:
        return g.op("Identity", self), g.const(0, _I64)
    axis = normalize_axis(dim, rank(self))
    values, indices = sort(g, self, axis)
    position = position_of(_length(g, self, axis))
    return _pick(g, values, indices, _position_like(g, self, axis, position), axis, keepdim)


@translates("aten::median.dim")
def median_dim(g, self, dim, keepdim=False):
    """median.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"""
    # torch's median is the lower of the two middle elements.
    return _order_statistic(g, self, dim, keepdim, lambda n: g.op(
        "Div", g.op("Sub", n, g.const(1, _I64)), g.const(2, _I64)))


@translates("aten::median")
def median(g, self):
    """median(Tensor self) -> Tensor"""
    return median_dim(g, _flat(g, self), 0)[0]


@translates("aten::kthvalue")
def kthvalue(g, self, k, dim=-1, keepdim=False):
    """kthvalue(Tensor self, SymInt k, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)"""
    return _order_statistic(g, self, dim, keepdim, lambda n: g.const(int(k) - 1, _I64))


@translates("aten::nanmedian.dim")
def nanmedian_dim(g, self, dim, keepdim=False):
    """nanmedian.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"""
    if self.dtype not in FLOAT_TYPES:
        return median_dim(g, self, dim, keepdim)
    if rank(self) == 0:
        return g.op("Identity", self), g.const(0, _I64)
    axis = normalize_axis(dim, rank(self))
    # NaNs sort last (as +inf), and the median is that of the numbers before them.
    nan = g.op("IsNaN", self)
    ordered = g.op("Where", nan, g.const(float("inf"), self.dtype), self)
    ordered.shape = self.shape
    _, indices = sort(g, ordered, axis)
    values = g.op("GatherElements", self, indices, axis_i=axis)
    numbers = g.op("ReduceSum", cast(g, g.op("Not", nan), _I64), g.const([axis], _I64),
                   keepdims_i=1)
    position = g.op("Max", g.op("Div", g.op("Sub", numbers, g.const(1, _I64)),
                                g.const(2, _I64)), g.const(0, _I64))
    return _pick(g, values, indices, position, axis, keepdim)


@translates("aten::nanmedian")
def nanmedian(g, self):
    """nanmedian(Tensor self) -> Tensor"""
    return nanmedian_dim(g, _flat(g, self), 0)[0]


@translates("aten::searchsorted.Tensor")
def searchsorted(g, sorted_sequence, self, *, out_int32=False, right=False, side=None,
                 sorter=None):
    """searchsorted.Tensor(Tensor sorted_sequence, Tensor self, *, bool out_int32=False, bool right=False, str? side=None, Tensor? sorter=None) -> Tensor"""
    if sorter is not None:
        shape = sorted_sequence.shape
        sorted_sequence = g.op("GatherElements", sorted_sequence, sorter, axis_i=-1)
        sorted_sequence.shape = shape
    right = right or side == "right"
    one_dim = rank(sorted_sequence) == 1
    values = self if rank(self) > 0 else g.op("Unsqueeze", self, g.const([0], _I64))
    # The insertion point is the number of elements below (left) or not above (right) v.
    boundaries = g.op("Unsqueeze", sorted_sequence, g.const([0] if one_dim else [-2], _I64))
    compare = "LessOrEqual" if right else "Less"
    below = g.op(compare, boundaries, g.op("Unsqueeze", values, g.const([-1], _I64)))
    count = g.op("ReduceSum", cast(g, below, _I64), g.const([-1], _I64), keepdims_i=0)
    if rank(self) == 0:
        count = g.op("Squeeze", count, g.const([0], _I64))
    return cast(g, count, ir.DataType.INT32 if out_int32 else _I64)


@translates("aten::bucketize.Tensor")
def bucketize(g, self, boundaries, *, out_int32=False, right=False):
    """bucketize.Tensor(Tensor self, Tensor boundaries, *, bool out_int32=False, bool right=False) -> Tensor"""
    # searchsorted of each value in the one sorted row: torch's decomposition searches a
    # length it reads as a number, which fixed a dynamic length of the boundaries.
    return searchsorted(g, boundaries, self, out_int32=out_int32, right=right)


@translates("aten::bucketize.Scalar")
def bucketize_scalar(g, self, boundaries, *, out_int32=False, right=False):
    """bucketize.Scalar(Scalar self, Tensor boundaries, *, bool out_int32=False, bool right=False) -> Tensor"""
    if isinstance(self, float) and boundaries.dtype not in FLOAT_TYPES:
        shape = boundaries.shape
        boundaries = cast(g, boundaries, ir.DataType.DOUBLE)  # (2.5 among int boundaries)
        boundaries.shape = shape
    value = self if isinstance(self, ir.Value) else g.const(self, boundaries.dtype)
    return searchsorted(g, boundaries, value, out_int32=out_int32, right=right)


def _cumulative_extreme(g, self, dim, largest: bool):
    """cummax/cummin for a length n along ``dim``: an n x n lower-triangular mask
    picks the prefix of each position; the index is the last position holding the extreme
    (torch's choice among ties)."""
    if rank(self) == 0:
        return g.op("Identity", self), g.const(0, _I64)
    r = rank(self)
    axis = normalize_axis(dim, r)
    n = self.shape[axis]
    perm = [i for i in range(r) if i != axis] + [axis]
    inverse = [perm.index(i) for i in range(r)]
    x = g.op("Transpose", self, perm_i=perm)
    compute = self.dtype if self.dtype != ir.DataType.BOOL else ir.DataType.UINT8
    x = cast(g, x, compute)
    import torch

    if isinstance(n, int):
        prefix = g.const(torch.tril(torch.ones(n, n, dtype=torch.bool)))
        positions = g.const(torch.arange(n).reshape(1, n))
    else:  # the same mask, of the length at run time: row i holds j <= i
        length = g.op("Squeeze", size_of(g, self, axis), g.const([0], _I64))
        steps = g.op("Range", g.const(0, _I64), length, g.const(1, _I64))
        positions = g.op("Unsqueeze", steps, g.const([0], _I64))
        prefix = g.op("GreaterOrEqual", g.op("Unsqueeze", steps, g.const([1], _I64)), positions)
    if compute in FLOAT_TYPES:
        fill = float("-inf") if largest else float("inf")
    else:
        info = torch.iinfo({ir.DataType.UINT8: torch.uint8}.get(compute, torch.int64))
        fill = info.min if largest else info.max
    rows = g.op("Unsqueeze", x, g.const([-2], _I64))  # [..., 1, n]: row i sees x[j <= i]
    masked = g.op("Where", prefix, rows, g.const(fill, compute))
    values = reduce(g, "ReduceMax" if largest else "ReduceMin", masked, [-1], True)  # [.., n, 1]
    hits = g.op("And", prefix, g.op("Equal", rows, values))
    index = reduce(g, "ReduceMax", g.op("Where", hits, positions, g.const(-1, _I64)), [-1],
                   False)
    values = g.op("Squeeze", values, g.const([-1], _I64))
    values = g.op("Transpose", cast(g, values, self.dtype), perm_i=inverse)
    index = g.op("Transpose", index, perm_i=inverse)
    index.dtype = _I64
    return values, index


@translates("aten::cummax")
def cummax(g, self, dim):
    """cummax(Tensor self, int dim) -> (Tensor values, Tensor indices)"""
    return _cumulative_extreme(g, self, dim, largest=True)


@translates("aten::cummin")
def cummin(g, self, dim):
    """cummin(Tensor self, int dim) -> (Tensor values, Tensor indices)"""
    return _cumulative_extreme(g, self, dim, largest=False)


@translates("aten::mode")
def mode(g, self, dim=-1, keepdim=False):
    """mode(Tensor self, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)"""
    if rank(self) == 0:
        return g.op("Identity", self), g.const(0, _I64)
    r = rank(self)
    axis = normalize_axis(dim, r)
    perm = [i for i in range(r) if i != axis] + [axis]
    x = g.op("Transpose", self, perm_i=perm)
    # counts[..., i] = how many elements equal x[..., i]; the mode is the smallest of the
    # most frequent values, its index the last position holding it (torch's CPU kernel).
    same = g.op("Equal", g.op("Unsqueeze", x, g.const([-1], _I64)),
                g.op("Unsqueeze", x, g.const([-2], _I64)))
    counts = g.op("ReduceSum", cast(g, same, _I64), g.const([-1], _I64), keepdims_i=0)
    best = reduce(g, "ReduceMax", counts, [-1], True)
    compute = self.dtype if self.dtype != ir.DataType.BOOL else ir.DataType.UINT8
    xc = cast(g, x, compute)
    import torch

    if compute in FLOAT_TYPES:
        largest = float("inf")
    else:
        largest = torch.iinfo({ir.DataType.UINT8: torch.uint8}.get(compute, torch.int64)).max
    candidates = g.op("Where", g.op("Equal", counts, best), xc, g.const(largest, compute))
    value = reduce(g, "ReduceMin", candidates, [-1], True)
    length = _length(g, x, r - 1)
    positions = g.op("Range", g.const(0, _I64), length, g.const(1, _I64))
    index = reduce(g, "ReduceMax", g.op("Where", g.op("Equal", xc, value), positions,
                                        g.const(-1, _I64)), [-1], True)
    inverse = [perm.index(i) for i in range(r)]
    value = g.op("Transpose", cast(g, value, self.dtype), perm_i=inverse)
    index = g.op("Transpose", index, perm_i=inverse)
    if not keepdim:
        axes = g.const([axis], _I64)
        value, index = g.op("Squeeze", value, axes), g.op("Squeeze", index, axes)
    index.dtype = _I64
    return value, index
