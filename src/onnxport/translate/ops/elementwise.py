"""Elementwise ops: unary and binary families from factories, activations by hand."""

from __future__ import annotations

import math

import onnx_ir as ir
import torch

from onnxport.translate.ops._helpers import (
    FLOAT_TYPES, as_tensor, cast, expected_dtype, promote_dtype,
)
from onnxport.translate.registry import translates


# -- unary ----------------------------------------------------------------------------------
# ONNX defines these for floats only; of an integer tensor torch's result is the tensor.
_IDENTITY_ON_INTEGERS = {"Floor", "Ceil", "Round"}


def _unary(onnx_op: str, *names: str, since_opset: int = 1, **attrs):
    def translation(g, self, *_, **__):
        out = expected_dtype(g)
        if self.dtype not in FLOAT_TYPES:
            if onnx_op in _IDENTITY_ON_INTEGERS:
                return g.op("Identity", self)
            if out in FLOAT_TYPES:
                # torch computes exp, sqrt, sigmoid... of integers in the default float dtype.
                self = cast(g, self, out)
            elif onnx_op == "IsNaN":
                self = cast(g, self, ir.DataType.FLOAT)  # (no integer is nan)
        return g.op(onnx_op, self, **attrs)

    translation.__name__ = onnx_op.lower()
    translation.__doc__ = f"{names[0]}(Tensor self) -> Tensor  (ONNX {onnx_op})"
    translates(*names, since_opset=since_opset)(translation)


for _op, _names in [
    ("Sigmoid", ("aten::sigmoid", "aten::sigmoid_")),
    ("Tanh", ("aten::tanh", "aten::tanh_")),
    ("Exp", ("aten::exp",)),
    ("Log", ("aten::log",)),
    ("Sqrt", ("aten::sqrt",)),
    ("Neg", ("aten::neg",)),
    ("Abs", ("aten::abs",)),
    ("Reciprocal", ("aten::reciprocal",)),
    ("Sin", ("aten::sin",)),
    ("Cos", ("aten::cos",)),
    ("Tan", ("aten::tan",)),
    ("Asin", ("aten::asin",)),
    ("Acos", ("aten::acos",)),
    ("Atan", ("aten::atan",)),
    ("Sinh", ("aten::sinh",)),
    ("Cosh", ("aten::cosh",)),
    ("Erf", ("aten::erf",)),
    ("Floor", ("aten::floor",)),
    ("Ceil", ("aten::ceil",)),
    ("IsNaN", ("aten::isnan",)),
    ("Identity", ("aten::positive",)),
]:
    _unary(_op, *_names)

_unary("HardSwish", "aten::hardswish", "aten::hardswish_", since_opset=14)
_unary("HardSigmoid", "aten::hardsigmoid", "aten::hardsigmoid_", alpha_f=1.0 / 6, beta_f=0.5)
_unary("Mish", "aten::mish", "aten::mish_", since_opset=18)


@translates("aten::hardswish", "aten::hardswish_")
def hardswish_before_14(g, self):
    """hardswish(Tensor self) -> Tensor"""
    return g.op("Mul", self, g.op("HardSigmoid", self, alpha_f=1.0 / 6, beta_f=0.5))


@translates("aten::logical_not")
def logical_not(g, self):
    """logical_not(Tensor self) -> Tensor"""
    # ONNX Not takes bool only; torch takes any dtype (nonzero is true).
    return g.op("Not", cast(g, self, ir.DataType.BOOL))


@translates("aten::bitwise_not")
def bitwise_not(g, self):
    """bitwise_not(Tensor self) -> Tensor"""
    if self.dtype == ir.DataType.BOOL:
        return g.op("Not", self)
    if g.opset >= 18:
        return g.op("BitwiseNot", self)
    # Before BitwiseNot: ~x == -1 - x in two's complement, and 255 - x for uint8.
    all_ones = 255 if self.dtype == ir.DataType.UINT8 else -1
    return g.op("Sub", g.const(all_ones, self.dtype), self)


@translates("aten::sign")
def sign(g, self):
    """sign(Tensor self) -> Tensor"""
    result = g.op("Sign", self)
    if self.dtype in FLOAT_TYPES:
        # torch's sign of NaN is 0 ((0 < x) - (x < 0)); ONNX Runtime's Sign keeps the NaN.
        result = g.op("Where", g.op("IsNaN", self), g.const(0.0, self.dtype), result)
    return result


@translates("aten::trunc", "aten::fix")
def trunc(g, self):
    """trunc(Tensor self) -> Tensor"""
    # Without it torch decomposes to prims::trunc, which has no translation.
    if self.dtype not in FLOAT_TYPES:
        return g.op("Identity", self)
    # Floor above zero, Ceil elsewhere (NaN, +-0 and the negatives: -0.3 gives -0.0). The
    # negatives are Where's second branch: ONNX Runtime's Where turns a -0.0 taken from its
    # first branch into +0.0.
    return g.op("Where", g.op("Greater", self, g.const(0.0, self.dtype)),
                g.op("Floor", self), g.op("Ceil", self))


@translates("aten::round")
def round_(g, self, *, decimals=0):
    """round.decimals(Tensor self, *, int decimals) -> Tensor"""
    if self.dtype not in FLOAT_TYPES:
        return g.op("Identity", self)  # an integer is already round
    if decimals == 0:
        return g.op("Round", self)
    # As torch's kernel: scale by a power of ten, round half to even, scale back.
    if decimals > 0:
        scale = g.const(10.0 ** decimals, self.dtype)
        return g.op("Div", g.op("Round", g.op("Mul", self, scale)), scale)
    scale = g.const(10.0 ** -decimals, self.dtype)
    return g.op("Mul", g.op("Round", g.op("Div", self, scale)), scale)


@translates("aten::rsqrt")
def rsqrt(g, self):
    """rsqrt(Tensor self) -> Tensor"""
    out = expected_dtype(g)
    x = cast(g, self, out) if out in FLOAT_TYPES else self  # of integers: in float
    return g.op("Reciprocal", g.op("Sqrt", x))


@translates("aten::silu", "aten::silu_")
def silu(g, self):
    """silu(Tensor self) -> Tensor"""
    return g.op("Mul", self, g.op("Sigmoid", self))


@translates("aten::gelu", "aten::gelu_")
def gelu(g, self, approximate="none"):
    """gelu(Tensor self, *, str approximate='none') -> Tensor"""
    if g.opset >= 20:
        return g.op("Gelu", self, approximate_s=approximate)
    if approximate == "tanh":
        # 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
        cube = g.op("Mul", g.op("Mul", self, self), self)
        inner = g.op("Add", self, g.op("Mul", cube, g.const(0.044715, self.dtype)))
        tanh = g.op("Tanh", g.op("Mul", inner, g.const(math.sqrt(2 / math.pi), self.dtype)))
        half_x = g.op("Mul", self, g.const(0.5, self.dtype))
        return g.op("Mul", half_x, g.op("Add", tanh, g.const(1.0, self.dtype)))
    # Div(x, sqrt 2) -> Erf -> Add 1 -> Mul x -> Mul 0.5: the exact pattern ONNX Runtime's
    # GeluFusion recognizes, so the five nodes run as one Gelu kernel.
    erf = g.op("Erf", g.op("Div", self, g.const(math.sqrt(2), self.dtype)))
    scaled = g.op("Mul", self, g.op("Add", erf, g.const(1.0, self.dtype)))
    return g.op("Mul", scaled, g.const(0.5, self.dtype))


@translates("aten::hardtanh", "aten::hardtanh_")
def hardtanh(g, self, min_val=-1.0, max_val=1.0):
    """hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor"""
    return g.op("Clip", self, g.const(min_val, self.dtype), g.const(max_val, self.dtype))


@translates("aten::relu", "aten::relu_")
def relu(g, self):
    """relu(Tensor self) -> Tensor"""
    if self.dtype in FLOAT_TYPES:
        return g.op("Relu", self)
    # Relu takes integers only from opset 14, and ONNX Runtime has no int64 kernel for it at
    # most opsets; max(x, 0) is the same function with kernels for every integer dtype.
    return g.op("Max", self, g.const(0, self.dtype))


@translates("aten::relu6", "aten::relu6_")
def relu6(g, self):
    """relu6(Tensor self) -> Tensor"""
    return hardtanh(g, self, 0.0, 6.0)


@translates("aten::clamp", "aten::clamp_", "aten::clip")
def clamp(g, self, min=None, max=None):
    """clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor"""
    dtype = expected_dtype(g) or self.dtype
    x = cast(g, self, dtype)
    bounds = [b for b in (min, max) if b is not None]
    if any(_is_tensor_bound(b) for b in bounds):
        # clamp.Tensor: Clip takes scalar bounds only, so elementwise bounds are Max then Min
        # (torch's order: a max below the min wins).
        if min is not None:
            x = g.op("Max", x, as_tensor(g, min, dtype=dtype))
        if max is not None:
            x = g.op("Min", x, as_tensor(g, max, dtype=dtype))
        return x
    low = None if min is None else as_tensor(g, min, dtype=dtype)
    high = None if max is None else as_tensor(g, max, dtype=dtype)
    if low is None and high is not None:
        return g.op("Min", x, high)  # Clip's min is positional: without one, use Min
    return g.op("Clip", x, low, high)


def _is_tensor_bound(bound) -> bool:
    """A bound that is a tensor of some rank (a SymInt value is a scalar, 1-D [1] in the graph)."""
    return isinstance(bound, ir.Value) and bound.meta.get("symint") is None and (
        bound.shape is None or len(bound.shape) > 0)


@translates("aten::clamp_min", "aten::clamp_min_")
def clamp_min(g, self, min):
    """clamp_min(Tensor self, Scalar min) -> Tensor"""
    return g.op("Max", self, as_tensor(g, min, self))


@translates("aten::clamp_max", "aten::clamp_max_")
def clamp_max(g, self, max):
    """clamp_max(Tensor self, Scalar max) -> Tensor"""
    return g.op("Min", self, as_tensor(g, max, self))


@translates("aten::leaky_relu", "aten::leaky_relu_")
def leaky_relu(g, self, negative_slope=0.01):
    """leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor"""
    return g.op("LeakyRelu", self, alpha_f=negative_slope)


@translates("aten::elu", "aten::elu_")
def elu(g, self, alpha=1.0, scale=1.0, input_scale=1.0):
    """elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor"""
    if scale == 1.0 and input_scale == 1.0:
        return g.op("Elu", self, alpha_f=alpha)
    # torch: scale * x where x > 0, else scale * alpha * (exp(input_scale * x) - 1); the
    # input scale applies to the negative side only.
    if input_scale == 1.0:
        return g.op("Mul", g.op("Elu", self, alpha_f=alpha), g.const(scale, self.dtype))
    x = g.op("Mul", self, g.const(input_scale, self.dtype))
    negative = g.op("Elu", x, alpha_f=alpha)
    out = g.op("Where", g.op("Greater", self, g.const(0.0, self.dtype)), self, negative)
    return g.op("Mul", out, g.const(scale, self.dtype)) if scale != 1.0 else out


@translates("aten::selu", "aten::selu_")
def selu(g, self):
    """selu(Tensor self) -> Tensor"""
    return g.op("Selu", self)


@translates("aten::softplus")
def softplus(g, self, beta=1.0, threshold=20.0):
    """softplus(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor"""
    scaled = self if beta == 1.0 else g.op("Mul", self, g.const(beta, self.dtype))
    out = g.op("Softplus", scaled)
    if beta != 1.0:
        out = g.op("Div", out, g.const(beta, self.dtype))
    if threshold >= 20:
        # Above such a threshold softplus(x) and x differ by under exp(-threshold) / beta.
        return out
    # torch returns x itself where beta * x > threshold (the linear regime).
    return g.op("Where", g.op("Greater", scaled, g.const(threshold, self.dtype)), self, out)


@translates("aten::prelu")
def prelu(g, self, weight):
    """prelu(Tensor self, Tensor weight) -> Tensor"""
    if self.shape is not None and len(self.shape) > 2 and weight.shape is not None and len(weight.shape) == 1:
        weight = g.op("Reshape", weight, g.const([-1] + [1] * (len(self.shape) - 2)))
    elif self.shape is not None and len(self.shape) == 0:
        # A 0-d input keeps its rank: its one weight must not broadcast it to [1].
        weight = g.op("Reshape", weight, g.const([], ir.DataType.INT64))
    return g.op("PRelu", self, weight)


@translates("aten::expm1", "prims::expm1")
def expm1(g, self):
    """expm1(Tensor self) -> Tensor"""
    x = _float_of(g, self)
    # Exp(x) - 1 loses the digits of a small x; Kahan's (u - 1) * x / log(u) with u = exp(x)
    # keeps them. Where u rounds to 1 the answer is x; where it is 0 or inf, u - 1.
    u = g.op("Exp", x)
    u_minus_1 = g.op("Sub", u, g.const(1.0, x.dtype))
    corrected = g.op("Mul", u_minus_1, g.op("Div", x, g.op("Log", u)))
    edge = g.op("Or", g.op("Equal", u, g.const(0.0, x.dtype)),
                g.op("Equal", u, g.const(float("inf"), x.dtype)))
    return g.op("Where", g.op("Equal", u, g.const(1.0, x.dtype)), x,
                g.op("Where", edge, u_minus_1, corrected))


@translates("aten::log1p", "prims::log1p")
def log1p(g, self):
    """log1p(Tensor self) -> Tensor"""
    x = _float_of(g, self)
    # Log(1 + x) loses the digits of a small x; log(u) * x / (u - 1) with u = 1 + x keeps
    # them. Where u rounds to 1 the answer is x (-0.0 kept: torch's log1p(-0.0) is -0.0);
    # where it is inf, log(u). x goes in Where's second branch: ONNX Runtime's Where turns a
    # -0.0 taken from its first branch into +0.0 (and its optimizer swaps the branches of a
    # Where over Not(c), hence |u - 1| > 0 rather than Not(u == 1)).
    one = g.const(1.0, x.dtype)
    u = g.op("Add", x, one)
    log_u = g.op("Log", u)
    u_minus_1 = g.op("Sub", u, one)
    corrected = g.op("Mul", log_u, g.op("Div", x, u_minus_1))
    away_from_one = g.op("Greater", g.op("Abs", u_minus_1), g.const(0.0, x.dtype))
    return g.op("Where", away_from_one,
                g.op("Where", g.op("Equal", u, g.const(float("inf"), x.dtype)), log_u, corrected),
                x)


def _float_of(g, x):
    """``x`` in the float dtype torch computes a float function of it in."""
    out = expected_dtype(g)
    return cast(g, x, out) if x.dtype not in FLOAT_TYPES and out in FLOAT_TYPES else x


@translates("aten::celu", "aten::celu_")
def celu(g, self, alpha=1.0):
    """celu(Tensor self, Scalar alpha=1.) -> Tensor"""
    if self.dtype == ir.DataType.FLOAT:
        return g.op("Celu", self, alpha_f=alpha)
    # ONNX Celu takes float32 only; celu(x, a) = a * elu(x / a).
    scale = g.const(float(alpha), self.dtype)
    return g.op("Mul", g.op("Elu", g.op("Div", self, scale), alpha_f=1.0), scale)


@translates("aten::log_sigmoid")
def log_sigmoid(g, self):
    """log_sigmoid(Tensor self) -> Tensor"""
    # log(sigmoid(x)) = -softplus(-x); Softplus is computed without overflow.
    return g.op("Neg", g.op("Softplus", g.op("Neg", self)))


@translates("aten::log_sigmoid_forward")
def log_sigmoid_forward(g, self):
    """log_sigmoid_forward(Tensor self) -> (Tensor output, Tensor buffer)"""
    buffer = g.expected[1]  # only read by the backward; empty on CPU
    from onnx_ir.tensor_adapters import to_torch_dtype

    return log_sigmoid(g, self), g.const(torch.zeros(
        [d if isinstance(d, int) else 0 for d in buffer.shape], dtype=to_torch_dtype(self.dtype)))


# -- binary ---------------------------------------------------------------------------------
def _operands(g, self, other, dtype=None):
    """Both operands as values of the computation dtype (torch's promotion)."""
    if dtype is None:
        dtype = promote_dtype(self, other)
    return as_tensor(g, self, dtype=dtype), as_tensor(g, other, dtype=dtype)


# On bools (torch keeps bool for these) the arithmetic op is a logical one.
_ON_BOOLS = {"Mul": "And", "Max": "Or", "Min": "And", "Add": "Or"}


def _binary(onnx_op: str, *names: str, result_is_bool: bool = False):
    def translation(g, self, other, *_, **__):
        dtype = None if result_is_bool else expected_dtype(g)
        a, b = _operands(g, self, other, dtype)
        if result_is_bool and a.dtype == ir.DataType.BOOL and onnx_op != "Equal":
            # Less/Greater... take numbers only: order bools as 0 and 1.
            a, b = cast(g, a, ir.DataType.INT32), cast(g, b, ir.DataType.INT32)
        if dtype == ir.DataType.BOOL and onnx_op in _ON_BOOLS:
            return g.op(_ON_BOOLS[onnx_op], a, b)
        return g.op(onnx_op, a, b)

    translation.__name__ = onnx_op.lower()
    translation.__doc__ = f"{names[0]}(Tensor self, Tensor other) -> Tensor  (ONNX {onnx_op})"
    translates(*names)(translation)


for _op, _names in [
    ("Mul", ("aten::mul", "aten::mul_", "aten::multiply")),
    ("Max", ("aten::maximum", "aten::max.other")),
    ("Min", ("aten::minimum", "aten::min.other")),
]:
    _binary(_op, *_names)


@translates("aten::pow", "aten::pow_")
def pow_(g, self, exponent, *_, **__):
    """pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor"""
    a, b = _operands(g, self, exponent, expected_dtype(g))
    result = g.op("Pow", a, b)
    if (a.dtype in FLOAT_TYPES or a.dtype == ir.DataType.BOOL
            or isinstance(exponent, (int, float)) and exponent >= 0
            or isinstance(self, (int, float)) and self != 0):
        return result
    # torch's integer 0 ** -n is 0; ONNX Runtime goes through double and casts inf to the
    # type's minimum. (Other bases agree: 1 and -1 give +-1, the rest truncate to 0.)
    zero = g.const(0, a.dtype)
    return g.op("Where", g.op("And", g.op("Equal", a, zero), g.op("Less", b, zero)), zero, result)

for _op, _names in [
    ("Equal", ("aten::eq",)),
    ("Less", ("aten::lt", "aten::less")),
    ("LessOrEqual", ("aten::le", "aten::less_equal")),
    ("Greater", ("aten::gt", "aten::greater")),
    ("GreaterOrEqual", ("aten::ge", "aten::greater_equal")),
]:
    _binary(_op, *_names, result_is_bool=True)


@translates("aten::fmax", "aten::fmin")
def fmax(g, self, other):
    """fmax(Tensor self, Tensor other) -> Tensor"""
    a, b = _operands(g, self, other, expected_dtype(g))
    out = g.op("Max" if "fmax" in g.provenance.aten else "Min", a, b)
    if a.dtype not in FLOAT_TYPES:
        return out
    # Unlike Max/Min (and maximum/minimum), fmax/fmin ignore a NaN operand.
    out = g.op("Where", g.op("IsNaN", a), b, out)
    return g.op("Where", g.op("IsNaN", b), a, out)


@translates("aten::ne", "aten::not_equal")
def ne(g, self, other):
    """ne.Tensor(Tensor self, Tensor other) -> Tensor"""
    a, b = _operands(g, self, other)
    return g.op("Not", g.op("Equal", a, b))


def _bitwise_by_bits(g, logical_op: str, a, b, dtype):
    """``logical_op`` (And/Or/Xor) of integers bit by bit, before ONNX's Bitwise* ops: the
    operands go to uint64 (a Cast wraps modulo 2**64, so two's complement bits are kept), a
    bit axis of the dtype's width is split off with BitShift (the only bit op ONNX has then),
    the bits are combined as bools, and the bits of the result are summed back at their
    places; the Cast to ``dtype`` wraps the sum as two's complement again. (About 20 nodes
    and a 64-times larger intermediate for int64.)"""
    if dtype not in _BITS:
        raise NotImplementedError(f"bitwise {logical_op.lower()} of {dtype} values")
    width = _BITS[dtype]
    uint64 = ir.DataType.UINT64
    last = g.const([-1], ir.DataType.INT64)
    places = g.const([(1 << k) - (1 << 64 if k == 63 else 0) for k in range(width)],
                     ir.DataType.INT64)

    def bits(x):
        x = g.op("Unsqueeze", cast(g, x, uint64), last)
        # Bit k to the top (left by 63 - k), then down to bit 0 (right by 63): bit k alone.
        top = g.op("BitShift", x, g.const([63 - k for k in range(width)], uint64),
                   direction_s="LEFT")
        return cast(g, g.op("BitShift", top, g.const(63, uint64), direction_s="RIGHT"),
                    ir.DataType.BOOL)

    # The bits back at their places by a MatMul with 2**k, exact in int64 (wrapping at bit 63)
    # where ONNX Runtime's ReduceSum of int64 rounds through double.
    combined = cast(g, g.op(logical_op, bits(a), bits(b)), ir.DataType.INT64)
    return cast(g, g.op("MatMul", combined, places), dtype)


def _logical(onnx_op: str, bitwise_op: str, *names: str):
    def translation(g, self, other):
        dtype = expected_dtype(g)
        if dtype == ir.DataType.BOOL:
            a, b = _operands(g, self, other, ir.DataType.BOOL)
            return g.op(onnx_op, a, b)
        a, b = _operands(g, self, other, dtype)
        if g.opset < 18:  # ONNX has no bitwise op on integers before 18
            return _bitwise_by_bits(g, onnx_op, a, b, dtype)
        return g.op(bitwise_op, a, b)

    translation.__name__ = onnx_op.lower()
    translation.__doc__ = f"{names[0]}(Tensor self, Tensor other) -> Tensor  (ONNX {onnx_op})"
    translates(*names)(translation)


_logical("And", "BitwiseAnd", "aten::__and__", "aten::bitwise_and", "aten::logical_and")
_logical("Or", "BitwiseOr", "aten::__or__", "aten::bitwise_or", "aten::logical_or")
_logical("Xor", "BitwiseXor", "aten::__xor__", "aten::bitwise_xor", "aten::logical_xor")


_BITS = {ir.DataType.INT8: 8, ir.DataType.INT16: 16, ir.DataType.INT32: 32,
         ir.DataType.INT64: 64, ir.DataType.UINT8: 8, ir.DataType.UINT16: 16,
         ir.DataType.UINT32: 32, ir.DataType.UINT64: 64}
_UNSIGNED = {ir.DataType.UINT8, ir.DataType.UINT16, ir.DataType.UINT32, ir.DataType.UINT64}


@translates("aten::__lshift__", "aten::__ilshift__", "aten::bitwise_left_shift",
            "aten::bitwise_left_shift_", "aten::__rshift__", "aten::__irshift__",
            "aten::bitwise_right_shift", "aten::bitwise_right_shift_")
def bitwise_shift(g, self, other):
    """bitwise_left_shift.Tensor(Tensor self, Tensor other) -> Tensor

    Also __lshift__/__rshift__ and the right shifts. As torch: a shift by a negative amount
    or by the width or more gives 0 (the sign, -1 or 0, for a right shift of a signed int)."""
    left = "lshift" in g.provenance.aten or "left_shift" in g.provenance.aten
    x, amount = _operands(g, self, other, expected_dtype(g))
    bits = _BITS.get(x.dtype)
    if bits is None:
        raise NotImplementedError(f"bit shifts of {x.dtype} (torch shifts integers only)")
    # Comparisons and Where in int64: ONNX Runtime has few kernels for the narrow ints.
    count = cast(g, amount, ir.DataType.INT64)
    in_range = g.op("And", g.op("GreaterOrEqual", count, g.const(0, ir.DataType.INT64)),
                    g.op("Less", count, g.const(bits, ir.DataType.INT64)))
    if x.dtype in _UNSIGNED:
        # ONNX BitShift is for unsigned integers only; a shift by the width or more is
        # undefined in it (as in C++), hence the Where on both sides.
        safe_amount = cast(g, g.op("Where", in_range, count, g.const(0, ir.DataType.INT64)),
                           x.dtype)
        shifted = g.op("BitShift", x, safe_amount, direction_s="LEFT" if left else "RIGHT")
        zero = g.const(0, ir.DataType.INT64)
        return cast(g, g.op("Where", in_range, cast(g, shifted, ir.DataType.INT64), zero),
                    x.dtype)
    if left:
        return _signed_left_shift(g, x, count, bits, in_range)
    return _signed_right_shift(g, x, count, bits)


def _powers_of_two(g, count, bits, below, dtype):
    """2 ** count in ``dtype`` from a table of 2**0 .. 2**(below - 1), where 2**(bits - 1)
    is the lowest value of two's complement; counts outside the table read 2**0."""
    table = [1 << k for k in range(below)]
    if below == bits:
        table[-1] = -(1 << (bits - 1))
    usable = g.op("And", g.op("GreaterOrEqual", count, g.const(0, ir.DataType.INT64)),
                  g.op("Less", count, g.const(below, ir.DataType.INT64)))
    position = g.op("Where", usable, count, g.const(0, ir.DataType.INT64))
    return g.op("Gather", g.const(table, dtype), position, axis_i=0)


def _signed_left_shift(g, x, count, bits, in_range):
    """x << s = x * 2**s, wrapped to the width as torch's two's complement wraps it."""
    wide = cast(g, x, ir.DataType.INT64)
    product = g.op("Mul", wide, _powers_of_two(g, count, bits, bits, ir.DataType.INT64))
    if bits < 64:
        # Products of narrower ints are exact in int64: wrap them to the width exactly.
        half = g.const(1 << (bits - 1), ir.DataType.INT64)
        product = g.op("Sub", g.op("Mod", g.op("Add", product, half),
                                   g.const(1 << bits, ir.DataType.INT64), fmod_i=0), half)
    product = g.op("Where", in_range, product, g.const(0, ir.DataType.INT64))
    return cast(g, product, x.dtype)


def _signed_right_shift(g, x, count, bits):
    """x >> s rounds towards -inf: for x >= 0, x // 2**s; for x < 0, -1 - ((-1 - x) // 2**s),
    where -1 - x >= 0 (and never overflows). A shift by bits - 1 or more (or by a negative
    amount) leaves the sign: 0 or -1."""
    wide = cast(g, x, ir.DataType.INT64)
    negative = g.op("Less", wide, g.const(0, ir.DataType.INT64))
    minus_one = g.const(-1, ir.DataType.INT64)
    magnitude = g.op("Where", negative, g.op("Sub", minus_one, wide), wide)
    quotient = g.op("Div", magnitude,
                    _powers_of_two(g, count, bits, bits - 1, ir.DataType.INT64))
    keeps_bits = g.op("And", g.op("GreaterOrEqual", count, g.const(0, ir.DataType.INT64)),
                      g.op("Less", count, g.const(bits - 1, ir.DataType.INT64)))
    quotient = g.op("Where", keeps_bits, quotient, g.const(0, ir.DataType.INT64))
    return cast(g, g.op("Where", negative, g.op("Sub", minus_one, quotient), quotient), x.dtype)


@translates("aten::add", "aten::add_")
def add(g, self, other, alpha=1):
    """add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"""
    a, b = _operands(g, self, other, expected_dtype(g))
    if a.dtype == ir.DataType.BOOL:
        return g.op("Or", a, b)  # torch adds bools as a logical or
    if alpha != 1:
        b = g.op("Mul", b, g.const(alpha, b.dtype))
    return g.op("Add", a, b)


@translates("aten::sub", "aten::sub_", "aten::subtract")
def sub(g, self, other, alpha=1):
    """sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"""
    a, b = _operands(g, self, other, expected_dtype(g))
    if alpha != 1:
        b = g.op("Mul", b, g.const(alpha, b.dtype))
    return g.op("Sub", a, b)


@translates("aten::rsub")
def rsub(g, self, other, alpha=1):
    """rsub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"""
    return sub(g, other, self, alpha)


@translates("aten::div", "aten::div_", "aten::true_divide")
def div(g, self, other, rounding_mode=None):
    """div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor"""
    dtype = expected_dtype(g)
    if rounding_mode is None:
        a, b = _operands(g, self, other, dtype)
        return g.op("Div", a, b)
    compute = promote_dtype(self, other)
    if compute in FLOAT_TYPES:
        a, b = _operands(g, self, other, compute)
        if rounding_mode == "floor":
            if compute == ir.DataType.FLOAT16 and not (isinstance(self, ir.Value)
                                                       and isinstance(other, ir.Value)):
                # torch leaves a scalar operand of half unrounded: 0.7 // -0.7 is -2 in
                # float16, as float16(0.7) / -0.7 < -1. (Between two tensors, float16 ops
                # keep ONNX Runtime from skipping the rounding of an operand it computed in
                # float32.)
                a, b = _operands(g, self, other, ir.DataType.FLOAT)
                return cast(g, _floor_divide_float(g, a, b), ir.DataType.FLOAT16)
            return _floor_divide_float(g, a, b)
        return _trunc(g, g.op("Div", a, b))
    a, b = _operands(g, self, other, compute)
    result = g.op("Div", a, b) if rounding_mode == "trunc" else _floor_divide_int(g, a, b)
    # A traced Python number is a 0-d tensor of its own: with a 0-d tensor of uint8, the two
    # promote to int64, where torch's result (a wrapped number) keeps uint8.
    return cast(g, result, dtype) if dtype is not None else result


def _trunc(g, x):
    # Floor above zero, Ceil elsewhere: sign(x) * floor(|x|) made +0.0 of -0.0 (0 / -2).
    return trunc(g, x)


def _floor_divide_float(g, a, b):
    """torch's float kernel (div_floor_floating), not Floor(a / b): inf // 2 is NaN there,
    3 // -inf is -1, 0 // -2 is -0.0, and 2.1 // 0.7 is 3 where Floor(a / b) rounds to 2."""
    zero, one = g.const(0.0, a.dtype), g.const(1.0, a.dtype)
    quotient = g.op("Div", a, b)
    mod = g.op("Mod", a, b, fmod_i=1)
    div = g.op("Div", g.op("Sub", a, mod), b)
    # Step down where the C remainder's sign is not b's (its sign is a's).
    step = g.op("And", g.op("Not", g.op("Equal", mod, zero)),
                g.op("Xor", g.op("Less", b, zero), g.op("Less", mod, zero)))
    div = g.op("Sub", div, g.op("Cast", step, to_i=int(a.dtype)))
    # div is a whole number up to rounding: floor it, and undo a rounding down by almost 1.
    floored = g.op("Floor", div)
    floored = g.op("Add", floored, g.op("Cast", g.op("Greater", g.op("Sub", div, floored),
                                                      g.const(0.5, a.dtype)),
                                         to_i=int(a.dtype)))
    # A zero quotient takes the sign of a / b (q * 0 is that signed zero for a finite q). The
    # zero goes in Where's second branch: ONNX Runtime's Where makes +0.0 of a -0.0 taken
    # from its first, and its optimizer swaps the branches of a Where over Not(c).
    nonzero = g.op("Greater", g.op("Abs", div), zero)
    result = g.op("Where", nonzero, floored, g.op("Mul", quotient, zero))
    # Over zero: a / b (inf, -inf or NaN) as IEEE says.
    return g.op("Where", g.op("Equal", b, zero), quotient, result)


def _floor_divide_int(g, a, b):
    """Integer floor division: ONNX Div truncates, so step down where signs differ and a rest remains."""
    quotient = g.op("Div", a, b)
    rest_nonzero = g.op("Not", g.op("Equal", g.op("Mul", quotient, b), a))
    signs_differ = g.op("Less", g.op("Mul", a, b), g.const(0, a.dtype))
    adjust = g.op("Cast", g.op("And", rest_nonzero, signs_differ), to_i=int(a.dtype))
    return g.op("Sub", quotient, adjust)


@translates("aten::floor_divide")
def floor_divide(g, self, other):
    """floor_divide(Tensor self, Tensor other) -> Tensor"""
    return div(g, self, other, rounding_mode="floor")


@translates("aten::remainder")
def remainder(g, self, other):
    """remainder.Tensor(Tensor self, Tensor other) -> Tensor"""
    a, b = _operands(g, self, other, expected_dtype(g))
    if a.dtype in FLOAT_TYPES:
        # torch's kernel, not a - floor(a / b) * b (whose rounded quotient gives 0 for
        # 2.1 % 0.7, torch 0.7): the C remainder, moved by b where its sign is not b's.
        rest = g.op("Mod", a, b, fmod_i=1)
        zero = g.const(0.0, a.dtype)
        moves = g.op("And", g.op("Not", g.op("Equal", rest, zero)),
                     g.op("Xor", g.op("Less", rest, zero), g.op("Less", b, zero)))
        return g.op("Where", moves, g.op("Add", rest, b), rest)
    return g.op("Mod", a, b, fmod_i=0)  # of integers: Python's, the sign of the divisor


@translates("aten::fmod")
def fmod(g, self, other):
    """fmod.Tensor(Tensor self, Tensor other) -> Tensor"""
    a, b = _operands(g, self, other, expected_dtype(g))
    return g.op("Mod", a, b, fmod_i=1)


@translates("aten::where")
def where(g, condition, self=None, other=None):
    """where.self(Tensor condition, Tensor self, Tensor other) -> Tensor

    Also where(Tensor condition) -> Tensor[], nonzero(condition, as_tuple=True), which traced
    models use (torchvision's remove_small_boxes) and shares the overload-less name."""
    if self is None and other is None:
        indices = g.op("NonZero", cast(g, condition, ir.DataType.BOOL))  # [rank, n]
        indices.dtype = ir.DataType.INT64
        return tuple(g.op("Gather", indices, g.const(axis, ir.DataType.INT64), axis_i=0)
                     for axis in range(len(condition.shape)))
    dtype = expected_dtype(g)
    a, b = _operands(g, self, other, dtype)
    return _where(g, cast(g, condition, ir.DataType.BOOL), a, b)


def _where(g, condition, a, b):
    if a.dtype == ir.DataType.BOOL:
        # ONNX Runtime has no bool Where: (c and a) or (not c and b).
        return g.op("Or", g.op("And", condition, a), g.op("And", g.op("Not", condition), b))
    return g.op("Where", condition, a, b)


@translates("aten::masked_fill", "aten::masked_fill_")
def masked_fill(g, self, mask, value):
    """masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor"""
    return _where(g, cast(g, mask, ir.DataType.BOOL), as_tensor(g, value, self), self)


@translates("aten::atan2")
def atan2(g, self, other):
    """atan2(Tensor self, Tensor other) -> Tensor

    From the octant, as C's atan2: Atan(y / x) alone is NaN at 0/0 and inf/inf (which torch
    maps to 0 and pi/4) and loses the sign of a zero (atan2(-0., -1) = -pi)."""
    y, x = _operands(g, self, other, expected_dtype(g))
    dtype = x.dtype
    zero = g.const(0.0, dtype)
    abs_y, abs_x = g.op("Abs", y), g.op("Abs", x)
    small, large = g.op("Min", abs_y, abs_x), g.op("Max", abs_y, abs_x)
    ratio = g.op("Div", small, large)
    ratio = g.op("Where", g.op("Equal", large, zero), zero, ratio)  # 0 / 0
    # Equal to inf rather than IsInf: ONNX Runtime has no float16 IsInf below opset 20.
    infinity = g.const(float("inf"), dtype)
    both_infinite = g.op("And", g.op("Equal", abs_y, infinity), g.op("Equal", abs_x, infinity))
    ratio = g.op("Where", both_infinite, g.const(1.0, dtype), ratio)
    angle = g.op("Atan", ratio)  # in [0, pi/4]
    angle = g.op("Where", g.op("Greater", abs_y, abs_x),
                 g.op("Sub", g.const(math.pi / 2, dtype), angle), angle)
    angle = g.op("Where", _sign_bit(g, x), g.op("Sub", g.const(math.pi, dtype), angle), angle)
    return g.op("Where", _sign_bit(g, y), g.op("Neg", angle), angle)


def _sign_bit(g, x):
    """x < 0, or x is -0.0 (whose reciprocal is -inf)."""
    zero = g.const(0.0, x.dtype)
    return g.op("Or", g.op("Less", x, zero),
                g.op("Less", g.op("Div", g.const(1.0, x.dtype), x), zero))
