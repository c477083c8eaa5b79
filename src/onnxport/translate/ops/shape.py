"""Shape ops: views, reshapes, transposes, concatenation, slicing, padding (splitting is in
splits.py).

Target shapes are built from what torch knows: static sizes become constants, a symbolic
size equal to the input's size at the same position becomes Reshape's 0 ("keep"), and a
single remaining unknown becomes -1, so that dynamic shapes rarely need shape arithmetic.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import onnx_ir as ir
import torch

from onnxport.errors import TranslationError
from onnxport.translate.ops._helpers import (
    as_1d, as_tensor, cast, expected_dtype, normalize_axis, rank, reshape_to_sizes, shape_list,
    unsqueeze,
)
from onnxport.translate.builder import GIVEN_SIZES, RECORDED_SIZES_DOUBTFUL
from onnxport.translate.registry import translates

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


def dim_text(dim: Any) -> str | None:
    """A comparable text for a symbolic dimension, an ir dim or a SymInt value; None if static."""
    if isinstance(dim, ir.SymbolicDim):
        return str(dim.value)
    if isinstance(dim, ir.Value):
        known = dim.meta.get("dim")
        return None if known is None else str(getattr(known, "value", known))
    return None


def _expected_dims(g, meta=None) -> list:
    meta = g.expected if meta is None else meta
    return [g.dim(d) for d in meta.shape]


def reshape_to(g, x: ir.Value, dims: Sequence[Any]) -> ir.Value:
    """Reshape ``x`` to ``dims`` (ints, ir symbolic dims or SymInt values)."""
    dims = list(dims)
    input_dims = list(x.shape) if x.shape is not None else []
    if input_dims == dims and all(isinstance(d, int) for d in dims):
        return x
    entries: list[Any] = []
    unknown = []
    copies = not x.meta.get(RECORDED_SIZES_DOUBTFUL)
    for i, d in enumerate(dims):
        if isinstance(d, int):
            entries.append(d)
            continue
        text = dim_text(d)
        if copies and text is not None and i < len(input_dims) and \
                dim_text(input_dims[i]) == text:
            entries.append(0)
            continue
        entries.append(d)
        unknown.append(i)
    if len(unknown) == 1 and -1 not in entries:
        entries[unknown[0]] = -1
        unknown = []
    for i in unknown:
        entry = entries[i]
        if isinstance(entry, ir.Value):
            continue
        entries[i] = _size_named(g, x, entry)
    if any(isinstance(d, int) and d == 0 for d in dims):
        if all(isinstance(d, int) for d in dims):
            # An empty result has no data: a constant (Reshape would read 0 as "keep").
            return g.const(torch.zeros(dims, dtype=_torch_dtype(x.dtype)))
        # Empty whatever the other sizes are: no data to move, the shape alone, each size
        # given (Reshape would read 0 as "keep" and -1 as "infer").
        sizes = [d if isinstance(d, (int, ir.Value)) else _size_named(g, x, d) for d in dims]
        return g.op("ConstantOfShape", shape_list(g, sizes),
                    value_t=ir.tensor(torch.zeros(1, dtype=_torch_dtype(x.dtype))))
    allowzero = None
    if g.opset >= 14 and any(isinstance(e, ir.Value) for e in entries):
        # A size read at run time can be 0 (an empty piece), which Reshape would read as
        # "keep": the entries are taken as they are, the kept sizes read too.
        entries = [size_of(g, x, i) if isinstance(e, int) and e == 0 else e
                   for i, e in enumerate(entries)]
        allowzero = 1
    out = g.op("Reshape", x, shape_list(g, entries), allowzero_i=allowzero)
    out.meta[GIVEN_SIZES] = [d if isinstance(d, int) and d > 0 else None for d in dims]
    return out


def _size_named(g, x: ir.Value, dim: Any) -> ir.Value:
    """A symbolic size with no value at hand, read from ``x``'s shape where it has it."""
    text = dim_text(dim)
    position = next((j for j, d in enumerate(x.shape or ()) if dim_text(d) == text), None)
    if position is None:
        raise ValueError(f"cannot compute the size {text} of a reshape of {x.name}")
    return size_of(g, x, position)


def size_of(g, x: ir.Value, axis: int) -> ir.Value:
    """The size of ``x`` along ``axis`` as a 1-D [1] int64 value."""
    if g.opset >= 15:
        out = g.op("Shape", x, start_i=axis, end_i=axis + 1)
    else:
        out = g.op("Gather", g.op("Shape", x), g.const([axis]), axis_i=0)
    out.dtype = ir.DataType.INT64
    return out


@translates("aten::view", "aten::reshape", "aten::_unsafe_view", "aten::_reshape_alias")
def view(g, self, size, *_):
    """view(Tensor(a) self, SymInt[] size) -> Tensor(a)"""
    return reshape_to(g, self, list(size))


@translates("aten::view_as", "aten::reshape_as")
def view_as(g, self, other):
    """view_as(Tensor(a) self, Tensor other) -> Tensor(a)"""
    dims = _expected_dims(g)
    if all(isinstance(d, int) for d in dims):
        return reshape_to(g, self, dims)
    # The other tensor's shape as it is at run time: the result's symbolic sizes need not be
    # sizes of self (a reshape of [a, 6] as [b, 4] reads b from the other tensor).
    return reshape_to_sizes(g, self, g.op("Shape", other))


@translates("aten::unflatten")
def unflatten(g, self, dim, sizes):
    """unflatten.int(Tensor(a) self, int dim, SymInt[] sizes) -> Tensor(a)"""
    # From the sizes given (SymInt values included), not torch's result shape: a symbolic size
    # of the result need not be a size of the input (unflatten(0, (b, s)) of [b*s, ...]).
    axis = normalize_axis(dim, rank(self))
    dims = list(self.shape)
    return reshape_to(g, self, dims[:axis] + list(sizes) + dims[axis + 1:])


@translates("aten::flatten")
def flatten(g, self, start_dim=0, end_dim=-1):
    """flatten.using_ints(Tensor self, int start_dim=0, int end_dim=-1) -> Tensor

    From the input's sizes, not the recorded result's: torch.export records some flattens
    of a dim that was 1 in the example wrongly (flatten(0, 1) of [a, b, c] as [a, c*b]),
    which ran as a silently wrong shape where b is not 1."""
    r = rank(self)
    if r == 0:
        return reshape_to(g, self, [1])
    start, end = normalize_axis(start_dim, r), normalize_axis(end_dim, r)
    if start == end:
        return self
    if start == 1 and end == r - 1:
        return g.op("Flatten", self, axis_i=1)  # [first, the rest's product]
    dims = list(self.shape)
    merged = [d for d in dims[start:end + 1] if d != 1]
    if all(isinstance(d, int) for d in merged):
        merged = [math.prod(merged)]
    if len(merged) == 1:
        return reshape_to(g, self, dims[:start] + merged + dims[end + 1:])
    return _flattened_at_run_time(g, self, start, end)


@translates("aten::squeeze_copy", "aten::view_copy")
def reshape_to_expected(g, self, *args, **__):
    """view_copy(Tensor self, SymInt[] size) -> Tensor"""
    dims = _expected_dims(g)
    r = rank(self)
    if len(dims) == 2 and r > 2:
        # [first, the rest's product] of an N-d tensor is ONNX Flatten at axis 1.
        first = self.shape[0]
        if dims[0] == first or (dim_text(first) is not None and dim_text(dims[0]) == dim_text(first)):
            return g.op("Flatten", self, axis_i=1)
    return reshape_to(g, self, dims)


def _flattened_at_run_time(g, self, start: int, end: int) -> ir.Value:
    """Flattened dynamic dims next to others (flatten(0, 1) of [a, b, c]: a*b is none of the
    input's dims, and c moved): the merged size is the product of the input's sizes there."""
    r = rank(self)
    shape = g.op("Shape", self)
    parts = [g.op("Slice", shape, g.const([0]), g.const([start]))] if start else []
    parts.append(g.op("ReduceProd", g.op("Slice", shape, g.const([start]), g.const([end + 1])),
                      keepdims_i=1))
    if end + 1 < r:
        parts.append(g.op("Slice", shape, g.const([end + 1]), g.const([r])))
    return reshape_to_sizes(g, self, g.op("Concat", *parts, axis_i=0))


@translates("aten::permute")
def permute(g, self, dims):
    """permute(Tensor(a) self, int[] dims) -> Tensor(a)"""
    r = rank(self)
    perm = [normalize_axis(d, r) for d in dims]
    if perm == list(range(r)):
        return self
    return g.op("Transpose", self, perm_i=perm)


# (The in-place forms change the shape of the tensor they write: graph.py rebinds it.)
@translates("aten::transpose", "aten::swapaxes", "aten::swapdims", "aten::transpose_",
            "aten::swapaxes_", "aten::swapdims_")
def transpose(g, self, dim0, dim1):
    """transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)"""
    r = rank(self)
    perm = list(range(r))
    a, b = normalize_axis(dim0, r), normalize_axis(dim1, r)
    if a == b:
        return self
    perm[a], perm[b] = perm[b], perm[a]
    return g.op("Transpose", self, perm_i=perm)


@translates("aten::t", "aten::numpy_T", "aten::t_")
def t(g, self):
    """t(Tensor(a) self) -> Tensor(a)"""
    if rank(self) < 2:
        return self
    return g.op("Transpose", self, perm_i=[1, 0])


@translates("aten::contiguous", "aten::clone", "aten::alias", "aten::detach", "aten::detach_",
            "aten::lift_fresh_copy", "aten::lift_fresh", "aten::resolve_conj", "aten::resolve_neg",
            "aten::dropout", "aten::dropout_", "aten::feature_dropout", "aten::alpha_dropout",
            "aten::feature_alpha_dropout", "aten::alias_copy", "prim::data",
            "aten::cpu", "aten::cuda")  # (scripted x.cpu(): ONNX has no device)
def identity(g, self, *_, **__):
    """contiguous(Tensor(a) self, *, MemoryFormat memory_format=contiguous_format) -> Tensor(a)"""
    dtype = expected_dtype(g)
    if dtype is not None and isinstance(self, ir.Value) and self.dtype is not None and self.dtype != dtype:
        return cast(g, self, dtype)
    return self


@translates("aten::to", "aten::_to_copy", "aten::type_as", "prims::convert_element_type")
def to(g, self, *_, **__):
    """to.dtype(Tensor(a) self, ScalarType dtype, bool non_blocking=False, bool copy=False) -> Tensor(a)"""
    dtype = expected_dtype(g)
    # (self is None for a value inference leaves out: batch norm's updated running stats,
    # which torch casts back to a float16 model's dtype.)
    if self is None or dtype is None or self.dtype == dtype:
        return self
    return g.op("Cast", self, to_i=int(dtype))


@translates("aten::expand", "aten::expand_copy", "aten::broadcast_to")
def expand(g, self, size, *_, **__):
    """expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)"""
    in_dims = list(self.shape)
    offset = len(size) - len(in_dims)
    entries: list[Any] = []
    for i, s in enumerate(size):
        j = i - offset
        in_dim = in_dims[j] if j >= 0 else None
        if isinstance(s, int):
            if s == -1 or (in_dim is not None and isinstance(in_dim, int) and in_dim == s):
                entries.append(1)
            else:
                entries.append(s)
        elif in_dim is not None and dim_text(s) is not None and dim_text(s) == dim_text(in_dim):
            entries.append(1)
        else:
            entries.append(s)
    if all(e == 1 for e in entries) and len(entries) == len(in_dims):
        return self
    return g.op("Expand", self, shape_list(g, entries))


@translates("prims::broadcast_in_dim")
def broadcast_in_dim(g, a, shape, broadcast_dimensions):
    """broadcast_in_dim(Tensor(a) a, SymInt[] shape, int[] broadcast_dimensions) -> Tensor(a)"""
    new_axes = [i for i in range(len(shape)) if i not in broadcast_dimensions]
    x = unsqueeze(g, a, new_axes) if new_axes else a
    return g.op("Expand", x, shape_list(g, list(shape)))


@translates("aten::expand_as")
def expand_as(g, self, other):
    """expand_as(Tensor(a) self, Tensor other) -> Tensor(a)"""
    dims = _expected_dims(g)
    if all(isinstance(d, int) for d in dims):
        return expand(g, self, dims)
    # Symbolic sizes have no value here: Expand to other's shape (the same broadcast).
    return g.op("Expand", self, g.op("Shape", other))


@translates("aten::unsqueeze", "aten::unsqueeze_copy", "aten::unsqueeze_")
def unsqueeze_(g, self, dim):
    """unsqueeze(Tensor(a) self, int dim) -> Tensor(a)"""
    r = rank(self)
    axis = dim + r + 1 if dim < 0 else dim
    return unsqueeze(g, self, [axis])


@translates("aten::meshgrid", "aten::meshgrid.indexing")
def meshgrid(g, tensors, indexing="ij"):
    """meshgrid(Tensor[] tensors) -> Tensor[]
    meshgrid.indexing(Tensor[] tensors, *, str indexing) -> Tensor[]"""
    tensors = list(tensors)
    xy = indexing == "xy" and len(tensors) > 1
    if xy:  # the first two swapped, "ij" gives "xy"'s grids (also of shape (len y, len x))
        tensors[0], tensors[1] = tensors[1], tensors[0]
    flat = [g.op("Reshape", t, g.const([-1])) for t in tensors]  # (0-d or 1-d)
    shape = g.op("Concat", *[g.op("Shape", f) for f in flat], axis_i=0)
    grids = [g.op("Expand", unsqueeze(g, f, [a for a in range(len(flat)) if a != k])
                  if len(flat) > 1 else f, shape) for k, f in enumerate(flat)]
    if xy:
        grids[0], grids[1] = grids[1], grids[0]
    return grids


@translates("aten::cat", "aten::concat", "aten::concatenate")
def cat(g, tensors, dim=0):
    """cat(Tensor[] tensors, int dim=0) -> Tensor"""
    dtype = expected_dtype(g)
    # torch.cat skips 1-D empty tensors (a legacy rule); ONNX Concat would not.
    kept = [t for t in tensors if not (t.shape is not None and list(t.shape) == [0])]
    if not kept:
        kept = list(tensors[:1])
    values = [cast(g, t, dtype) if dtype is not None else t for t in kept]
    if len(values) == 1:
        return values[0]
    axis = normalize_axis(dim, rank(kept[0]))  # (a fresh Cast output has no recorded shape)
    return g.op("Concat", *values, axis_i=axis)


@translates("aten::stack")
def stack(g, tensors, dim=0):
    """stack(Tensor[] tensors, int dim=0) -> Tensor"""
    r = rank(tensors[0]) + 1
    axis = normalize_axis(dim, r)
    dtype = expected_dtype(g)
    values = [unsqueeze(g, cast(g, t, dtype) if dtype else t, [axis]) for t in tensors]
    if len(values) == 1:
        return values[0]
    return g.op("Concat", *values, axis_i=axis)


@translates("aten::select", "aten::select_copy")
def select(g, self, dim, index):
    """select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)"""
    axis = normalize_axis(dim, rank(self))
    index_value = as_tensor(g, index, dtype=ir.DataType.INT64)
    if isinstance(index, ir.Value) and (index.shape is None or len(index.shape) == 1):
        # A SymInt index (a loop's iteration number) lives as a [1] tensor; select drops
        # the axis, so Gather takes it as a scalar.
        index_value = g.op("Reshape", index_value, g.const([], ir.DataType.INT64))
    return g.op("Gather", self, index_value, axis_i=axis)


@translates("aten::slice", "aten::slice_copy")
def slice_(g, self, dim=0, start=None, end=None, step=1):
    """slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor(a)"""
    r = rank(self)
    axis = normalize_axis(dim, r)
    start = 0 if start is None else start
    end = INT64_MAX if end is None else end
    if isinstance(end, int) and end >= INT64_MAX:
        end = INT64_MAX
    size = self.shape[axis]
    if start == 0 and step == 1 and isinstance(end, int) and (
        end == INT64_MAX or (isinstance(size, int) and end >= size)
    ):
        return self
    if isinstance(end, ir.Value) and dim_text(end) is not None and dim_text(end) == dim_text(size) \
            and start == 0 and step == 1:
        return self
    return g.op("Slice", self, shape_list(g, [start]), shape_list(g, [end]), g.const([axis]),
                g.const([step]) if step != 1 else None)


@translates("aten::diagonal", "aten::diagonal_copy")
def diagonal(g, self, offset=0, dim1=0, dim2=1):
    """diagonal(Tensor(a) self, int offset=0, int dim1=0, int dim2=1) -> Tensor(a)"""
    r = rank(self)
    first, second = normalize_axis(dim1, r), normalize_axis(dim2, r)
    rest = [i for i in range(r) if i not in (first, second)]
    perm = rest + [first, second]
    x = self if perm == list(range(r)) else g.op("Transpose", self, perm_i=perm)
    # The diagonal of the [n, m] matrix that starts at the offset's row or column.
    if offset > 0:
        x = g.op("Slice", x, g.const([offset]), g.const([INT64_MAX]), g.const([r - 1]))
    elif offset < 0:
        x = g.op("Slice", x, g.const([-offset]), g.const([INT64_MAX]), g.const([r - 2]))
    # In the flattened matrix the diagonal is every (m + 1)-th element: a strided Slice.
    batch = g.op("Slice", g.op("Shape", x), g.const([0]), g.const([r - 2]))
    n = g.op("Slice", g.op("Shape", x), g.const([r - 2]), g.const([r - 1]))
    m = g.op("Slice", g.op("Shape", x), g.const([r - 1]), g.const([r]))
    length = g.op("Min", n, m)
    step = g.op("Add", m, g.const([1]))
    flat_shape = g.op("Concat", batch, g.op("Mul", n, m), axis_i=0)
    flat = reshape_to_sizes(g, x, flat_shape)
    return g.op("Slice", flat, g.const([0]), g.op("Mul", length, step), g.const([r - 2]), step)


@translates("aten::as_strided", "aten::as_strided_copy")
def as_strided(g, self, size, stride, storage_offset=None):
    """as_strided(Tensor(a) self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor(a)

    A view into self's storage, expressible when self is contiguous: a Gather from the
    flattened input at offset + sum(i_k * stride_k)."""
    meta = g.arguments[0] if g.arguments else None
    if not isinstance(meta, torch.Tensor) or not meta.is_contiguous():
        raise NotImplementedError("as_strided of a tensor that is not contiguous (its storage "
                                  "order is not its ONNX order)")
    base = meta.storage_offset()
    offset = base if storage_offset is None else storage_offset
    if not isinstance(offset, int) or not isinstance(base, int):
        raise NotImplementedError("as_strided at a symbolic storage offset")
    offset -= base
    if all(isinstance(v, int) for v in list(size) + list(stride)):
        last = offset + sum((s - 1) * t for s, t in zip(size, stride) if s > 0)
        numel = meta.numel()
        if isinstance(numel, int) and 0 not in size and (offset < 0 or last >= numel):
            raise NotImplementedError("as_strided reaching outside its input's elements")
    positions = _strided_positions(g, size, stride, offset)
    return g.op("Gather", g.op("Reshape", self, g.const([-1])), positions, axis_i=0)


def _strided_positions(g, size, stride, offset):
    """The flat positions offset + sum(i_k * stride_k) of a strided view, of shape size."""
    positions = g.const(offset, ir.DataType.INT64)
    count = len(size)
    for axis, (length, step) in enumerate(zip(size, stride)):
        along = g.op("Range", g.const(0, ir.DataType.INT64),
                     as_tensor(g, length, dtype=ir.DataType.INT64), g.const(1, ir.DataType.INT64))
        along = g.op("Mul", along, as_tensor(g, step, dtype=ir.DataType.INT64))
        shape = [1] * count
        shape[axis] = -1
        positions = g.op("Add", positions, g.op("Reshape", along, g.const(shape)))
    return positions


@translates("aten::as_strided_scatter")
def as_strided_scatter(g, self, src, size, stride, storage_offset=None):
    """as_strided_scatter(Tensor self, Tensor src, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor

    src written into self's storage where as_strided(size, stride, offset) reads: a
    ScatterElements into the flattened self (contiguous, so that storage order is its order).
    Views whose elements overlap are refused: which write wins is not defined."""
    meta = g.arguments[0] if g.arguments else None
    if not isinstance(meta, torch.Tensor) or not meta.is_contiguous():
        raise TranslationError("as_strided_scatter into a tensor that is not contiguous (its "
                               "storage order is not its ONNX order)")
    offset = (meta.storage_offset() if storage_offset is None else storage_offset) \
        - meta.storage_offset()
    if not all(isinstance(v, int) for v in [offset, *size, *stride]):
        raise TranslationError("as_strided_scatter at symbolic sizes, strides or offset")
    numel = meta.numel()
    if 0 in size:
        return g.op("Identity", self)
    reached = {offset}
    for length, step in zip(size, stride):
        reached = {p + i * step for p in reached for i in range(length)}
    if len(reached) != math.prod(size) or min(reached) < 0 or (
            isinstance(numel, int) and max(reached) >= numel):
        raise TranslationError("as_strided_scatter through a view whose elements overlap or "
                               "reach outside self: torch's result there has no defined order")
    positions = g.op("Reshape", _strided_positions(g, size, stride, offset), g.const([-1]))
    values = g.op("Reshape", cast(g, src, self.dtype), g.const([-1]))
    flat = g.op("ScatterElements", g.op("Reshape", self, g.const([-1])), positions, values,
                axis_i=0)
    return reshape_to_sizes(g, flat, g.op("Shape", self))


@translates("aten::narrow", "aten::narrow_copy")
def narrow(g, self, dim, start, length):
    """narrow(Tensor(a) self, int dim, SymInt start, SymInt length) -> Tensor(a)"""
    if isinstance(start, int) and isinstance(length, int):
        # A negative start counts from the end, where start + length = 0 means the end too.
        end: Any = start + length if start >= 0 or start + length < 0 else INT64_MAX
    else:
        if isinstance(start, ir.Value):
            # A start read from data (narrow at a tensor start) may count from the end.
            start = as_1d(g, as_tensor(g, start, dtype=ir.DataType.INT64))
            axis = normalize_axis(dim, rank(self))
            size = g.op("Slice", g.op("Shape", self), g.const([axis]), g.const([axis + 1]))
            start = g.op("Where", g.op("Less", start, g.const([0])), g.op("Add", start, size),
                         start)
        end = g.op("Add", as_1d(g, as_tensor(g, start, dtype=ir.DataType.INT64)),
                   as_1d(g, as_tensor(g, length, dtype=ir.DataType.INT64)))
    return slice_(g, self, dim, start, end, 1)


@translates("aten::roll")
def roll(g, self, shifts, dims=()):
    """roll(Tensor self, SymInt[1] shifts, int[1] dims=[]) -> Tensor"""
    if not dims:
        flat = g.op("Reshape", self, g.const([-1]))
        flat.shape = ir.Shape([None])
        static = g.static_shape(self)
        numel = math.prod(static) if static is not None else None
        rolled = _roll_axis(g, flat, shifts[0], 0, numel)
        return reshape_to_sizes(g, rolled, g.op("Shape", self))
    result = self
    r = rank(self)
    for shift, dim in zip(shifts, dims):
        axis = normalize_axis(dim, r)
        result = _roll_axis(g, result, shift, axis, self.shape[axis])
    return result


def _roll_axis(g, x, shift, axis, size):
    """Roll ``x`` by ``shift`` along ``axis`` of ``size`` (an int, else read at run time):
    the shift is taken modulo the size, as torch does, so that a shift past the size (or a
    negative one) still rolls."""
    if isinstance(size, int) and isinstance(shift, int):
        if size == 0:
            return x  # nothing to roll (and no remainder by zero)
        split = size - shift % size
        if split == size:
            return x
        split = g.const([split])
    else:
        if isinstance(size, int):
            length = g.const([max(size, 1)])
        else:
            # Max with 1: an empty axis rolls to itself, and Mod by zero is undefined.
            length = g.op("Max", size_of(g, x, axis), g.const([1]))
        steps = as_1d(g, as_tensor(g, shift, dtype=ir.DataType.INT64))
        # Mod of integers (fmod=0) has the divisor's sign: a shift in [0, size).
        split = g.op("Sub", length, g.op("Mod", steps, length, fmod_i=0))
    axes = g.const([axis])
    tail = g.op("Slice", x, split, g.const([INT64_MAX]), axes)
    head = g.op("Slice", x, g.const([0]), split, axes)
    return g.op("Concat", tail, head, axis_i=axis)


@translates("aten::repeat")
def repeat(g, self, repeats):
    """repeat(Tensor self, SymInt[] repeats) -> Tensor"""
    r = rank(self)
    x = self
    if len(repeats) > r:
        x = unsqueeze(g, x, list(range(len(repeats) - r)))
    return g.op("Tile", x, shape_list(g, list(repeats)))


@translates("aten::flip")
def flip(g, self, dims):
    """flip(Tensor self, int[] dims) -> Tensor"""
    r = rank(self)
    axes = [normalize_axis(d, r) for d in dims]
    n = len(axes)
    return g.op("Slice", self, g.const([-1] * n), g.const([INT64_MIN] * n), g.const(axes),
                g.const([-1] * n))


@translates("aten::constant_pad_nd", "aten::pad")
def pad(g, self, pad, mode="constant", value=None):
    """constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor"""
    if isinstance(mode, (int, float)) and value is None:
        mode, value = "constant", mode
    r = rank(self)
    begins = [0] * r
    ends = [0] * r
    for i in range(len(pad) // 2):
        axis = r - 1 - i
        begins[axis] = pad[2 * i]
        ends[axis] = pad[2 * i + 1]
    onnx_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge",
                 "circular": "wrap"}[mode]
    if onnx_mode == "wrap" and (g.opset < 19 or any(
            isinstance(p, int) and p < 0 for p in begins + ends) or _maybe_empty(self, begins + ends)):
        return _circular_pad(g, self, begins, ends)
    negative = [a for a in range(r) if isinstance(begins[a], int) and isinstance(ends[a], int)
                and (begins[a] < 0 or ends[a] < 0)]
    if onnx_mode == "edge" and negative:
        # ONNX Runtime's edge Pad refuses negative pads. torch's replicate reads the input at
        # clamp(i - before, 0, size - 1), even where the crop takes the whole axis: a Gather.
        for a in negative:
            size = g.op("Slice", g.op("Shape", self), g.const([a]), g.const([a + 1]))
            length = g.op("Add", size, g.const([begins[a] + ends[a]]))
            positions = g.op("Sub", g.op("Range", g.const(0, ir.DataType.INT64),
                                         g.op("Squeeze", length, g.const([0])),
                                         g.const(1, ir.DataType.INT64)),
                             g.const([begins[a]]))
            positions = g.op("Max", g.op("Min", positions, g.op("Sub", size, g.const([1]))),
                             g.const([0]))
            self = g.op("Gather", self, positions, axis_i=a)
            begins[a] = ends[a] = 0
    elif onnx_mode == "reflect" and negative:
        # Nor its reflect Pad: torch crops by them (the reflections on the other side are
        # those of the edge cropping keeps).
        self = g.op("Slice", self, g.const([max(0, -begins[a]) for a in negative]),
                    g.const([ends[a] if ends[a] < 0 else INT64_MAX for a in negative]),
                    g.const(negative))
        begins = [max(0, p) if a in negative else p for a, p in enumerate(begins)]
        ends = [max(0, p) if a in negative else p for a, p in enumerate(ends)]
    if not any(begins + ends) and all(isinstance(p, int) for p in begins + ends):
        return self  # Swin pads each window to a multiple of its size: often by nothing
    pads = shape_list(g, begins + ends)
    fill = as_tensor(g, value if value is not None else 0, self) if onnx_mode == "constant" else None
    return g.op("Pad", self, pads, fill, mode_s=onnx_mode)


def _maybe_empty(x, pads) -> bool:
    """Whether ``x`` may have no elements while Slice and Concat can pad it: ONNX Runtime's
    Pad fails on an empty input in "wrap" mode ("Unexpected mode of 3")."""
    if not all(isinstance(p, int) for p in pads):
        return False  # symbolic pads: only Pad takes them
    dims = list(x.shape) if x.shape is not None else []
    return x.shape is None or any(not isinstance(d, int) or d == 0 for d in dims)


def _circular_pad(g, x, begins, ends):
    """Pad's "wrap" mode arrived in opset 19 (and its negative pads do not crop first, as
    torch's do): each padded axis is its tail, itself, then its head."""
    for axis, (before, after) in enumerate(zip(begins, ends)):
        if not isinstance(before, int) or not isinstance(after, int):
            raise NotImplementedError("circular padding by symbolic amounts before opset 19")
        if before == 0 and after == 0:
            continue
        axes = g.const([axis])
        # As torch: crop the negative pads first, then wrap what is left.
        core = x
        if before < 0 or after < 0:
            core = g.op("Slice", x, g.const([max(0, -before)]),
                        g.const([after if after < 0 else INT64_MAX]), axes)
        parts = []
        if before > 0:
            parts.append(g.op("Slice", core, g.const([-before]), g.const([INT64_MAX]), axes))
        parts.append(core)
        if after > 0:
            parts.append(g.op("Slice", core, g.const([0]), g.const([after]), axes))
        x = parts[0] if len(parts) == 1 else g.op("Concat", *parts, axis_i=axis)
    return x


def _pad_mode(mode):
    def translation(g, self, padding):
        return pad(g, self, padding, mode)

    translation.__doc__ = f"{mode}_pad(Tensor self, SymInt[] padding) -> Tensor"
    return translation


for _mode, _names in [
    ("reflect", ("aten::reflection_pad1d", "aten::reflection_pad2d", "aten::reflection_pad3d")),
    ("replicate", ("aten::replication_pad1d", "aten::replication_pad2d", "aten::replication_pad3d")),
]:
    translates(*_names)(_pad_mode(_mode))


@translates("aten::sym_size", "aten::size")
def sym_size(g, self, dim=None):
    """sym_size.int(Tensor self, int dim) -> SymInt

    Without ``dim`` (``x.shape`` in scripted code, which torch's converter makes
    ``aten.sym_size(x)``): every size, a number where it is static."""
    if dim is None:
        return [size if isinstance(size, int) else size_of(g, self, axis)
                for axis, size in enumerate(self.shape)]
    return size_of(g, self, normalize_axis(dim, rank(self)))


@translates("aten::sym_numel", "aten::numel")
def sym_numel(g, self):
    """sym_numel(Tensor self) -> SymInt"""
    return as_1d(g, g.op("Size", self))


@translates("aten::_shape_as_tensor")
def shape_as_tensor(g, self):
    """_shape_as_tensor(Tensor self) -> Tensor"""
    return g.op("Shape", self)


@translates("aten::view.dtype")
def _unsupported_view(g, *args, **kwargs):
    """view.dtype(Tensor(a) self, ScalarType dtype) -> Tensor(a)"""
    raise NotImplementedError("reinterpreting a tensor's bytes as another dtype has no ONNX form")


def _torch_dtype(dtype: ir.DataType) -> torch.dtype:
    from onnx_ir.tensor_adapters import to_torch_dtype

    return to_torch_dtype(dtype)


@translates("aten::resize_", "aten::resize")
def resize_(g, self, size, memory_format=None):
    """resize_(Tensor(a!) self, SymInt[] size, *, MemoryFormat? memory_format=None) -> Tensor(a!)

    At most as many elements as self holds: its first ones in storage order, reshaped (self
    must be contiguous, so that storage order is its order). Growing reads memory torch has
    not initialised, which no graph can reproduce."""
    return _resized(g, self, [int(s) if isinstance(s, int) else s for s in size])


@translates("aten::resize_as_", "aten::resize_as")
def resize_as_(g, self, the_template, memory_format=None):
    """resize_as_(Tensor(a!) self, Tensor the_template, *, MemoryFormat? memory_format=None) -> Tensor(a!)"""
    shape = g.static_shape(the_template)
    if shape is None:
        raise TranslationError("resize_as_ to a template of dynamic shape: the number of "
                               "elements kept would be known only at run time")
    return _resized(g, self, shape)


def _resized(g, self, size):
    meta = g.arguments[0] if g.arguments else None
    old = g.static_shape(self)
    if old is None or not all(isinstance(s, int) for s in size):
        raise TranslationError("resize_ over dynamic sizes: whether it keeps, drops or "
                               "invents elements would be known only at run time; use reshape")
    if isinstance(meta, torch.Tensor) and not meta.is_contiguous():
        raise TranslationError("resize_ of a tensor that is not contiguous: it keeps elements "
                               "in storage order, which is not the tensor's; call "
                               ".contiguous() first")
    count, available = math.prod(size), math.prod(old)
    if count > available:
        raise TranslationError(
            f"resize_ from {available} to {count} elements: the new elements are memory torch "
            "leaves uninitialised, which an ONNX graph cannot reproduce; resize to at most "
            f"{available} elements or use torch.zeros/new_empty and copy")
    flat = g.op("Reshape", self, g.const([-1]))
    if count < available:
        flat = g.op("Slice", flat, g.const([0]), g.const([count]), g.const([0]))
    return g.op("Reshape", flat, g.const(list(size), ir.DataType.INT64))
