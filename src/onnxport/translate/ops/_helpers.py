"""Pieces shared by the op families: dtypes, shape lists, axes, opset-dependent forms."""

from __future__ import annotations

import math
import operator
from typing import Any, Sequence

import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import TorchTensor, from_torch_dtype

FLOAT_TYPES = {ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16}


def onnx_dtype(dtype: torch.dtype | ir.DataType) -> ir.DataType:
    return dtype if isinstance(dtype, ir.DataType) else from_torch_dtype(dtype)


# The dtype each symbolic number lives in here, as a 1-D [1] value (a Python float is double).
SYMBOLIC_DTYPES = {torch.SymInt: ir.DataType.INT64, torch.SymFloat: ir.DataType.DOUBLE,
                   torch.SymBool: ir.DataType.BOOL}


def expected_dtype(g, output: int = 0) -> ir.DataType | None:
    """The dtype torch computed for an output (the first) of the call being translated."""
    meta = g.expected
    if isinstance(meta, (tuple, list)):
        meta = meta[output] if len(meta) > output else None
    if isinstance(meta, torch.Tensor):
        return from_torch_dtype(meta.dtype)
    if isinstance(meta, (torch.SymInt, int)):
        return ir.DataType.INT64
    return None


def expected_rank(g) -> int | None:
    meta = g.expected
    if isinstance(meta, torch.Tensor):
        return meta.dim()
    return None


def cast(g, value: ir.Value, dtype: ir.DataType | torch.dtype) -> ir.Value:
    dtype = onnx_dtype(dtype)
    if value.dtype == dtype:
        return value
    if value.const_value is not None and value.const_value.size <= 16:
        # Small constants are re-made in the right dtype instead of being cast at run time.
        return g.const(torch.from_numpy(value.const_value.numpy().copy()), dtype)
    return g.op("Cast", value, to_i=int(dtype))


def rank(x: ir.Value) -> int:
    if x.shape is None:
        raise ValueError(f"rank of {x.name} is unknown")
    return len(x.shape)


def normalize_axis(axis: int, rank_: int) -> int:
    return axis + rank_ if axis < 0 else axis


def as_tensor(g, x: Any, like: ir.Value | None = None, dtype: ir.DataType | None = None) -> ir.Value:
    """A python scalar (or SymInt value) made into an ONNX value of ``like``'s dtype."""
    if dtype is None and like is not None:
        dtype = like.dtype
    if isinstance(x, ir.Value):
        if x.meta.get("symint") is not None and x.shape is not None and len(x.shape) == 1:
            x = g.op("Squeeze", x, g.const([0]))
            x.dtype = ir.DataType.INT64
        elif x.meta.get("symnumber") and (x.shape is None or len(x.shape) == 1):
            # A float or bool computed from sizes (``n ** 2``, ``round(n * 0.7)``), 1-D [1]
            # where it was computed from a SymInt: one element, as a scalar.
            number_dtype = x.dtype
            x = g.op("Reshape", x, g.const([], ir.DataType.INT64))
            x.dtype = number_dtype
        return cast(g, x, dtype) if dtype is not None else x
    if isinstance(x, int) and not isinstance(x, bool) and dtype in _INTEGER_BITS:
        x = _wrapped(x, dtype)
    return g.const(x, dtype)


# dtype -> (bits, signed): python ints are cast to them the way torch casts its scalars.
_INTEGER_BITS = {ir.DataType.UINT8: (8, False), ir.DataType.INT8: (8, True),
                 ir.DataType.UINT16: (16, False), ir.DataType.INT16: (16, True),
                 ir.DataType.UINT32: (32, False), ir.DataType.INT32: (32, True),
                 ir.DataType.UINT64: (64, False), ir.DataType.INT64: (64, True)}


def _wrapped(value: int, dtype: ir.DataType) -> int:
    """``value`` in ``dtype``'s range modulo 2**bits, as torch converts a scalar operand: a
    uint8 tensor plus -3 adds 253 (which wraps to x - 3)."""
    bits, signed = _INTEGER_BITS[dtype]
    value %= 1 << bits
    return value - (1 << bits) if signed and value >= 1 << (bits - 1) else value


def shape_list(g, items: Sequence[Any]) -> ir.Value:
    """A 1-D int64 value from a list of ints and SymInt values (each a 1-D [1] value)."""
    if all(isinstance(i, int) for i in items):
        return g.const(list(items), ir.DataType.INT64)
    parts = []
    pending: list[int] = []
    for item in items:
        if isinstance(item, int):
            pending.append(item)
            continue
        if pending:
            parts.append(g.const(pending, ir.DataType.INT64))
            pending = []
        parts.append(as_1d(g, item))
    if pending:
        parts.append(g.const(pending, ir.DataType.INT64))
    if len(parts) == 1:
        return parts[0]
    result = g.op("Concat", *parts, axis_i=0)
    result.dtype = ir.DataType.INT64
    return result


def reshape_to_sizes(g, x: ir.Value, shape: ir.Value) -> ir.Value:
    """Reshape ``x`` to ``shape``, a 1-D value of sizes read at run time, none of them -1
    (another tensor's Shape, or sizes joined). From opset 14 with ``allowzero``: Reshape reads
    a 0 in its shape as "keep the input's size there", so an empty axis (a slice that ran out)
    came back as the input's size, or as an error. Opset 13 has no such attribute."""
    return g.op("Reshape", x, shape, allowzero_i=1 if g.opset >= 14 else None)


def as_1d(g, value: ir.Value, dtype: ir.DataType = ir.DataType.INT64) -> ir.Value:
    """A SymInt or scalar value as a 1-D [1] tensor of ``dtype`` (int64; a loop's carried
    float or bool in its own)."""
    if value.shape is not None and len(value.shape) == 1:
        return cast(g, value, dtype)
    out = g.op("Reshape", cast(g, value, dtype), g.const([1]))
    out.dtype = dtype
    return out


def reduce(g, op_type: str, x: ir.Value, axes: Sequence[int] | None, keepdims: bool,
           **attrs) -> ir.Value:
    """``ReduceX`` over ``axes`` (all when None), with axes as input or attribute by opset."""
    axes_as_input = g.opset >= 18 or op_type == "ReduceSum"
    if axes is None or len(axes) == 0:
        return g.op(op_type, x, keepdims_i=int(keepdims), **attrs)
    if axes_as_input:
        return g.op(op_type, x, g.const(list(axes), ir.DataType.INT64), keepdims_i=int(keepdims), **attrs)
    return g.op(op_type, x, axes_i=list(axes), keepdims_i=int(keepdims), **attrs)


def unsqueeze(g, x: ir.Value, axes: Sequence[int]) -> ir.Value:
    return g.op("Unsqueeze", x, g.const(list(axes), ir.DataType.INT64))


def squeeze(g, x: ir.Value, axes: Sequence[int] | None = None) -> ir.Value:
    if axes is None:
        return g.op("Squeeze", x)
    return g.op("Squeeze", x, g.const(list(axes), ir.DataType.INT64))


def split(g, x: ir.Value, sizes: Sequence[int], axis: int) -> tuple[ir.Value, ...]:
    outputs = g.op("Split", x, g.const(list(sizes), ir.DataType.INT64), axis_i=axis,
                   outputs=len(sizes))
    return outputs if isinstance(outputs, tuple) else (outputs,)


def count_at_or_below(g, edges: ir.Value, values: ir.Value) -> ir.Value:
    """For each of the 1-D ``values``, how many of the 1-D ``edges`` are at or below it
    (int64): the group of a position among group ends, the bin of a value among edges."""
    below = g.op("LessOrEqual", g.op("Unsqueeze", edges, g.const([0], ir.DataType.INT64)),
                 g.op("Unsqueeze", values, g.const([1], ir.DataType.INT64)))
    return g.op("ReduceSum", cast(g, below, ir.DataType.INT64),
                g.const([1], ir.DataType.INT64), keepdims_i=0)


def promote_dtype(a: Any, b: Any) -> ir.DataType:
    """torch's type promotion of two operands: values (by dtype and rank) or python scalars."""
    return from_torch_dtype(torch.result_type(_dummy(a), _dummy(b)))


def _dummy(item: Any) -> Any:
    if isinstance(item, ir.Value):
        dtype = _to_torch(item.dtype or ir.DataType.FLOAT)
        zero_dim = item.meta.get("symint") is not None or (item.shape is not None and len(item.shape) == 0)
        return torch.empty((), dtype=dtype) if zero_dim else torch.empty((1,), dtype=dtype)
    if isinstance(item, torch.SymInt):
        return 0
    if isinstance(item, torch.SymFloat):
        return 0.0
    return item


def _to_torch(dtype: ir.DataType) -> torch.dtype:
    from onnx_ir.tensor_adapters import to_torch_dtype

    return to_torch_dtype(dtype)


# Filled tensors up to this many elements are stored as constants; larger ones are made at
# run time by ConstantOfShape so that the file stays small.
CONSTANT_LIMIT = 1024


def filled(g, size, fill, dtype: ir.DataType):
    """A tensor of ``size`` (ints or values) filled with ``fill`` (a number or a value)."""
    from onnx_ir.tensor_adapters import to_torch_dtype

    if isinstance(fill, ir.Value):
        # A symbolic fill (a 1-D [1] SymInt/SymFloat/SymBool value) spread by Expand, which
        # unlike an Add of zeros also takes bools.
        scalar = g.op("Reshape", cast(g, fill, dtype), g.const([], ir.DataType.INT64))
        if not size:
            return scalar
        return g.op("Expand", scalar, shape_list(g, list(size)))
    if all(isinstance(s, int) for s in size):
        count = 1
        for s in size:
            count *= s
        if count <= CONSTANT_LIMIT:
            return g.const(torch.full(tuple(size), fill, dtype=to_torch_dtype(dtype)))
    if dtype == ir.DataType.BFLOAT16 and g.opset < 20:
        # ConstantOfShape takes a bfloat16 value from opset 20 on: fill in float, then Cast.
        return cast(g, filled(g, size, fill, ir.DataType.FLOAT), dtype)
    value = TorchTensor(torch.tensor([fill], dtype=to_torch_dtype(dtype)))
    out = g.op("ConstantOfShape", shape_list(g, list(size)), value=value)
    out.dtype = dtype
    return out


# -- the gamma functions, shared by special.py (lgamma, digamma) and incomplete_gamma.py -------
GAMMA_SHIFT = 8  # lgamma/digamma move x up by this many steps before the asymptotic series


def double_const(g, value: float) -> ir.Value:
    """A double constant: the gamma functions compute in double."""
    return g.const(float(value), ir.DataType.DOUBLE)


def nonpositive_integer(g, x) -> ir.Value:
    return g.op("And", g.op("LessOrEqual", x, double_const(g, 0.0)),
                g.op("Equal", x, g.op("Floor", x)))


def reflected_at_half(g, x):
    """(x < 0.5, y): y = 1 - x below 0.5, else x, so that y >= 0.5."""
    below = g.op("Less", x, double_const(g, 0.5))
    return below, g.op("Where", below, g.op("Sub", double_const(g, 1.0), x), x)


def lgamma_positive(g, y) -> ir.Value:
    """lgamma(y) for y >= 0.5: lgamma(y + 8) - log(y (y+1) ... (y+7)), Stirling's series."""
    logs = [g.op("Log", g.op("Add", y, double_const(g, k)) if k else y)
            for k in range(GAMMA_SHIFT)]
    z = g.op("Add", y, double_const(g, GAMMA_SHIFT))
    inverse = g.op("Reciprocal", z)
    inverse2 = g.op("Mul", inverse, inverse)
    series = double_const(g, -1.0 / 1680)
    for coefficient in (1.0 / 1260, -1.0 / 360, 1.0 / 12):
        series = g.op("Add", g.op("Mul", series, inverse2), double_const(g, coefficient))
    stirling = g.op("Add", g.op("Sub", g.op("Mul", g.op("Sub", z, double_const(g, 0.5)),
                                            g.op("Log", z)), z),
                    g.op("Add", double_const(g, 0.5 * math.log(2 * math.pi)),
                         g.op("Mul", series, inverse)))
    return g.op("Sub", stirling, g.op("Sum", *logs) if len(logs) > 1 else logs[0])


def lgamma_double(g, x) -> ir.Value:
    """lgamma of a double ``x``, poles (0, -1, -2, ... and -inf) at inf."""
    below, y = reflected_at_half(g, x)
    positive = lgamma_positive(g, y)
    # Reflection: lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x).
    sine = g.op("Abs", g.op("Sin", g.op("Mul", x, double_const(g, math.pi))))
    reflected = g.op("Sub", g.op("Log", g.op("Div", double_const(g, math.pi), sine)), positive)
    result = g.op("Where", below, reflected, positive)
    # Poles at 0, -1, -2...; lgamma(-inf) is inf too.
    pole = g.op("Or", nonpositive_integer(g, x), g.op("IsInf", x))
    return g.op("Where", pole, double_const(g, float("inf")), result)


def fail_unless(g, x: ir.Value, axis: int, condition, name: str) -> ir.Value:
    """``x``, through a check that fails the run unless ``condition(size)`` holds, where
    ``size`` is ``x``'s size along ``axis`` as a [1] int64 value and the condition a [1] bool:
    for a graph that matches torch only at some run-time sizes. The check is a Squeeze of a
    [0] tensor when the condition fails; ``name`` names its node."""
    shape = g.op("Shape", x)
    size = g.op("Slice", shape, g.const([axis]), g.const([axis + 1]))
    holds = cast(g, condition(size), ir.DataType.INT64)
    zeros = g.op("ConstantOfShape", holds,
                 value=ir.tensor(torch.zeros(1, dtype=torch.int64).numpy()))
    zeros.dtype = ir.DataType.INT64
    check = g.op("Squeeze", zeros, g.const([0]))
    check.producer().name = g._node_name(name)
    # Slicing the whole axis ties the check to the data (a Reshape to x's own shape would be
    # removed as an identity by MergeReshapes).
    out = g.op("Slice", x, g.const([0]), g.op("Add", size, check), g.const([axis]))
    out.shape = x.shape
    return out


def result_read(g, *indices: int) -> bool:
    """Whether the model reads any of the results ``indices`` of the call being translated
    (or its results as a whole): an unused result can be left out of a translation."""
    node = g.node
    return node is None or any(user.target is not operator.getitem or
                               (user.args[1] in indices and user.users) for user in node.users)
