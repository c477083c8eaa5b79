"""Reductions over segments and prefixes that ONNX has no op for: embedding_bag (sum, mean or
max of each bag of rows) and cumprod, built from a membership mask and a Reduce."""

from __future__ import annotations

import onnx_ir as ir

from onnxport.errors import TranslationError
from onnxport.translate.ops._helpers import (cast, expected_dtype, normalize_axis, rank,
                                             unsqueeze)
from onnxport.translate.registry import translates


def _arange(g, count: ir.Value) -> ir.Value:
    """0, 1, ..., count - 1 (int64) for a 0-d int64 count."""
    out = g.op("Range", g.const(0), count, g.const(1))
    out.dtype = ir.DataType.INT64
    return out


def _length(g, x: ir.Value, axis: int) -> ir.Value:
    """The 0-d int64 size of ``x`` along ``axis``."""
    size = g.op("Gather", g.op("Shape", x), g.const(axis), axis_i=0)
    size.dtype = ir.DataType.INT64
    return size


@translates("aten::cumprod")
def cumprod(g, self, dim, *, dtype=None):
    """cumprod(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor

    out[i] = prod over j <= i of x[j]: a [n, n] lower-triangular choice between x[j] and 1,
    reduced by ReduceProd. Exact for zeros, negatives and integers, where exp(cumsum(log))
    is not; it costs n * n elements per row, so long axes are better left to cumsum."""
    out_dtype = expected_dtype(g) or self.dtype
    r = rank(self)
    x = cast(g, self, out_dtype)
    if r == 0:
        return x
    axis = normalize_axis(dim, r)
    if axis != r - 1:
        perm = [i for i in range(r) if i != axis] + [axis]
        x = g.op("Transpose", x, perm_i=perm)
    index = _arange(g, _length(g, x, r - 1))
    # mask[i, j] = j <= i
    mask = g.op("LessOrEqual", unsqueeze(g, index, [0]), unsqueeze(g, index, [1]))
    chosen = g.op("Where", mask, unsqueeze(g, x, [-2]), g.const(1, out_dtype))
    out = g.op("ReduceProd", chosen, g.const([-1]), keepdims_i=0) if g.opset >= 18 else \
        g.op("ReduceProd", chosen, axes_i=[-1], keepdims_i=0)
    if axis != r - 1:
        inverse = [0] * r
        for position, source in enumerate(perm):
            inverse[source] = position
        out = g.op("Transpose", out, perm_i=inverse)
    return out


_SUM, _MEAN, _MAX = 0, 1, 2


@translates("aten::embedding_bag", "aten::_embedding_bag", "aten::embedding_bag.padding_idx",
            "aten::_embedding_bag_forward_only")
def embedding_bag(g, weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """embedding_bag.padding_idx(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq, int mode, bool sparse, Tensor? per_sample_weights, bool include_last_offset, int? padding_idx) -> (Tensor, Tensor, Tensor, Tensor)

    Bag b holds the rows of indices[offsets[b]:offsets[b + 1]]. A [bags, n] membership mask
    (position p is in bag b when b is the last offset <= p) sums by MatMul, and maxes by
    ReduceMax over rows masked to -inf; an empty bag is zeros, rows equal to padding_idx are
    left out (and not counted by the mean)."""
    if rank(indices) != 1:
        raise TranslationError("embedding_bag with 2-d indices reaches the graph as 1-d "
                               "indices and offsets; this call has neither")
    if padding_idx is not None and padding_idx < 0:
        padding_idx = None  # torch's callers make it non-negative; -1 is "none"
    dtype = weight.dtype
    offsets = cast(g, offsets, ir.DataType.INT64)
    indices = cast(g, indices, ir.DataType.INT64)
    positions = _arange(g, _length(g, indices, 0))  # [n]
    # The bag of each position: (number of offsets <= p) - 1. With include_last_offset the
    # last offset ends the last bag: positions after it land in a bag that is not counted.
    starts = g.op("LessOrEqual", unsqueeze(g, offsets, [1]), unsqueeze(g, positions, [0]))
    bag_of = g.op("Sub", g.op("ReduceSum", cast(g, starts, ir.DataType.INT64), g.const([0]),
                              keepdims_i=0), g.const(1))
    count = _length(g, offsets, 0)
    if include_last_offset:
        count = g.op("Sub", count, g.const(1))
    bags = _arange(g, count)
    member = g.op("Equal", unsqueeze(g, bags, [1]), unsqueeze(g, bag_of, [0]))  # [bags, n]
    if padding_idx is not None:
        kept = g.op("Not", g.op("Equal", indices, g.const(int(padding_idx))))
        member = g.op("And", member, unsqueeze(g, kept, [0]))
    rows = g.op("Gather", weight, indices, axis_i=0)  # [n, d]
    if per_sample_weights is not None:
        rows = g.op("Mul", rows, unsqueeze(g, cast(g, per_sample_weights, dtype), [1]))
    counts = g.op("ReduceSum", cast(g, member, dtype), g.const([1]), keepdims_i=1)  # [bags, 1]
    if mode == _MAX:
        masked = g.op("Where", unsqueeze(g, member, [2]), unsqueeze(g, rows, [0]),
                      g.const(float("-inf"), dtype))
        pooled = g.op("ReduceMax", masked, g.const([1]), keepdims_i=0) if g.opset >= 18 else \
            g.op("ReduceMax", masked, axes_i=[1], keepdims_i=0)
        pooled = g.op("Where", g.op("Greater", counts, g.const(0.0, dtype)), pooled,
                      g.const(0.0, dtype))
    else:
        pooled = g.op("MatMul", cast(g, member, dtype), rows)
        if mode == _MEAN:
            pooled = g.op("Div", pooled, g.op("Max", counts, g.const(1.0, dtype)))
    return pooled, _BackwardOnly(), _BackwardOnly(), _BackwardOnly()


class _BackwardOnly:
    """Stands for embedding_bag's offset2bag, bag_size and max_indices outputs, which only its
    backward uses: using one in the exported graph is an error."""

    def __getattr__(self, name):
        raise TranslationError(
            "embedding_bag's outputs other than the first (offset2bag, bag_size, max_indices: "
            "used by its backward) have no ONNX form; use only the pooled output")


_SEGMENT_IDENTITY = {"sum": 0.0, "mean": 0.0, "prod": 1.0, "max": float("-inf"),
                     "min": float("inf")}
_SEGMENT_REDUCE = {"sum": "ReduceSum", "mean": "ReduceSum", "prod": "ReduceProd",
                   "max": "ReduceMax", "min": "ReduceMin"}
_SEGMENT_COMBINE = {"sum": "Add", "mean": "Add", "prod": "Mul", "max": "Max", "min": "Min"}


@translates("aten::segment_reduce")
def segment_reduce(g, data, reduce, *, lengths=None, indices=None, offsets=None, axis=0,
                   unsafe=False, initial=None):
    """segment_reduce(Tensor data, str reduce, *, Tensor? lengths=None, Tensor? indices=None, Tensor? offsets=None, int axis=0, bool unsafe=False, Scalar? initial=None) -> Tensor

    Segment s covers positions [start_s, end_s) of data along axis (from the lengths' running
    sum, or consecutive offsets). A [..., segments, n] membership mask picks each segment's
    values for a Reduce; the other positions hold the reduction's identity. As torch: initial
    starts every reduction, an empty segment's mean is initial (NaN without), and a NaN in a
    segment makes its max/min NaN."""
    if reduce not in _SEGMENT_REDUCE:
        raise TranslationError(f"segment_reduce with reduce={reduce!r}")
    if indices is not None or (lengths is None) == (offsets is None):
        raise TranslationError("segment_reduce needs exactly one of lengths and offsets "
                               "(indices are not implemented by torch either)")
    dtype = data.dtype
    if dtype not in (ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.DOUBLE,
                     ir.DataType.BFLOAT16):
        raise TranslationError("segment_reduce of a non-floating tensor (torch has it for "
                               "floating types)")
    r = rank(data)
    axis = normalize_axis(axis, r)
    trailing = list(range(axis + 2, r + 1))  # data's axes after `axis`, once unsqueezed
    if lengths is not None:
        lengths = cast(g, lengths, ir.DataType.INT64)
        ends = g.op("CumSum", lengths, g.const(axis))
        starts = g.op("Sub", ends, lengths)
    else:
        offsets = cast(g, offsets, ir.DataType.INT64)
        axes, big = g.const([axis]), g.const([2 ** 62])
        starts = g.op("Slice", offsets, g.const([0]), g.const([-1]), axes)
        ends = g.op("Slice", offsets, g.const([1]), big, axes)
    positions = _arange(g, _length(g, data, axis))  # [n]
    # [..., segments, n]: position p is in segment s when start_s <= p < end_s.
    member = g.op("And", g.op("LessOrEqual", unsqueeze(g, starts, [axis + 1]), positions),
                  g.op("Less", positions, unsqueeze(g, ends, [axis + 1])))
    if trailing:
        member = unsqueeze(g, member, trailing)
    values = unsqueeze(g, data, [axis])  # [..., 1, n, ...]
    identity = g.const(_SEGMENT_IDENTITY[reduce], dtype)
    out = _reduce_axis(g, _SEGMENT_REDUCE[reduce], g.op("Where", member, values, identity),
                       axis + 1)
    start = None if initial is None else g.const(float(initial), dtype)
    if start is not None:
        out = g.op(_SEGMENT_COMBINE[reduce], out, start)
    if reduce == "mean":
        counts = _reduce_axis(g, "ReduceSum", cast(g, member, dtype), axis + 1)
        empty = g.op("Equal", counts, g.const(0.0, dtype))
        mean = g.op("Div", out, g.op("Max", counts, g.const(1.0, dtype)))
        return g.op("Where", empty, start if start is not None else g.const(float("nan"), dtype),
                    mean)
    if reduce in ("max", "min"):
        nan = g.op("And", member, g.op("IsNaN", values))
        has_nan = _reduce_axis(g, "ReduceMax", cast(g, nan, dtype), axis + 1)
        out = g.op("Where", g.op("Greater", has_nan, g.const(0.0, dtype)),
                   g.const(float("nan"), dtype), out)
    return out


def _reduce_axis(g, op_type, x, axis):
    if g.opset >= 18 or op_type == "ReduceSum":
        return g.op(op_type, x, g.const([axis]), keepdims_i=0)
    return g.op(op_type, x, axes_i=[axis], keepdims_i=0)
