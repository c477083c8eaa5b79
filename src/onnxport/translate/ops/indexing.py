"""Indexing: embedding, gather, index (advanced indexing), index_select, scatter."""

from __future__ import annotations

import onnx_ir as ir

from onnxport.translate.ops._helpers import as_tensor, cast, normalize_axis, rank
from onnxport.translate.registry import translates


@translates("aten::embedding")
def embedding(g, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, bool sparse=False) -> Tensor"""
    return g.op("Gather", weight, indices, axis_i=0)


@translates("aten::index_select")
def index_select(g, self, dim, index):
    """index_select(Tensor self, int dim, Tensor index) -> Tensor"""
    if rank(self) == 0:
        # torch indexes a 0-d tensor as if it were 1-d of one element and keeps it 0-d.
        return g.op("Identity", self)
    return g.op("Gather", self, index, axis_i=normalize_axis(dim, rank(self)))


@translates("aten::gather")
def gather(g, self, dim, index, *, sparse_grad=False):
    """gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor"""
    # ONNX takes int32/int64 indices only; torch also accepts other integer types.
    index = cast(g, index, ir.DataType.INT64)
    if rank(self) == 0:
        # Every index into a 0-d tensor is 0: the value, in the index's shape.
        return g.op("Expand", self, g.op("Shape", index))
    return g.op("GatherElements", self, index, axis_i=normalize_axis(dim, rank(self)))


@translates("aten::index", "aten::_unsafe_index")
def index(g, self, indices):
    """index.Tensor(Tensor self, Tensor?[] indices) -> Tensor"""
    positions = [i for i, idx in enumerate(indices) if idx is not None]
    if not positions:
        return self
    if len(positions) == 1:
        k = positions[0]
        idx = indices[k]
        if idx.dtype == ir.DataType.BOOL:
            return _index_by_mask(g, self, idx, k)
        return g.op("Gather", self, cast(g, idx, ir.DataType.INT64), axis_i=k)
    if positions != list(range(positions[0], positions[0] + len(positions))):
        raise NotImplementedError("indexing with non-adjacent index tensors")
    if any(indices[k].dtype == ir.DataType.BOOL for k in positions):
        raise NotImplementedError("indexing with several boolean masks")
    # Adjacent integer indices: broadcast them, stack on a last axis and GatherND on the
    # indexed axes brought to the front.
    r = rank(self)
    first = positions[0]
    x = self
    if first > 0:
        perm = positions + [i for i in range(r) if i not in positions]
        x = g.op("Transpose", self, perm_i=perm)
    idx_values = [cast(g, indices[k], ir.DataType.INT64) for k in positions]
    shape = None
    for value in idx_values:
        s = g.op("Shape", value)
        shape = s if shape is None else _broadcast_shape(g, shape, s)
    expanded = [g.op("Unsqueeze", g.op("Expand", v, shape), g.const([-1])) for v in idx_values]
    stacked = g.op("Concat", *expanded, axis_i=-1)
    result = g.op("GatherND", x, stacked)
    if first > 0:
        idx_rank = len(g.expected.shape) - (r - len(positions))
        out_rank = len(g.expected.shape)
        perm = list(range(idx_rank, idx_rank + first)) + list(range(idx_rank)) + \
            list(range(idx_rank + first, out_rank))
        result = g.op("Transpose", result, perm_i=perm)
    return result


def _broadcast_shape(g, a, b):
    ones_a = g.op("Expand", g.op("ConstantOfShape", a), b)
    return g.op("Shape", ones_a)


def _index_by_mask(g, self, mask, k):
    if k != 0:
        raise NotImplementedError("boolean mask indexing after the first axis")
    coordinates = g.op("Transpose", g.op("NonZero", mask), perm_i=[1, 0])
    return g.op("GatherND", self, coordinates)


@translates("aten::index_put", "aten::index_put_", "aten::_unsafe_index_put")
def index_put(g, self, indices, values, accumulate=False):
    """index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor"""
    positions = [i for i, idx in enumerate(indices) if idx is not None]
    if len(positions) == 1 and positions[0] == 0 and indices[0].dtype == ir.DataType.BOOL:
        mask = indices[0]
        r_mask, r_self = rank(mask), rank(self)
        if r_mask < r_self:
            mask = g.op("Unsqueeze", mask, g.const(list(range(r_mask, r_self))))
        fill = cast(g, values, self.dtype)
        return g.op("Where", mask, fill, self)
    if len(positions) != 1 or positions[0] != 0:
        raise NotImplementedError("index_put with indices other than one tensor on the first axis")
    idx = g.op("Unsqueeze", cast(g, indices[0], ir.DataType.INT64), g.const([-1]))
    expected_shape = g.op("Concat", g.op("Shape", indices[0]),
                          g.op("Shape", self, start_i=1) if g.opset >= 15 else
                          g.op("Slice", g.op("Shape", self), g.const([1]), g.const([2**62])),
                          axis_i=0)
    updates = g.op("Expand", cast(g, values, self.dtype), expected_shape)
    return g.op("ScatterND", self, idx, updates, reduction_s="add" if accumulate else None)


@translates("aten::scatter", "aten::scatter_")
def scatter(g, self, dim, index, src, *, reduce=None):
    """scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor"""
    if not isinstance(src, ir.Value):
        src = g.op("Expand", as_tensor(g, src, self), g.op("Shape", index))
    kwargs = {"reduction_s": {"add": "add", "multiply": "mul"}[reduce]} if reduce else {}
    return g.op("ScatterElements", self, index, cast(g, src, self.dtype),
                axis_i=normalize_axis(dim, rank(self)), **kwargs)


@translates("aten::scatter_add", "aten::scatter_add_")
def scatter_add(g, self, dim, index, src):
    """scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor"""
    return g.op("ScatterElements", self, index, src, axis_i=normalize_axis(dim, rank(self)),
                reduction_s="add")


def _axis_indices(g, src, axis, start, step, r=None):
    """int64 indices start, start+step, ... along ``axis``, broadcast to ``src``'s shape
    (``r``: its rank, when ``src`` is a fresh value whose shape is not recorded)."""
    r = rank(src) if r is None else r
    count = g.op("Shape", src, start_i=axis, end_i=axis + 1) if g.opset >= 15 else \
        g.op("Gather", g.op("Shape", src), g.const([axis]), axis_i=0)
    first = as_tensor(g, start, dtype=ir.DataType.INT64)
    step_value = g.const(step, ir.DataType.INT64)
    end = g.op("Add", first, g.op("Mul", g.op("Squeeze", count), step_value))
    positions = g.op("Range", first, end, step_value)
    shape = [1] * r
    shape[axis] = -1
    positions = g.op("Reshape", positions, g.const(shape))
    return g.op("Expand", positions, g.op("Shape", src))


@translates("aten::slice_scatter")
def slice_scatter(g, self, src, dim=0, start=None, end=None, step=1):
    """slice_scatter(Tensor self, Tensor src, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor"""
    r = rank(self)
    axis = normalize_axis(dim, r)
    start = 0 if start is None else start
    size = self.shape[axis]
    if isinstance(start, int) and start < 0 and isinstance(size, int):
        start += size
    if src.shape is not None and self.shape is not None and list(src.shape) == list(self.shape) \
            and start == 0 and step == 1:
        return cast(g, src, self.dtype)
    indices = _axis_indices(g, src, axis, start, step)
    return g.op("ScatterElements", self, indices, cast(g, src, self.dtype), axis_i=axis)


@translates("aten::select_scatter")
def select_scatter(g, self, src, dim, index):
    """select_scatter(Tensor self, Tensor src, int dim, SymInt index) -> Tensor"""
    r = rank(self)
    axis = normalize_axis(dim, r)
    size = self.shape[axis]
    if isinstance(index, int) and index < 0 and isinstance(size, int):
        index += size
    src = g.op("Unsqueeze", cast(g, src, self.dtype), g.const([axis]))
    indices = _axis_indices(g, src, axis, index, 1, r)
    return g.op("ScatterElements", self, indices, src, axis_i=axis)


@translates("aten::copy", "aten::copy_")
def copy(g, self, src, non_blocking=False):
    """copy(Tensor self, Tensor src, bool non_blocking=False) -> Tensor"""
    value = cast(g, src, self.dtype)
    if src.shape is not None and self.shape is not None and list(src.shape) == list(self.shape):
        return value
    return g.op("Expand", value, g.op("Shape", self))
