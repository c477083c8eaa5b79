"""Ops whose output size comes from the data: bincount, histc, repeat_interleave with tensor
repeats, masked_scatter. Counting is a one-hot comparison against a Range, summed."""

from __future__ import annotations

import onnx_ir as ir

from onnxport.translate.ops._helpers import (FLOAT_TYPES, as_tensor, cast, count_at_or_below,
                                             expected_dtype, reshape_to_sizes)
from onnxport.translate.registry import translates

_I64 = ir.DataType.INT64
_DOUBLE = ir.DataType.DOUBLE


def _counts(g, bins: ir.Value, length: ir.Value, weights: ir.Value | None, dtype) -> ir.Value:
    """counts[k] = number (or weight sum) of the 1-D ``bins`` equal to k, for k < length."""
    positions = g.op("Range", g.const(0, _I64), length, g.const(1, _I64))
    hits = g.op("Equal", g.op("Unsqueeze", bins, g.const([1], _I64)),
                g.op("Unsqueeze", positions, g.const([0], _I64)))
    hits = cast(g, hits, dtype)
    if weights is not None:
        hits = g.op("Mul", hits, g.op("Unsqueeze", cast(g, weights, dtype), g.const([1], _I64)))
    # A float sum over an empty input is 0 in ONNX too; ReduceSum keeps the length axis.
    return g.op("ReduceSum", hits, g.const([0], _I64), keepdims_i=0)


@translates("aten::bincount")
def bincount(g, self, weights=None, minlength=0):
    """bincount(Tensor self, Tensor? weights=None, SymInt minlength=0) -> Tensor"""
    out = expected_dtype(g) or _I64
    x = cast(g, self, _I64)
    # max(self) + 1, or 0 for an empty input (ReduceMax of nothing is the lowest int64).
    largest = g.op("ReduceMax", g.op("Concat", g.const([-1], _I64), x, axis_i=0), keepdims_i=0)
    least = as_tensor(g, minlength, dtype=_I64) if isinstance(minlength, ir.Value) else \
        g.const(int(minlength), _I64)  # (a run's value: a dynamic size)
    length = g.op("Max", g.op("Add", largest, g.const(1, _I64)), least)
    compute = out if out in FLOAT_TYPES else _I64
    return cast(g, _counts(g, x, length, weights, compute), out)


@translates("aten::histc")
def histc(g, self, bins=100, min=0, max=0):
    """histc(Tensor self, int bins=100, Scalar min=0, Scalar max=0) -> Tensor"""
    x = g.op("Reshape", self, g.const([-1], _I64))
    counts_dtype = dtype = self.dtype
    if dtype not in FLOAT_TYPES:
        # Integers (CUDA's histc takes them; transformers' experts count their rows so):
        # the bins are found in double, exact for them; the counts keep the input's dtype.
        x, dtype = cast(g, x, _DOUBLE), _DOUBLE
    low, high = g.const(float(min), dtype), g.const(float(max), dtype)
    if min == max:
        # torch takes the data's range then, and widens an empty one by 1 on each side.
        low, high = g.op("ReduceMin", x, keepdims_i=0), g.op("ReduceMax", x, keepdims_i=0)
        flat = g.op("Equal", low, high)
        one = g.const(1.0, dtype)
        low = g.op("Where", flat, g.op("Sub", low, one), low)
        high = g.op("Where", flat, g.op("Add", high, one), high)
    # torch: bin = (x - min) * bins / (max - min), x == max in the last bin, out of range
    # (and NaN) not counted.
    position = g.op("Div", g.op("Mul", g.op("Sub", x, low), g.const(float(bins), dtype)),
                    g.op("Sub", high, low))
    index = g.op("Cast", g.op("Floor", position), to_i=int(_I64))
    index = g.op("Min", index, g.const(bins - 1, _I64))
    inside = g.op("And", g.op("GreaterOrEqual", x, low), g.op("LessOrEqual", x, high))
    index = g.op("Where", inside, index, g.const(-1, _I64))
    return _counts(g, index, g.const(bins, _I64), None, counts_dtype)


@translates("aten::repeat_interleave.Tensor")
def repeat_interleave_tensor(g, repeats, *, output_size=None):
    """repeat_interleave.Tensor(Tensor repeats, *, SymInt? output_size=None) -> Tensor"""
    # Output position p takes index i where ends[i-1] <= p < ends[i]: the number of ends
    # at or below p.
    repeats = cast(g, g.op("Reshape", repeats, g.const([-1], _I64)), _I64)
    ends = g.op("CumSum", repeats, g.const(0, _I64))
    total = g.op("ReduceSum", g.op("Concat", g.const([0], _I64), repeats, axis_i=0),
                 keepdims_i=0)
    positions = g.op("Range", g.const(0, _I64), total, g.const(1, _I64))
    return count_at_or_below(g, ends, positions)


@translates("aten::masked_scatter")
def masked_scatter(g, self, mask, source):
    """masked_scatter(Tensor self, Tensor mask, Tensor source) -> Tensor"""
    # The k-th true element of the (broadcast) mask takes source's k-th element.
    # self and mask broadcast together: the output has their common shape.
    # (Expand broadcasts both ways.)
    mask = cast(g, mask, ir.DataType.BOOL)
    self = g.op("Expand", self, g.op("Shape", mask))
    shape = g.op("Shape", self)
    mask = g.op("Expand", mask, shape)
    flat_mask = g.op("Reshape", mask, g.const([-1], _I64))
    order = g.op("Sub", g.op("CumSum", cast(g, flat_mask, _I64), g.const(0, _I64)),
                 g.const(1, _I64))
    order = g.op("Max", order, g.const(0, _I64))
    flat_source = g.op("Reshape", source, g.const([-1], _I64))
    # A source with no element can only go with an all-false mask: gather from a padded one.
    padded = g.op("Concat", flat_source, cast(g, g.const([0], _I64), self.dtype), axis_i=0)
    picked = reshape_to_sizes(g, g.op("Gather", padded, order, axis_i=0), shape)
    return g.op("Where", mask, picked, self)


@translates("aten::_unique2", since_opset=11)
def unique(g, self, sorted=True, return_inverse=False, return_counts=False):
    """_unique2(Tensor self, bool sorted=True, bool return_inverse=False, bool return_counts=False) -> (Tensor, Tensor, Tensor)"""
    # torch sorts on the CPU whatever ``sorted`` says; ONNX Unique without an axis flattens.
    x = self
    if self.dtype == ir.DataType.BOOL:
        x = cast(g, self, _I64)  # no bool kernel in ONNX Runtime
    values, _, inverse, counts = g.op("Unique", x, sorted_i=1, outputs=4)
    values.dtype, inverse.dtype, counts.dtype = x.dtype, _I64, _I64
    inverse = reshape_to_sizes(g, inverse, g.op("Shape", self))
    return cast(g, values, self.dtype), inverse, counts


@translates("aten::unique_dim", since_opset=11)
def unique_dim(g, self, dim, sorted=True, return_inverse=False, return_counts=False):
    """unique_dim(Tensor self, int dim, bool sorted=True, bool return_inverse=False, bool return_counts=False) -> (Tensor, Tensor, Tensor)"""
    # The subtensors along dim, sorted as torch sorts them (lexicographically), whatever
    # ``sorted`` says; the inverse and counts are 1-D along dim.
    x = cast(g, self, _I64) if self.dtype == ir.DataType.BOOL else self
    axis = dim % len(self.shape) if self.shape is not None else dim
    values, _, inverse, counts = g.op("Unique", x, axis_i=axis, sorted_i=1, outputs=4)
    values.dtype, inverse.dtype, counts.dtype = x.dtype, _I64, _I64
    return cast(g, values, self.dtype), inverse, counts


@translates("aten::unique_consecutive")
def unique_consecutive(g, self, return_inverse=False, return_counts=False, dim=None):
    """unique_consecutive(Tensor self, bool return_inverse=False, bool return_counts=False, int? dim=None) -> (Tensor, Tensor, Tensor)"""
    if dim is not None:
        from onnxport.errors import TranslationError

        raise TranslationError("aten::unique_consecutive with dim has no translation yet; "
                               "call it without dim (on the flattened tensor)")
    flat = g.op("Reshape", self, g.const([-1], _I64))
    # An element starts a run when it differs from the one before it.
    previous = g.op("Slice", flat, g.const([0], _I64), g.const([-1], _I64))
    following = g.op("Slice", flat, g.const([1], _I64), g.const([2**62], _I64))
    differs = g.op("Not", g.op("Equal", following, previous))
    size = g.op("Shape", flat)
    first = g.op("Expand", g.const([True]), g.op("Min", size, g.const([1], _I64)))
    starts_run = g.op("Concat", first, differs, axis_i=0)
    values = g.op("Compress", flat, starts_run, axis_i=0)
    inverse = g.op("Sub", g.op("CumSum", cast(g, starts_run, _I64), g.const(0, _I64)),
                   g.const(1, _I64))
    inverse = reshape_to_sizes(g, inverse, g.op("Shape", self))
    positions = g.op("Range", g.const(0, _I64), g.op("Squeeze", size), g.const(1, _I64))
    starts = g.op("Compress", positions, starts_run, axis_i=0)
    ends = g.op("Concat", g.op("Slice", starts, g.const([1], _I64), g.const([2**62], _I64)),
                size, axis_i=0)
    counts = g.op("Sub", ends, starts)
    return values, inverse, counts


# -- histogram, histogramdd ----------------------------------------------------------------------
def _outer_edges(g, column, range_, dtype):
    """The first and last bin edges (0-d): the given range or the data's, an empty one widened
    by 0.5 on each side as torch (and NumPy) do."""
    if range_ is not None:
        low, high = g.const(float(range_[0]), dtype), g.const(float(range_[1]), dtype)
    else:
        low = g.op("ReduceMin", column, keepdims_i=0)
        high = g.op("ReduceMax", column, keepdims_i=0)
    flat = g.op("Equal", low, high)
    half = g.const(0.5, dtype)
    return (g.op("Where", flat, g.op("Sub", low, half), low),
            g.op("Where", flat, g.op("Add", high, half), high))


def _linspace(g, low, high, bins: int, dtype):
    """torch's linspace of bins + 1 edges, in its arithmetic: the step in the dtype, then from
    the start up to the middle and from the end after it, each edge one fused multiply-add
    (one rounding: the float32 product is exact in float64). Values on an edge fall in the bin
    torch's edge puts them in only with torch's very edges."""
    steps = bins + 1
    step = g.op("Div", g.op("Sub", high, low), g.const(float(bins), dtype))
    wide = ir.DataType.DOUBLE if dtype == ir.DataType.FLOAT else dtype
    low, high, step = (cast(g, v, wide) for v in (low, high, step))
    index = g.const([float(i) for i in range(steps)], wide)
    from_end = g.const([float(steps - i - 1) for i in range(steps)], wide)
    lower = g.op("Add", low, g.op("Mul", step, index))
    upper = g.op("Sub", high, g.op("Mul", step, from_end))
    first_half = g.const([i < steps // 2 for i in range(steps)], ir.DataType.BOOL)
    return cast(g, g.op("Where", first_half, lower, upper), dtype)


def _bin_of(g, column, edges):
    """Each value's bin among the 1-D ``edges`` (int64): the number of edges at or below it,
    less one, the last edge in the last bin; -1 outside the edges (and for NaN)."""
    index = g.op("Sub", count_at_or_below(g, edges, column), g.const(1, _I64))
    last = g.op("Sub", g.op("Size", edges), g.const(2, _I64))
    first_edge = g.op("Gather", edges, g.const(0, _I64), axis_i=0)
    last_edge = g.op("Gather", edges, g.const(-1, _I64), axis_i=0)
    inside = g.op("And", g.op("GreaterOrEqual", column, first_edge),
                  g.op("LessOrEqual", column, last_edge))
    return g.op("Where", inside, g.op("Min", index, last), g.const(-1, _I64))


def _histogram_dd(g, self, edges, weight, density):
    """The counts (or weight sums) of the rows of self [n, d] in the bins of ``edges`` (one
    1-D edges value per column), shaped [bins_0, ..., bins_d-1]."""
    dtype = self.dtype
    x = g.op("Reshape", self, g.const([-1, len(edges)], _I64))
    flat, stride_total = None, None
    sizes = []
    for d, column_edges in reversed(list(enumerate(edges))):
        column = g.op("Gather", x, g.const(d, _I64), axis_i=1)
        index = _bin_of(g, column, column_edges)
        size = g.op("Sub", g.op("Size", column_edges), g.const(1, _I64))
        sizes.insert(0, g.op("Unsqueeze", size, g.const([0], _I64)))
        outside = g.op("Less", index, g.const(0, _I64))
        if flat is None:
            flat, stride_total, missing = index, size, outside
        else:
            flat = g.op("Add", flat, g.op("Mul", index, stride_total))
            stride_total = g.op("Mul", stride_total, size)
            missing = g.op("Or", missing, outside)
    flat = g.op("Where", missing, g.const(-1, _I64), flat)
    weights = None if weight is None else g.op("Reshape", weight, g.const([-1], _I64))
    hist = _counts(g, flat, stride_total, weights, dtype)
    hist = reshape_to_sizes(g, hist, g.op("Concat", *sizes, axis_i=0))
    if density:
        # torch: hist / (its total * the bin's volume).
        hist = g.op("Div", hist, g.op("ReduceSum", hist, keepdims_i=0))
        for d, column_edges in enumerate(edges):
            widths = g.op("Sub", g.op("Slice", column_edges, g.const([1], _I64),
                                      g.const([2 ** 62], _I64)),
                          g.op("Slice", column_edges, g.const([0], _I64), g.const([-1], _I64)))
            shape = [1] * len(edges)
            shape[d] = -1
            hist = g.op("Div", hist, g.op("Reshape", widths, g.const(shape, _I64)))
    return hist


def _edges_from_counts(g, self, bins, range_):
    x = g.op("Reshape", self, g.const([-1, len(bins)], _I64))
    edges = []
    for d, count in enumerate(bins):
        column = g.op("Gather", x, g.const(d, _I64), axis_i=1)
        pair = None if range_ is None else range_[2 * d:2 * d + 2]
        low, high = _outer_edges(g, column, pair, self.dtype)
        edges.append(_linspace(g, low, high, int(count), self.dtype))
    return edges


@translates("aten::histogram.bin_ct")
def histogram_bin_ct(g, self, bins=100, *, range=None, weight=None, density=False):
    """histogram.bin_ct(Tensor self, int bins=100, *, float[]? range=None, Tensor? weight=None, bool density=False) -> (Tensor hist, Tensor bin_edges)"""
    edges = _edges_from_counts(g, g.op("Reshape", self, g.const([-1, 1], _I64)), [bins], range)
    return _histogram_dd(g, self, edges, weight, density), edges[0]


@translates("aten::histogram.bins_tensor")
def histogram_bins_tensor(g, self, bins, *, weight=None, density=False):
    """histogram.bins_tensor(Tensor self, Tensor bins, *, Tensor? weight=None, bool density=False) -> (Tensor hist, Tensor bin_edges)"""
    edges = cast(g, bins, self.dtype)
    return _histogram_dd(g, self, [edges], weight, density), bins


@translates("aten::_histogramdd_bin_edges")
def histogramdd_bin_edges(g, self, bins, *, range=None, weight=None, density=False):
    """_histogramdd_bin_edges(Tensor self, int[] bins, *, float[]? range=None, Tensor? weight=None, bool density=False) -> Tensor[]"""
    return _edges_from_counts(g, self, bins, range)


@translates("aten::_histogramdd_from_bin_cts")
def histogramdd_from_bin_cts(g, self, bins, *, range=None, weight=None, density=False):
    """_histogramdd_from_bin_cts(Tensor self, int[] bins, *, float[]? range=None, Tensor? weight=None, bool density=False) -> Tensor"""
    return _histogram_dd(g, self, _edges_from_counts(g, self, bins, range), weight, density)


@translates("aten::_histogramdd_from_bin_tensors")
def histogramdd_from_bin_tensors(g, self, bins, *, weight=None, density=False):
    """_histogramdd_from_bin_tensors(Tensor self, Tensor[] bins, *, Tensor? weight=None, bool density=False) -> Tensor"""
    return _histogram_dd(g, self, [cast(g, b, self.dtype) for b in bins], weight, density)
