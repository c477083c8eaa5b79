"""index_reduce: ScatterElements with a reduction, along one axis, with or without self."""

from __future__ import annotations

import onnx_ir as ir

from onnxport.translate.ops._helpers import FLOAT_TYPES, cast, normalize_axis, rank
from onnxport.translate.registry import translates

_I64 = ir.DataType.INT64
_REDUCTION = {"prod": "mul", "mean": "add", "amax": "max", "amin": "min"}


def _identity(reduce: str, dtype: ir.DataType) -> float | int:
    floating = dtype in FLOAT_TYPES
    if reduce == "amax":
        return float("-inf") if floating else -(2**63)
    if reduce == "amin":
        return float("inf") if floating else 2**63 - 1
    return 1 if reduce == "prod" else 0


@translates("aten::index_reduce")
def index_reduce(g, self, dim, index, source, reduce, *, include_self=True):
    """index_reduce(Tensor self, int dim, Tensor index, Tensor source, str reduce, *, bool include_self=True) -> Tensor"""
    if g.opset < (18 if reduce in ("amax", "amin") else 16):
        # Before ScatterElements has this reduction: scatter_reduce's composition, with the
        # index spread along ``dim`` over source's other axes.
        return _index_reduce_as_scatter_reduce(g, self, dim, index, source, reduce, include_self)
    scalar = rank(self) == 0
    if scalar:
        zero = g.const([0], _I64)
        self, source = g.op("Unsqueeze", self, zero), g.op("Unsqueeze", source, zero)
        self.shape, source.shape, dim = ir.Shape([1]), ir.Shape([1]), 0
    axis = normalize_axis(dim, max(rank(self), 1))
    # index runs along ``axis`` of source: spread it over source's other axes.
    index_shape = [1] * rank(source)
    index_shape[axis] = -1
    positions = g.op("Expand", g.op("Reshape", cast(g, index, _I64), g.const(index_shape, _I64)),
                     g.op("Shape", source))
    counts = g.op("ScatterElements", g.op("Mul", cast(g, self, _I64), g.const(0, _I64)),
                  positions, g.op("Add", g.op("Mul", cast(g, source, _I64), g.const(0, _I64)),
                                  g.const(1, _I64)), axis_i=axis, reduction_s="add")
    touched = g.op("Greater", counts, g.const(0, _I64))
    base = self
    if not include_self:
        base = g.op("Where", touched, g.const(_identity(reduce, self.dtype), self.dtype), self)
    result = g.op("ScatterElements", base, positions, source, axis_i=axis,
                  reduction_s=_REDUCTION[reduce])
    if reduce == "mean":
        count = counts if not include_self else g.op("Add", counts, g.const(1, _I64))
        count = cast(g, g.op("Max", count, g.const(1, _I64)), self.dtype)
        mean = g.op("Div", result, count)
        if self.dtype not in FLOAT_TYPES:
            # torch rounds an integer mean down.
            floored = g.op("Floor", g.op("Div", cast(g, result, ir.DataType.DOUBLE),
                                         cast(g, count, ir.DataType.DOUBLE)))
            mean = cast(g, floored, self.dtype)
        result = g.op("Where", touched, mean, self)
    if scalar:
        result = g.op("Squeeze", result, g.const([0], _I64))
    return result


def _index_reduce_as_scatter_reduce(g, self, dim, index, source, reduce, include_self):
    from onnxport.translate.ops.indexing import scatter_reduce

    if rank(self) == 0:
        return scatter_reduce(g, self, 0, cast(g, index, _I64), source, reduce,
                              include_self=include_self)
    axis = normalize_axis(dim, rank(self))
    index_shape = [1] * rank(source)
    index_shape[axis] = -1
    positions = g.op("Expand", g.op("Reshape", cast(g, index, _I64), g.const(index_shape, _I64)),
                     g.op("Shape", source))
    return scatter_reduce(g, self, axis, positions, source, reduce, include_self=include_self)


@translates("aten::put")
def put(g, self, index, source, accumulate=False):
    """put(Tensor self, Tensor index, Tensor source, bool accumulate=False) -> Tensor"""
    # self as if flattened; negative indices count from the end.
    flat = g.op("Reshape", self, g.const([-1], _I64))
    index = g.op("Reshape", cast(g, index, _I64), g.const([-1], _I64))
    size = g.op("Shape", flat)
    index = g.op("Where", g.op("Less", index, g.const(0, _I64)), g.op("Add", index, size), index)
    values = g.op("Reshape", source, g.const([-1], _I64))
    if accumulate and g.opset < 16:  # no reduction attribute yet: scatter_reduce's fallback
        from onnxport.translate.ops.indexing import scatter_reduce

        for value in (flat, index, values):
            value.shape = ir.Shape([None])  # (1-d: read for the rank)
        result = scatter_reduce(g, flat, 0, index, values, "sum")
    else:
        result = g.op("ScatterElements", flat, index, values, axis_i=0,
                      reduction_s="add" if accumulate else None)
    return g.op("Reshape", result, g.op("Shape", self))


@translates("aten::diagonal_scatter")
def diagonal_scatter(g, self, src, offset=0, dim1=0, dim2=1):
    """diagonal_scatter(Tensor self, Tensor src, int offset=0, int dim1=0, int dim2=1) -> Tensor"""
    import torch

    r = rank(self)
    d1, d2 = normalize_axis(dim1, r), normalize_axis(dim2, r)
    n1, n2 = self.shape[d1], self.shape[d2]
    if not (isinstance(n1, int) and isinstance(n2, int)):
        from onnxport.errors import TranslationError

        raise TranslationError("aten::diagonal_scatter needs static sizes along dim1 and dim2")
    # With dim1, dim2 moved last, position (i, j) with j - i == offset takes src[..., k],
    # k counting along the diagonal.
    perm = [i for i in range(r) if i not in (d1, d2)] + [d1, d2]
    inverse = [perm.index(i) for i in range(r)]
    moved = g.op("Transpose", self, perm_i=perm)
    rows, cols = torch.meshgrid(torch.arange(n1), torch.arange(n2), indexing="ij")
    on_diagonal = (cols - rows) == offset
    along = torch.where(on_diagonal, torch.minimum(rows, cols), torch.zeros_like(rows))
    if src.shape is not None and len(src.shape) and src.shape[-1] == 0:
        return g.op("Identity", self)
    picked = g.op("Gather", src, g.const(along.reshape(-1)), axis_i=-1)
    shape = g.op("Concat", g.op("Shape", src, end_i=-1), g.const([n1, n2], _I64), axis_i=0)
    picked = g.op("Reshape", picked, shape)
    result = g.op("Where", g.const(on_diagonal), cast(g, picked, self.dtype), moved)
    return g.op("Transpose", result, perm_i=inverse)
