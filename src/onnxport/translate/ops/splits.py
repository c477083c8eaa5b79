"""Splitting: split, chunk, tensor_split and split_with_sizes into their pieces, and unbind.

A piece count that depends on a dynamic size is the example's, with a check that fails the
run where torch would make another number; pieces of sizes known at run time are Slices by
the op's own rule (Split's ceil(n / count) is torch's for equal parts only)."""

from __future__ import annotations

import warnings

import onnx_ir as ir

from onnxport.errors import DynamicDimensionFixedWarning, TranslationError
from onnxport.translate.builder import RECORDED_SIZES_DOUBTFUL, SHAPE_AT_THE_EXAMPLE
from onnxport.translate.ops._helpers import (
    as_1d, cast, fail_unless, normalize_axis, rank, result_read, split, squeeze,
)
from onnxport.translate.registry import translates

INT64_MAX = 2**63 - 1


def _split_by_expected(g, self, dim, split_size=None):
    outputs = g.expected
    r = rank(self)
    axis = normalize_axis(dim, r)
    sizes = [g.dim(o.shape[axis]) for o in outputs]
    if len(sizes) == 1:
        if split_size is None or "tensor_split" in g.provenance.aten or \
                isinstance(self.shape[axis], int) or not result_read(g, 0):
            return (self,)  # (unread: the model took the last piece, computed from sizes)
        # One piece at the example's size of a dynamic axis: at larger sizes torch makes more,
        # and the first is part of the axis (x.chunk(2)[0] of one row was every row, at any
        # size). The graph cannot tell which piece the model takes: [-1] was [0] too.
        where = g.provenance.source or "an unknown line"
        warnings.warn(
            f"{g.provenance.aten} at {where}: the example makes one piece of axis {axis}, "
            "which is dynamic; at larger sizes torch makes more, and the ONNX model returns "
            "the first. If the model takes another ([-1]) or goes over every piece (a loop, "
            "a cat of them), export from an example that makes as many pieces as at run "
            "time, or keep that axis static.",
            DynamicDimensionFixedWarning, stacklevel=2)
        piece = _split_by_slices(g, self, axis, 2, split_size)[0]
        # Its recorded shape is the input's (one piece of the example's one row): declared so,
        # a pass took the input's width for the piece's (a mean divided by it). So are the
        # recorded shapes of what is computed from it: doubtful (a later chunk of x.chunk(3)[0]
        # * 2 read the width of x there, through a Shape a pass shared with x's).
        if self.shape is not None:
            piece.shape = ir.Shape([ir.SymbolicDim(None) if a == axis else d
                                    for a, d in enumerate(self.shape)])
            piece.meta[SHAPE_AT_THE_EXAMPLE] = True
        piece.meta[RECORDED_SIZES_DOUBTFUL] = True
        return (piece,)
    if all(isinstance(s, int) for s in sizes):
        return split(g, self, sizes, axis)
    if split_size is not None and "tensor_split" not in g.provenance.aten and \
            not isinstance(self.shape[axis], int) and result_read(g, len(sizes) - 1, -1):
        # (only the last piece differs from torch's when torch makes more pieces at run time)
        self = _count_checked(g, self, axis, len(sizes), split_size)
    if g.opset >= 18 and len(set(map(str, sizes))) == 1 and \
            "tensor_split" not in g.provenance.aten:
        # Equal parts: Split's ceil(n / parts) is then the size of each. (Not tensor_split's
        # parts, equal at the example only: its first n % k are the longer ones, where Split
        # makes the last shorter, 2 + 2 + 0 of 4 where torch makes 2 + 1 + 1.)
        return g.op("Split", self, axis_i=axis, num_outputs_i=len(sizes), outputs=len(sizes))
    if split_size is None:
        raise TranslationError(
            f"{g.provenance.aten} at {g.provenance.source or 'an unknown line'}: a split into "
            f"parts of sizes {sizes} is not translated; give the split sizes as a list "
            "(split_with_sizes)")
    return _split_by_slices(g, self, axis, len(sizes), split_size)


def _count_checked(g, self, axis, count, split_size):
    """``self``, through a check that fails the run at a size of ``axis`` where torch's split
    or chunk would make another number of pieces than ``count``, the example's: the graph has
    that many outputs. Warns at export, naming the line."""
    where = g.provenance.source or "an unknown line"
    warnings.warn(
        f"{g.provenance.aten} at {where}: the number of pieces depends on the size of axis "
        f"{axis}, which is dynamic; the ONNX model returns {count} pieces, as for the example, "
        "and fails at run time at a size where torch makes another number. Split into a "
        "count that does not depend on the size (tensor_split(x, k), split_with_sizes), or "
        "keep that axis static.", DynamicDimensionFixedWarning, stacklevel=2)
    k = as_1d(g, split_size) if isinstance(split_size, ir.Value) else g.const([split_size])

    def same_count(n):
        if "chunk" in g.provenance.aten:  # ceil(n / ceil(n / k)) pieces
            k_size = g.op("Div", g.op("Sub", g.op("Add", n, k), g.const([1])), k)
            k_size = g.op("Max", k_size, g.const([1]))
            pieces = g.op("Div", g.op("Sub", g.op("Add", n, k_size), g.const([1])), k_size)
        else:  # ceil(n / k) pieces, one for an empty axis
            pieces = g.op("Max", g.op("Div", g.op("Sub", g.op("Add", n, k), g.const([1])), k),
                          g.const([1]))
        return g.op("Equal", pieces, g.const([count]))

    return fail_unless(g, self, axis, same_count,
                       f"split_fails_unless_{count}_pieces_at_run_time")


def _split_by_slices(g, self, axis, count, split_size):
    """The ``count`` parts of ``self`` along ``axis`` at sizes known only at run time, from
    the op's own rule: Split's rule (ceil(n / count) each) is torch's only for equal parts,
    and chunk(3) of 3 rows came out as 2 + 1 rows where torch makes 1 + 1 + 1."""
    name = g.provenance.aten
    n = g.op("Slice", g.op("Shape", self), g.const([axis]), g.const([axis + 1]))
    if isinstance(split_size, (list, tuple)):  # tensor_split at indices
        bounds = [as_1d(g, b) if isinstance(b, ir.Value) else g.const([b]) for b in split_size]
        starts, ends = [g.const([0])] + bounds, bounds + [g.const([INT64_MAX])]
    else:
        k = as_1d(g, split_size) if isinstance(split_size, ir.Value) else g.const([split_size])
        if "tensor_split" in name:  # k parts, the first n % k one longer
            base, extra = g.op("Div", n, k), g.op("Mod", n, k)
            starts = [g.op("Add", g.op("Mul", g.const([i]), base),
                           g.op("Min", g.const([i]), extra)) for i in range(count + 1)]
        else:
            if "chunk" in name:  # k chunks of ceil(n / k)
                k = g.op("Div", g.op("Sub", g.op("Add", n, k), g.const([1])), k)
            starts = [g.op("Mul", g.const([i]), k) for i in range(count + 1)]
        starts, ends = starts[:-1], starts[1:-1] + [g.const([INT64_MAX])]
    axes = g.const([axis])
    return tuple(g.op("Slice", self, start, end, axes) for start, end in zip(starts, ends))


@translates("aten::split_with_sizes", "aten::split_with_sizes_copy")
def split_with_sizes(g, self, split_sizes, dim=0):
    """split_with_sizes(Tensor(a -> *) self, SymInt[] split_sizes, int dim=0) -> Tensor(a)[]

    Sizes that are symbols (a level's anchor count in torchvision's RPN, from an image of
    any size) are the ``split`` input of Split as they are computed."""
    if not any(isinstance(size, ir.Value) for size in split_sizes):
        return list(_split_by_expected(g, self, dim))
    if len(split_sizes) == 1:
        return [self]
    sizes = g.op("Concat", *[as_1d(g, size) if isinstance(size, ir.Value) else g.const([size])
                             for size in split_sizes], axis_i=0)
    return list(g.op("Split", self, sizes, axis_i=normalize_axis(dim, rank(self)),
                     outputs=len(split_sizes)))


@translates("aten::split", "aten::chunk", "aten::tensor_split", "aten::split_copy")
def split_(g, self, split_size_or_sections, dim=0):
    """split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]"""
    sections = split_size_or_sections
    if isinstance(sections, ir.Value) and sections.meta.get("symint") is None:
        # tensor_split at the positions held in a 1-d tensor: the sizes are data.
        return _split_at_tensor_indices(g, self, sections, dim)
    if isinstance(sections, (list, tuple)) and "tensor_split" not in g.provenance.aten:
        # split.sizes (scripted x.split([1, n - 1], d)): sizes, some of the run
        return split_with_sizes(g, self, sections, dim)
    return list(_split_by_expected(g, self, dim, sections))


def _split_at_tensor_indices(g, self, indices, dim):
    axis = normalize_axis(dim, rank(self))
    indices = cast(g, indices, ir.DataType.INT64)
    count = len(g.expected)
    axes = g.const([axis])
    pieces = []
    for i in range(count):
        start = g.const([0]) if i == 0 else g.op("Gather", indices, g.const([i - 1]), axis_i=0)
        end = g.op("Gather", indices, g.const([i]), axis_i=0) if i < count - 1 else \
            g.const([INT64_MAX])
        pieces.append(g.op("Slice", self, start, end, axes))
    return pieces


@translates("aten::unbind", "aten::unbind_copy")
def unbind(g, self, dim=0):
    """unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]"""
    axis = normalize_axis(dim, rank(self))
    count = len(g.expected)
    if not isinstance(self.shape[axis], int):
        warnings.warn(
            f"{g.provenance.aten} at {g.provenance.source or 'an unknown line'}: unbinding "
            f"axis {axis}, which is dynamic, into {count} tensors, as for the example; the "
            "ONNX model fails at run time at any other size of that axis. Keep that axis "
            "static, or index it instead.", DynamicDimensionFixedWarning, stacklevel=2)
        self = fail_unless(g, self, axis, lambda n: g.op("Equal", n, g.const([count])),
                           f"unbind_fails_unless_{count}_at_run_time")
    parts = split(g, self, [1] * count, axis) if count > 1 else (self,)
    return [squeeze(g, p, [axis]) for p in parts]
