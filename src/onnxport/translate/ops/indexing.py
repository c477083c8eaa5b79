"""Indexing: embedding, gather, index (advanced indexing), index_select, scatter, and the
selections whose size is data (nonzero, masked_select)."""

from __future__ import annotations

import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import to_torch_dtype

from onnxport.errors import TranslationError
from onnxport.translate.ops._helpers import (
    FLOAT_TYPES, as_tensor, cast, normalize_axis, rank, reduce, reshape_to_sizes,
)
from onnxport.translate.registry import translates


@translates("aten::embedding")
def embedding(g, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, bool sparse=False) -> Tensor"""
    return g.op("Gather", weight, indices, axis_i=0)


@translates("aten::embedding_renorm", "aten::embedding_renorm_")
def embedding_renorm(g, self, indices, max_norm, norm_type):
    """embedding_renorm(Tensor self, Tensor indices, float max_norm, float norm_type) -> Tensor

    F.embedding(max_norm=...) rescales, in place, the rows it looks up whose norm exceeds
    max_norm to max_norm / (norm + 1e-7); torch.export functionalizes the write."""
    if norm_type == 2:
        norms = reduce(g, "ReduceL2", self, [1], True)
    elif norm_type == 1:
        norms = reduce(g, "ReduceL1", self, [1], True)
    else:
        p = g.const(float(norm_type), self.dtype)
        norms = g.op("Pow", reduce(g, "ReduceSum", g.op("Pow", g.op("Abs", self), p), [1], True),
                     g.const(1.0 / norm_type, self.dtype))
    limit = g.const(float(max_norm), self.dtype)
    scale = g.op("Div", limit, g.op("Add", norms, g.const(1e-7, self.dtype)))
    # Only the rows looked up are rescaled: mark them (repeated indices write the same 1).
    flat = g.op("Reshape", cast(g, indices, ir.DataType.INT64), g.const([-1]))
    rows = g.op("Gather", g.op("Shape", self), g.const([0]), axis_i=0)
    marks = g.op("ScatterElements", g.op("ConstantOfShape", rows), flat,
                 g.op("Expand", g.const([1.0]), g.op("Shape", flat)), axis_i=0)
    looked_up = g.op("Unsqueeze", cast(g, marks, ir.DataType.BOOL), g.const([1]))
    too_long = g.op("And", looked_up, g.op("Greater", norms, limit))
    return g.op("Where", too_long, g.op("Mul", self, scale), self)


@translates("aten::index_select")
def index_select(g, self, dim, index):
    """index_select(Tensor self, int dim, Tensor index) -> Tensor"""
    if rank(self) == 0:
        # torch indexes a 0-d tensor as if it were 1-d of one element and keeps it 0-d.
        return g.op("Identity", self)
    if g.rank(index) == 0:
        # A 0-d index picks one entry and keeps the axis (torch reads it as [index]); Gather
        # would drop the axis.
        index = g.op("Reshape", index, g.const([1]))
    return g.op("Gather", self, index, axis_i=normalize_axis(dim, rank(self)))


@translates("aten::gather")
def gather(g, self, dim, index, *, sparse_grad=False):
    """gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor"""
    # ONNX takes int32/int64 indices only; torch also accepts other integer types.
    index_shape = g.static_shape(index)
    index = cast(g, index, ir.DataType.INT64)
    if index_shape is not None and 0 in index_shape:
        # An empty index (which torch lets have another rank) gathers an empty tensor.
        return g.const(torch.zeros(index_shape, dtype=to_torch_dtype(self.dtype)))
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
    if any(indices[k].dtype == ir.DataType.BOOL for k in positions):
        raise NotImplementedError("indexing with a boolean mask beside other indices")
    # Integer indices: broadcast them, stack on a last axis and GatherND on the indexed axes
    # brought to the front. torch puts the index dims where the indexed axes were when those
    # are adjacent, and first (as GatherND does) when they are not.
    adjacent = positions == list(range(positions[0], positions[0] + len(positions)))
    r = rank(self)
    first = positions[0] if adjacent else 0
    x = self
    if positions != list(range(len(positions))):
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
    """self[..., mask, ...] with the mask over axes k.. : GatherND at the mask's coordinates
    on those axes brought to the front, the selected axis then moved back to k."""
    r, r_mask = rank(self), rank(mask)
    coordinates = g.op("Transpose", g.op("NonZero", mask), perm_i=[1, 0])
    if k == 0:
        return g.op("GatherND", self, coordinates)
    masked = list(range(k, k + r_mask))
    x = g.op("Transpose", self, perm_i=masked + [i for i in range(r) if i not in masked])
    selected = g.op("GatherND", x, coordinates)
    out_rank = r - r_mask + 1
    return g.op("Transpose", selected,
                perm_i=list(range(1, k + 1)) + [0] + list(range(k + 1, out_rank)))


@translates("aten::index_put", "aten::index_put_", "aten::_unsafe_index_put")
def index_put(g, self, indices, values, accumulate=False):
    """index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor"""
    positions = [i for i, idx in enumerate(indices) if idx is not None]
    r = rank(self)
    values = cast(g, values, self.dtype)
    if any(indices[k].dtype == ir.DataType.BOOL for k in positions):
        if positions != [0]:
            raise NotImplementedError("index_put with a boolean mask after the first axis or "
                                      "beside other indices")
        return _put_by_mask(g, self, indices[0], values, accumulate)
    # Integer indices: bring the indexed axes to the front, ScatterND there, and back.
    perm = positions + [i for i in range(r) if i not in positions]
    x = self if perm == list(range(r)) else g.op("Transpose", self, perm_i=perm)
    idx_values = [_nonnegative(g, cast(g, indices[k], ir.DataType.INT64), self, k)
                  for k in positions]
    idx_shape = None
    for value in idx_values:
        shape = g.op("Shape", value)
        idx_shape = shape if idx_shape is None else _broadcast_shape(g, idx_shape, shape)
    s = max(rank(indices[k]) for k in positions)
    coordinates = g.op("Concat", *[g.op("Unsqueeze", g.op("Expand", v, idx_shape), g.const([-1]))
                                   for v in idx_values], axis_i=-1)
    # What self[indices] looks like in torch: the index dims replace the indexed axes when
    # those are adjacent, else they come first.
    adjacent = positions == list(range(positions[0], positions[0] + len(positions)))
    first = positions[0] if adjacent else 0
    rest = [i for i in range(r) if i not in positions]
    before, after = [i for i in rest if i < first], [i for i in rest if i >= first]
    parts = [_dims(g, self, before)] if before else []
    parts.append(idx_shape)
    if after:
        parts.append(_dims(g, self, after))
    selected_shape = parts[0] if len(parts) == 1 else g.op("Concat", *parts, axis_i=0)
    updates = g.op("Expand", values, selected_shape)
    if before:  # [before..., S..., after...] -> [S..., before..., after...]
        n_before = len(before)
        order = list(range(n_before, n_before + s)) + list(range(n_before)) + \
            list(range(n_before + s, n_before + s + len(after)))
        updates = g.op("Transpose", updates, perm_i=order)
    if accumulate:
        out = _scatter_nd_add(g, x, coordinates, updates, len(positions))
    else:
        out = g.op("ScatterND", x, coordinates, updates)
    if x is self:
        return out
    inverse = [perm.index(i) for i in range(r)]
    return g.op("Transpose", out, perm_i=inverse)


def _dims(g, x, axes):
    """The sizes of ``x`` along ``axes`` (ascending), as a 1-D int64 value."""
    return g.op("Gather", g.op("Shape", x), g.const(list(axes)), axis_i=0)


def _nonnegative(g, index, x, axis):
    """torch counts negative indices from the end; ScatterND wants them in range."""
    size = g.op("Gather", g.op("Shape", x), g.const(axis), axis_i=0)
    return g.op("Where", g.op("Less", index, g.const(0, ir.DataType.INT64)),
                g.op("Add", index, size), index)


def _scatter_nd_add(g, x, coordinates, updates, depth):
    """ScatterND with reduction 'add', as torch accumulates repeated indices. Not ScatterND's
    own: ONNX Runtime (1.30 to 1.32) adds the rows of repeated indices in threads that race,
    and dropped some of the sums (im2col's fold, timm's volo, differed by 3e-3 in one run of
    four). From opset 16, ScatterElements adds them, on a [rows, rest] view; before, a
    one-hot MatMul sums the updates into each target row."""
    shape = g.op("Shape", x)
    lead = g.op("Slice", shape, g.const([0]), g.const([depth]))
    rows = _flat_rows(g, shape, coordinates, depth)
    count = reduce(g, "ReduceProd", lead, None, True)
    if g.opset >= 16:
        rest = g.op("Slice", shape, g.const([depth]), g.const([2**62]))
        width = reduce(g, "ReduceProd", g.op("Concat", g.const([1]), rest, axis_i=0), None,
                       True)
        table = reshape_to_sizes(g, x, g.op("Concat", count, width, axis_i=0))
        flat_updates = reshape_to_sizes(g, cast(g, updates, x.dtype),
                                        g.op("Concat", g.op("Shape", rows), width, axis_i=0))
        index = g.op("Expand", g.op("Unsqueeze", rows, g.const([1])), g.op("Shape", flat_updates))
        added = g.op("ScatterElements", table, index, flat_updates, axis_i=0,
                     reduction_s="add")
        return reshape_to_sizes(g, added, shape)
    positions = g.op("Range", g.const(0, ir.DataType.INT64), g.op("Squeeze", count, g.const([0])),
                     g.const(1, ir.DataType.INT64))
    # MatMul takes floats, int32 and int64: other dtypes sum in int64 (bools too, as torch's
    # sum of bools is their "or").
    compute = x.dtype if x.dtype in (*FLOAT_TYPES, ir.DataType.INT32, ir.DataType.INT64) \
        else ir.DataType.INT64
    one_hot = g.op("Cast", g.op("Equal", g.op("Unsqueeze", positions, g.const([1])),
                                g.op("Unsqueeze", rows, g.const([0]))), to_i=int(compute))
    flat_updates = g.op("Reshape", cast(g, updates, compute),
                        g.op("Concat", g.op("Shape", rows), g.const([-1]), axis_i=0))
    added = reshape_to_sizes(g, g.op("MatMul", one_hot, flat_updates), shape)
    if x.dtype == ir.DataType.BOOL:
        return g.op("Or", x, cast(g, added, ir.DataType.BOOL))
    return g.op("Add", x, cast(g, added, x.dtype))


def _flat_rows(g, shape, coordinates, depth):
    """The row number of each coordinate over the first ``depth`` axes of ``shape``, flat."""
    strides = []
    for k in range(depth):
        stride = reduce(g, "ReduceProd", g.op("Slice", shape, g.const([k + 1]), g.const([depth])),
                        None, True) if k + 1 < depth else g.const([1])
        strides.append(stride)
    flat_coordinates = g.op("Reshape", coordinates, g.const([-1, depth]))
    return g.op("ReduceSum", g.op("Mul", flat_coordinates, g.op("Concat", *strides, axis_i=0)),
                g.const([1]), keepdims_i=0)


def _put_by_mask(g, self, mask, values, accumulate):
    r_mask, r_self = rank(mask), rank(self)
    if values.shape is not None and len(values.shape) <= r_self - r_mask:
        # Values that broadcast over the masked positions: a Where.
        expanded = mask if r_mask == r_self else g.op(
            "Unsqueeze", mask, g.const(list(range(r_mask, r_self))))
        # (torch's sum of bools is their "or"; Add takes no bools, nor uint8 before opset 14.)
        add = "Or" if self.dtype == ir.DataType.BOOL else "Add"
        fill = g.op(add, self, values) if accumulate else values
        return g.op("Where", expanded, fill, self)
    # One value per masked position (x[mask] = tensor): scatter at the mask's coordinates.
    coordinates = g.op("Transpose", g.op("NonZero", mask), perm_i=[1, 0])
    count = g.op("Shape", coordinates, start_i=0, end_i=1) if g.opset >= 15 else \
        g.op("Slice", g.op("Shape", coordinates), g.const([0]), g.const([1]))
    selected_shape = g.op("Concat", count, g.op("Slice", g.op("Shape", self), g.const([r_mask]),
                                                g.const([2**62])), axis_i=0)
    updates = g.op("Expand", values, selected_shape)
    if accumulate:
        return _scatter_nd_add(g, self, coordinates, updates, r_mask)
    return g.op("ScatterND", self, coordinates, updates)


@translates("aten::scatter", "aten::scatter_")
def scatter(g, self, dim, index, src, *, reduce=None):
    """scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor"""
    if not isinstance(src, ir.Value):
        src = g.op("Expand", as_tensor(g, src, self), g.op("Shape", index))
    if reduce and g.opset < 16:  # no reduction attribute yet: scatter_reduce's fallback
        return scatter_reduce(g, self, dim, index, src, {"add": "sum", "multiply": "prod"}[reduce])
    kwargs = {"reduction_s": {"add": "add", "multiply": "mul"}[reduce]} if reduce else {}
    return _scatter_elements(g, self, dim, index, cast(g, src, self.dtype), **kwargs)


@translates("aten::scatter_add", "aten::scatter_add_")
def scatter_add(g, self, dim, index, src):
    """scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor"""
    if g.opset < 16:  # no reduction attribute yet: scatter_reduce's fallback
        return scatter_reduce(g, self, dim, index, src, "sum")
    return _scatter_elements(g, self, dim, index, cast(g, src, self.dtype), reduction_s="add")


def _scatter_elements(g, self, dim, index, src, **attrs):
    index = cast(g, index, ir.DataType.INT64)
    if attrs.get("reduction_s") and self.dtype in _NO_REDUCING_SCATTER:
        return _in_float(g, _scatter_elements, self, dim, index, src, **attrs)
    if rank(self) == 0:
        # ONNX needs an axis: scatter into the 0-d tensor as a 1-element 1-d one.
        zero = g.const([0])
        out = g.op("ScatterElements", g.op("Unsqueeze", self, zero),
                   g.op("Reshape", index, g.const([-1])), g.op("Reshape", src, g.const([-1])),
                   axis_i=0, **attrs)
        return g.op("Squeeze", out, zero)
    return g.op("ScatterElements", self, index, src, axis_i=normalize_axis(dim, rank(self)),
                **attrs)


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


# -- selections whose size is data --------------------------------------------------------------
# torch.export gives their results an unbacked size (u0); the ONNX graph computes it.

# The types ONNX Runtime's NonZero takes; others are compared with zero first.
_NONZERO_TYPES = {ir.DataType.BOOL, ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.INT32,
                  ir.DataType.INT64, ir.DataType.UINT8}


@translates("aten::nonzero")
def nonzero(g, self):
    """nonzero(Tensor self) -> Tensor"""
    x = self if self.dtype in _NONZERO_TYPES else cast(g, self, ir.DataType.BOOL)
    if rank(self) == 0:
        # [n, 0] for a 0-d tensor: the positions of a 1-element 1-d one, without their column.
        positions = g.op("NonZero", g.op("Reshape", x, g.const([1])))
        return g.op("Slice", g.op("Transpose", positions, perm_i=[1, 0]), g.const([0]),
                    g.const([0]), g.const([1]))
    return g.op("Transpose", g.op("NonZero", x), perm_i=[1, 0])


@translates("aten::nonzero_static")
def nonzero_static(g, self, *, size, fill_value=-1):
    """nonzero_static(Tensor self, *, SymInt size, int fill_value=-1) -> Tensor"""
    positions = nonzero(g, self)
    if isinstance(size, ir.Value):  # a size of the run (torch.combinations of a dynamic length)
        size = g.op("Reshape", cast(g, size, ir.DataType.INT64), g.const([1]))
        padding = g.op("Expand", g.const(fill_value, ir.DataType.INT64),
                       g.op("Concat", size, g.const([rank(self)]), axis_i=0))
        both = g.op("Concat", positions, padding, axis_i=0)
        return g.op("Slice", both, g.const([0]), size, g.const([0]))
    if size == 0 or rank(self) == 0:
        return g.const(torch.full((size, rank(self)), fill_value, dtype=torch.int64))
    # The positions, then rows of fill_value, cut to ``size`` rows.
    padding = g.const(torch.full((size, rank(self)), fill_value, dtype=torch.int64))
    both = g.op("Concat", positions, padding, axis_i=0)
    return g.op("Slice", both, g.const([0]), g.const([size]), g.const([0]))


@translates("aten::masked_select")
def masked_select(g, self, mask):
    """masked_select(Tensor self, Tensor mask) -> Tensor"""
    # Expand broadcasts both ways: each operand expanded to the other's shape has the shape
    # of the broadcast. Compress without an axis selects from the flattened input.
    mask = cast(g, mask, ir.DataType.BOOL)
    values = g.op("Expand", self, g.op("Shape", mask))
    condition = g.op("Expand", mask, g.op("Shape", values))
    return g.op("Compress", g.op("Reshape", values, g.const([-1])),
                g.op("Reshape", condition, g.const([-1])), axis_i=0)


# ONNX Runtime's CPU ScatterElements has no kernel for these with a reduction (add, mul, max,
# min): they go through float32 and back.
_NO_REDUCING_SCATTER = (ir.DataType.FLOAT16, ir.DataType.BFLOAT16)


def _in_float(g, scatter, self, *args, **kwargs):
    """``scatter(g, self, *args)`` with self and the tensors of args in float32, cast back."""
    def in_float(value):
        if not isinstance(value, ir.Value) or value.dtype != self.dtype:
            return value
        floated = cast(g, value, ir.DataType.FLOAT)
        floated.shape = value.shape  # the translations below read the rank
        return floated

    out = scatter(g, in_float(self), *map(in_float, args), **kwargs)
    return cast(g, out, self.dtype)


# -- scatter_reduce -----------------------------------------------------------------------------
# ScatterElements' reduction attribute: add/mul since opset 16, max/min since 18.
_SCATTER_REDUCTIONS = {"sum": ("add", 16), "mean": ("add", 16), "prod": ("mul", 16),
                       "amax": ("max", 18), "amin": ("min", 18)}


@translates("aten::scatter_reduce", "aten::scatter_reduce_")
def scatter_reduce(g, self, dim, index, src, reduce, *, include_self=True):
    """scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, bool include_self=True) -> Tensor"""
    if self.dtype == ir.DataType.BOOL:
        # ScatterElements reduces no bools: on 0/1 in int64 sum and amax are torch's "or",
        # prod and amin its "and", once cast back.
        wide = [cast(g, v, ir.DataType.INT64) for v in (self, src)]
        for value, like in zip(wide, (self, src)):
            value.shape = like.shape
        out = _scatter_reduce(g, wide[0], dim, index, wide[1], reduce, include_self)
        return cast(g, out, ir.DataType.BOOL)
    if reduce not in ("amax", "amin") or self.dtype not in FLOAT_TYPES or rank(self) == 0:
        return _scatter_reduce(g, self, dim, index, src, reduce, include_self)
    # torch's amax/amin propagate NaN; ONNX Runtime's max/min scatter and its ReduceMax skip
    # it (or spread it to other targets): reduce without the NaNs, then make NaN each target
    # a NaN was scattered into (or whose own NaN was kept in).
    src = cast(g, src, self.dtype)
    identity = g.const(_identity(reduce, self.dtype), self.dtype)
    src_nan = g.op("IsNaN", src)
    clean_src = g.op("Where", src_nan, identity, src)
    flags = cast(g, src_nan, self.dtype)
    zeros = g.op("Expand", g.const(0.0, self.dtype), g.op("Shape", self))
    clean_self = self
    if include_self:
        self_nan = g.op("IsNaN", self)
        clean_self = g.op("Where", self_nan, identity, self)
    for value, like in ((clean_src, src), (flags, src), (zeros, self), (clean_self, self)):
        value.shape, value.dtype = like.shape, self.dtype
    out = _scatter_reduce(g, clean_self, dim, index, clean_src, reduce, include_self)
    # (amax of the 0/1 flags: the same kind of scatter as the reduction, at every opset)
    hit = g.op("Greater", _scatter_reduce(g, zeros, dim, index, flags, "amax", True),
               g.const(0.0, self.dtype))
    if include_self:
        hit = g.op("Or", hit, self_nan)
    return g.op("Where", hit, g.const(float("nan"), self.dtype), out)


def _scatter_reduce(g, self, dim, index, src, reduce, include_self):
    if reduce not in _SCATTER_REDUCTIONS:
        raise ValueError(f"scatter_reduce with reduce={reduce!r}")
    index = cast(g, index, ir.DataType.INT64)
    src = cast(g, src, self.dtype)
    index_shape = g.static_shape(index)
    if index_shape is not None and 0 in index_shape:
        return g.op("Identity", self)  # nothing to scatter
    if rank(self) == 0:
        # As a 1-element 1-d tensor (ONNX needs an axis).
        zero = g.const([0])
        flat = [g.op("Reshape", v, g.const([-1])) for v in (self, index, src)]
        for value in flat:
            value.shape = ir.Shape([1])
        out = scatter_reduce(g, flat[0], 0, flat[1], flat[2], reduce, include_self=include_self)
        return g.op("Squeeze", out, zero)
    axis = normalize_axis(dim, rank(self))
    # src may be larger than index: only its part of index's shape is scattered.
    src = g.op("Slice", src, g.const([0] * rank(self)), g.op("Shape", index),
               g.const(list(range(rank(self)))))
    attribute, since = _SCATTER_REDUCTIONS[reduce]
    if g.opset < since or self.dtype == ir.DataType.BOOL:
        # (ScatterElements' reductions take no bools at any opset.)
        return _scatter_reduce_one_hot(g, self, axis, index, src, reduce, include_self)
    x = self
    if not include_self:
        # The targets start from the reduction's identity, so that only src counts there.
        x = g.op("ScatterElements", self, index,
                 g.op("Expand", g.const(_identity(reduce, self.dtype), self.dtype),
                      g.op("Shape", index)), axis_i=axis)
    if x.dtype in _NO_REDUCING_SCATTER:
        out = _in_float(g, lambda g, x, src: g.op("ScatterElements", x, index, src, axis_i=axis,
                                                  reduction_s=attribute), x, src)
    else:
        out = g.op("ScatterElements", x, index, src, axis_i=axis, reduction_s=attribute)
    if reduce != "mean":
        return out
    # The mean: the sum divided by how many values each target received (self counting as
    # one of them when included); targets that received none keep self.
    counts = g.op("ScatterElements", g.op("ConstantOfShape", g.op("Shape", self),
                                          value=ir.tensor([int(include_self)], ir.DataType.INT64)),
                  index, g.op("Expand", g.const(1, ir.DataType.INT64), g.op("Shape", index)),
                  axis_i=axis, reduction_s="add")
    return _divide_by_counts(g, self, out, counts)


def _divide_by_counts(g, self, total, counts):
    """total / counts where counts > 0 (else self); integers divide with floor, as torch."""
    has_any = g.op("Greater", counts, g.const(0, ir.DataType.INT64))
    safe = g.op("Max", counts, g.const(1, ir.DataType.INT64))
    if self.dtype in FLOAT_TYPES:
        quotient = g.op("Div", total, cast(g, safe, self.dtype))
    else:
        wide = cast(g, total, ir.DataType.INT64)
        # Floor division of possibly negative sums by positive counts.
        quotient = g.op("Div", g.op("Sub", wide, g.op(
            "Where", g.op("Less", wide, g.const(0, ir.DataType.INT64)),
            g.op("Sub", safe, g.const(1, ir.DataType.INT64)), g.const(0, ir.DataType.INT64))),
            safe)
        quotient = cast(g, quotient, self.dtype)
    return g.op("Where", has_any, quotient, self)


def _identity(reduce, dtype):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    torch_dtype = to_torch_dtype(dtype)
    info = torch.finfo(torch_dtype) if torch_dtype.is_floating_point else torch.iinfo(torch_dtype)
    if torch_dtype.is_floating_point:
        return float("-inf") if reduce == "amax" else float("inf")
    return info.min if reduce == "amax" else info.max


def _scatter_reduce_one_hot(g, self, axis, index, src, how, include_self):
    """scatter_reduce before ScatterElements had the reduction: along the axis (moved last),
    each target t reduces the src values whose index is t, read through a one-hot [.., K, N]
    comparison of the K indices with the N targets. Costs K * N per row."""
    if self.dtype == ir.DataType.BOOL:
        # On bools torch's sum is "any" and its product "all": the max and min of 0/1.
        as_bits = {"sum": "amax", "prod": "amin", "amax": "amax", "amin": "amin"}
        if how not in as_bits:
            raise NotImplementedError(f"scatter_reduce {how!r} of bools")
        bits = []
        for value in (self, src):
            bit = cast(g, value, ir.DataType.INT32)
            bit.shape = value.shape  # (read for the rank)
            bits.append(bit)
        out = _scatter_reduce_one_hot(g, bits[0], axis, index, bits[1], as_bits[how],
                                      include_self)
        return cast(g, out, ir.DataType.BOOL)
    r = rank(self)
    last = r - 1
    perm = list(range(r))
    perm[axis], perm[last] = perm[last], perm[axis]
    move = (lambda v: v) if axis == last else (lambda v: g.op("Transpose", v, perm_i=perm))
    idx, values, base = move(index), move(src), move(self)
    # The part of self that index covers on the other axes: [..., N].
    idx_shape, base_shape = g.op("Shape", idx), g.op("Shape", base)
    region_shape = g.op("Concat", g.op("Slice", idx_shape, g.const([0]), g.const([last])),
                        g.op("Slice", base_shape, g.const([last]), g.const([r])), axis_i=0)
    region = g.op("Slice", base, g.const([0] * r), region_shape, g.const(list(range(r))))
    targets = g.op("Range", g.const(0, ir.DataType.INT64),
                   g.op("Squeeze", g.op("Slice", base_shape, g.const([last]), g.const([r])),
                        g.const([0])), g.const(1, ir.DataType.INT64))
    hits = g.op("Equal", g.op("Unsqueeze", idx, g.const([r])), targets)  # [..., K, N]
    spread = g.op("Unsqueeze", values, g.const([r]))
    identity = g.const(_identity(how, self.dtype), self.dtype)
    chosen = g.op("Where", hits, g.op("Expand", spread, g.op("Shape", hits)), identity)
    onnx_reduce = {"sum": "ReduceSum", "mean": "ReduceSum", "prod": "ReduceProd",
                   "amax": "ReduceMax", "amin": "ReduceMin"}[how]
    reduced = reduce(g, onnx_reduce, chosen, [last], False)  # [..., N]
    counts = reduce(g, "ReduceSum", cast(g, hits, ir.DataType.INT64), [last], False)
    received = g.op("Greater", counts, g.const(0, ir.DataType.INT64))
    if include_self:
        combine = {"sum": "Add", "mean": "Add", "prod": "Mul", "amax": "Max", "amin": "Min"}
        combined = g.op(combine[how], region, reduced)
        if how == "mean":
            combined = _divide_by_counts(g, region, combined,
                                         g.op("Add", counts, g.const(1, ir.DataType.INT64)))
    else:
        combined = reduced if how != "mean" else _divide_by_counts(g, region, reduced, counts)
    updated = g.op("Where", received, combined, region)
    # Put the region back: a plain ScatterElements at each target's own position.
    positions = g.op("Expand", targets, g.op("Shape", updated))
    out = g.op("ScatterElements", base, positions, updated, axis_i=last)
    return move(out)


@translates("aten::unfold")
def unfold(g, self, dimension, size, step):
    """unfold(Tensor(a) self, int dimension, int size, int step) -> Tensor(a)

    The windows as one Gather of positions start + offset ([count, size], count = (length -
    size) // step + 1 at run time), the window axis then moved last: torch's decomposition
    reads strides, which a dynamic size has none of."""
    r = rank(self)
    if r == 0:
        raise TranslationError("unfold of a 0-d tensor is not translated; unsqueeze it first")
    axis = normalize_axis(dimension, r)
    from onnxport.translate.ops.shape import size_of

    length = g.op("Squeeze", size_of(g, self, axis), g.const([0]))
    # (a size or step read at run time, x.unfold(2, x.size(1), x.size(1) - 1), is a value)
    size_value, step_value = (as_tensor(g, v, dtype=ir.DataType.INT64)
                              if isinstance(v, ir.Value) else g.const(v) for v in (size, step))
    count = g.op("Add", g.op("Div", g.op("Sub", length, size_value), step_value), g.const(1))
    starts = g.op("Mul", g.op("Range", g.const(0), count, g.const(1)), step_value)
    offsets = g.op("Range", g.const(0), size_value, g.const(1)) \
        if isinstance(size, ir.Value) else g.const(list(range(size)))
    positions = g.op("Add", g.op("Unsqueeze", starts, g.const([1])), offsets)  # [count, size]
    windows = g.op("Gather", self, positions, axis_i=axis)  # [..., count, size, ...]
    perm = [*range(axis + 1), *range(axis + 2, r + 1), axis + 1]
    return windows if perm == list(range(r + 1)) else g.op("Transpose", windows, perm_i=perm)
