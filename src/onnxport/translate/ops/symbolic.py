"""Arithmetic on symbolic sizes (SymInts), which live in the graph as 1-D int64 values, and
on symbolic floats (SymFloats), 1-D double values: Python's floats are doubles, and a size
computed from one in float32 can come out one off (arange(0, n * 0.2, 0.2))."""

from __future__ import annotations

import math

import onnx_ir as ir
import torch

from onnxport.errors import TranslationError
from onnxport.translate.ops._helpers import (FLOAT_TYPES, SYMBOLIC_DTYPES, as_1d, cast,
                                             reduce)
from onnxport.translate.registry import translates


def _operand(g, x, dtype):
    if isinstance(x, ir.Value):
        return as_1d(g, x) if dtype == ir.DataType.INT64 else cast(g, x, dtype)
    return g.const([x], dtype)


def _dtype(g, a, b) -> ir.DataType:
    """Double when either side is a float (a SymFloat: sym_float(size) * 1.5, as interpolate's
    recompute_scale_factor makes), else int64 (sizes)."""
    floats = isinstance(g.expected, (torch.SymFloat, float)) or any(
        isinstance(x, float) or (isinstance(x, ir.Value) and x.dtype in FLOAT_TYPES)
        for x in (a, b))
    return ir.DataType.DOUBLE if floats else ir.DataType.INT64


def _symbolic(onnx_op: str, *names: str):
    def translation(g, a, b):
        dtype = _dtype(g, a, b)
        return g.op(onnx_op, _operand(g, a, dtype), _operand(g, b, dtype))

    translation.__name__ = f"sym_{onnx_op.lower()}"
    translation.__doc__ = f"{names[0]}(SymInt a, SymInt b) -> SymInt"
    translates(*names)(translation)


_symbolic("Add", "_operator::add")
_symbolic("Sub", "_operator::sub")
_symbolic("Mul", "_operator::mul")
_symbolic("Max", "torch::sym_max")
_symbolic("Min", "torch::sym_min")
_symbolic("Equal", "_operator::eq")
_symbolic("Less", "_operator::lt")
_symbolic("Greater", "_operator::gt")
_symbolic("LessOrEqual", "_operator::le")
_symbolic("GreaterOrEqual", "_operator::ge")


def _boolean(onnx_op: str, name: str):
    def translation(g, a, b):
        return g.op(onnx_op, _operand(g, a, ir.DataType.BOOL), _operand(g, b, ir.DataType.BOOL))

    translation.__name__ = f"sym_{onnx_op.lower()}"
    translation.__doc__ = f"{name}(SymBool a, SymBool b) -> SymBool"
    translates(name)(translation)


# torch.export's runtime assertions combine SymBools (and they emit nothing), and scripted
# code's conditions (a loop's ``i + 1 < n and not broken``); every node needs a translation.
_boolean("And", "_operator::and_")
_boolean("Or", "_operator::or_")
_boolean("Xor", "_operator::xor")


@translates("torch::sym_ite")
def sym_ite(g, condition, then, otherwise):
    """sym_ite(SymBool b, SymInt t, SymInt f) -> SymInt"""
    dtype = _dtype(g, then, otherwise)
    return g.op("Where", _operand(g, condition, ir.DataType.BOOL), _operand(g, then, dtype),
                _operand(g, otherwise, dtype))


@translates("_operator::ne")
def sym_ne(g, a, b):
    """ne(SymInt a, SymInt b) -> SymBool"""
    dtype = _dtype(g, a, b)
    return g.op("Not", g.op("Equal", _operand(g, a, dtype), _operand(g, b, dtype)))


@translates("torch::sym_not")
def sym_not(g, a):
    """sym_not(SymBool a) -> SymBool"""
    return g.op("Not", _operand(g, a, ir.DataType.BOOL))


@translates("_operator::floordiv")
def sym_floordiv(g, a, b):
    """floordiv(SymInt a, SymInt b) -> SymInt  (sizes are non-negative: ONNX Div truncates;
    floats are floored)"""
    dtype = _dtype(g, a, b)
    quotient = g.op("Div", _operand(g, a, dtype), _operand(g, b, dtype))
    return g.op("Floor", quotient) if dtype == ir.DataType.DOUBLE else quotient


@translates("_operator::mod")
def sym_mod(g, a, b):
    """mod(SymInt a, SymInt b) -> SymInt  (Python's: the sign of b, floats too)"""
    dtype = _dtype(g, a, b)
    a, b = _operand(g, a, dtype), _operand(g, b, dtype)
    if dtype == ir.DataType.INT64:
        return g.op("Mod", a, b)
    return g.op("Sub", a, g.op("Mul", g.op("Floor", g.op("Div", a, b)), b))


@translates("_operator::truediv")
def sym_truediv(g, a, b):
    """truediv(SymInt a, SymInt b) -> SymFloat"""
    return g.op("Div", _operand(g, a, ir.DataType.DOUBLE), _operand(g, b, ir.DataType.DOUBLE))


@translates("_operator::pow")
def sym_pow(g, a, b):
    """pow(SymInt a, SymInt b) -> SymInt  (numel() of a square: s0**2); a float or a negative
    exponent gives a SymFloat"""
    if isinstance(g.expected, (torch.SymInt, int)):
        if isinstance(b, int) and 0 <= b <= 4:  # (exact, and no kernel question: Muls)
            result = _operand(g, a, ir.DataType.INT64) if b else g.const([1], ir.DataType.INT64)
            for _ in range(b - 1):
                result = g.op("Mul", result, _operand(g, a, ir.DataType.INT64))
            return result
        return g.op("Pow", _operand(g, a, ir.DataType.INT64), _operand(g, b, ir.DataType.INT64))
    return g.op("Pow", _operand(g, a, ir.DataType.DOUBLE), _operand(g, b, ir.DataType.DOUBLE))


@translates("_operator::neg")
def sym_neg(g, a):
    """neg(SymInt a) -> SymInt"""
    return g.op("Neg", _operand(g, a, ir.DataType.INT64))


@translates("torch::sym_float")
def sym_float(g, a):
    """sym_float(SymInt a) -> SymFloat"""
    return _operand(g, a, ir.DataType.DOUBLE)


@translates("torch::sym_int", "math::floor", "math::trunc", "aten::floor.float")
def sym_int(g, a):
    """sym_int(SymFloat a) -> SymInt"""
    if isinstance(a, ir.Value) and a.dtype != ir.DataType.INT64:
        return g.op("Cast", g.op("Floor", a), to_i=int(ir.DataType.INT64))
    return _operand(g, a, ir.DataType.INT64)


@translates("math::ceil", "aten::ceil.float")
def sym_ceil(g, a):
    """ceil(SymFloat a) -> SymInt"""
    return g.op("Cast", g.op("Ceil", _operand(g, a, ir.DataType.DOUBLE)), to_i=int(ir.DataType.INT64))


@translates("aten::sym_storage_offset")
def sym_storage_offset(g, self):
    """sym_storage_offset(Tensor self) -> SymInt

    ONNX values have no storage: torch.export reads the offsets of views (tensor_split at
    tensor indices) only for its runtime assertions, which emit nothing. Left to the
    decomposer this op re-emits itself without end."""
    return g.const([0], ir.DataType.INT64)


@translates("aten::sym_stride", "aten::stride")
def sym_stride(g, self, dim):
    """sym_stride.int(Tensor self, int dim) -> SymInt

    ``x.stride(d)`` of a tensor laid out contiguously (as torch ran it: an input, or what a
    contiguous op made): the product of the sizes after ``d``, from the sizes at run time.
    Another layout (a transpose's view) has strides ONNX values do not have: refused.
    Left to the decomposer this op re-emits itself without end."""
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    fake = g.arguments[0] if g.arguments else None
    if not isinstance(fake, torch.Tensor) or not isinstance(dim, int):
        raise TranslationError("stride() of a value whose layout the capture does not know")
    axis = dim + fake.dim() if dim < 0 else dim
    trailing = math.prod(fake.shape[axis + 1:])
    if not statically_known_true(fake.stride(axis) == trailing):
        raise TranslationError(
            f"stride({dim}) of a tensor not laid out contiguously (stride "
            f"{fake.stride(axis)}, contiguous {trailing}): ONNX values have no strides. Read "
            "the sizes instead (x.size(), which the file computes at run time), or call "
            ".contiguous() first")
    shape = g.op("Shape", self)
    shape.dtype = ir.DataType.INT64
    sizes = g.op("Slice", shape, g.const([axis + 1]), g.const([fake.dim()]), g.const([0]))
    sizes.dtype = ir.DataType.INT64
    product = reduce(g, "ReduceProd", sizes, [0], keepdims=True)
    product.dtype = ir.DataType.INT64
    return product


@translates("aten::item", "aten::_local_scalar_dense", "aten::ScalarImplicit")
def item(g, self):
    """item(Tensor self) -> Scalar

    ScalarImplicit, the TorchScript graph's number from a 0-d tensor (a traced size passed as a
    float bound of arange), is the same read.
    A tensor's one value as a symbolic scalar: a 1-D [1] value like every SymInt (int64) or
    SymFloat (float) in the graph."""
    dtype = SYMBOLIC_DTYPES.get(type(g.expected))
    if dtype is None:
        dtype = ir.DataType.INT64 if self.dtype in _INTEGER_TYPES else (
            ir.DataType.BOOL if self.dtype == ir.DataType.BOOL else ir.DataType.DOUBLE)
    return cast(g, g.op("Reshape", self, g.const([1])), dtype)


_INTEGER_TYPES = {ir.DataType.INT64, ir.DataType.INT32, ir.DataType.INT16, ir.DataType.INT8,
                  ir.DataType.UINT8}


# Scripted code's math on sizes: ATen's scalar overloads, given symbols by the fake run
# (capture/torchscript/fake_calls.SCALAR_TWINS), in doubles as Python computes them.
@translates("aten::pow.float", "aten::pow.int", "aten::pow.int_float", "aten::pow.float_int")
def scalar_pow(g, a, b):
    """pow.float(float a, float b) -> float (each overload: a float)"""
    return g.op("Pow", _operand(g, a, ir.DataType.DOUBLE), _operand(g, b, ir.DataType.DOUBLE))


def _unary_double(onnx_op: str, *names: str):
    def translation(g, a):
        return g.op(onnx_op, _operand(g, a, ir.DataType.DOUBLE))

    translation.__name__ = f"scalar_{onnx_op.lower()}"
    translation.__doc__ = f"{names[0]}(Scalar a) -> float"
    translates(*names)(translation)


_unary_double("Sqrt", "aten::sqrt.int", "aten::sqrt.float", "torch::_sym_sqrt")
_unary_double("Log", "aten::log.int", "aten::log.float")
_unary_double("Exp", "aten::exp.int", "aten::exp.float")
_unary_double("Round", "aten::round.float")  # (half to even, as TorchScript's)
_unary_double("Identity", "aten::round.int")
_unary_double("Sin", "aten::sin.int", "aten::sin.float")
_unary_double("Cos", "aten::cos.int", "aten::cos.float")
_unary_double("Tanh", "aten::tanh.int", "aten::tanh.float")


@translates("aten::floor.int", "aten::ceil.int")
def scalar_int_rounding(g, a):
    """floor.int(int a) -> int (an int is its own floor and ceiling)"""
    return _operand(g, a, ir.DataType.INT64)


@translates("aten::log.int_int", "aten::log.float_float", "aten::log.int_float",
            "aten::log.float_int")
def scalar_log_base(g, a, b):
    """log.int_int(int a, int b) -> float (math.log(a, base))"""
    return g.op("Div", g.op("Log", _operand(g, a, ir.DataType.DOUBLE)),
                g.op("Log", _operand(g, b, ir.DataType.DOUBLE)))


@translates("aten::log10.int", "aten::log10.float")
def scalar_log10(g, a):
    """log10.float(float a) -> float"""
    return g.op("Div", g.op("Log", _operand(g, a, ir.DataType.DOUBLE)),
                g.const([math.log(10.0)], ir.DataType.DOUBLE))


@translates("_operator::abs", "prim::abs.int", "prim::abs.float", "aten::fabs.float")
def sym_abs(g, a):
    """abs(SymInt a) -> SymInt (a SymFloat's, and fabs: a SymFloat)"""
    return g.op("Abs", _operand(g, a, _dtype(g, a, 0)))


@translates("builtins::round")
def sym_round(g, a, ndigits=None):
    """round(SymFloat a) -> SymInt (half to even, as Python's)"""
    if ndigits is not None:
        raise TranslationError("round() of a symbolic float to digits is not translated; "
                               "round(x) to an int is")
    return g.op("Cast", g.op("Round", _operand(g, a, ir.DataType.DOUBLE)),
                to_i=int(ir.DataType.INT64))
