"""Ops whose output size comes from the data: bincount, histc, repeat_interleave with tensor
repeats, masked_scatter. Counting is a one-hot comparison against a Range, summed."""

from __future__ import annotations

import onnx_ir as ir

from onnxport.translate.ops._helpers import FLOAT_TYPES, cast, expected_dtype, reduce
from onnxport.translate.registry import translates

_I64 = ir.DataType.INT64


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
    length = g.op("Max", g.op("Add", largest, g.const(1, _I64)), g.const(int(minlength), _I64))
    compute = out if out in FLOAT_TYPES else _I64
    return cast(g, _counts(g, x, length, weights, compute), out)


@translates("aten::histc")
def histc(g, self, bins=100, min=0, max=0):
    """histc(Tensor self, int bins=100, Scalar min=0, Scalar max=0) -> Tensor"""
    x = g.op("Reshape", self, g.const([-1], _I64))
    dtype = x.dtype
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
    return _counts(g, index, g.const(bins, _I64), None, dtype)


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
    below = g.op("LessOrEqual", g.op("Unsqueeze", ends, g.const([0], _I64)),
                 g.op("Unsqueeze", positions, g.const([1], _I64)))
    return g.op("ReduceSum", cast(g, below, _I64), g.const([1], _I64), keepdims_i=0)


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
    picked = g.op("Reshape", g.op("Gather", padded, order, axis_i=0), shape)
    return g.op("Where", mask, picked, self)


@translates("aten::_unique2", "aten::unique_dim", since_opset=11)
def unique(g, self, sorted=True, return_inverse=False, return_counts=False):
    """_unique2(Tensor self, bool sorted=True, bool return_inverse=False, bool return_counts=False) -> (Tensor, Tensor, Tensor)"""
    # torch sorts on the CPU whatever ``sorted`` says; ONNX Unique without an axis flattens.
    x = self
    if self.dtype == ir.DataType.BOOL:
        x = cast(g, self, _I64)  # no bool kernel in ONNX Runtime
    values, _, inverse, counts = g.op("Unique", x, sorted_i=1, outputs=4)
    values.dtype, inverse.dtype, counts.dtype = x.dtype, _I64, _I64
    inverse = g.op("Reshape", inverse, g.op("Shape", self))
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
    inverse = g.op("Reshape", inverse, g.op("Shape", self))
    positions = g.op("Range", g.const(0, _I64), g.op("Squeeze", size), g.const(1, _I64))
    starts = g.op("Compress", positions, starts_run, axis_i=0)
    ends = g.op("Concat", g.op("Slice", starts, g.const([1], _I64), g.const([2**62], _I64)),
                size, axis_i=0)
    counts = g.op("Sub", ends, starts)
    return values, inverse, counts
