"""Special functions ONNX has no single op for, or has for floats only: inverse hyperbolics,
erfc, exp2, log10, frac, signbit, logit, logaddexp2, cumprod, logcumsumexp."""

from __future__ import annotations

import math

import onnx_ir as ir
import torch

from onnxport.translate.ops._helpers import (
    FLOAT_TYPES, GAMMA_SHIFT, cast, expected_dtype, lgamma_double, nonpositive_integer,
    normalize_axis, reduce, reflected_at_half,
)
from onnxport.translate.ops._helpers import double_const as _c
from onnxport.translate.registry import alias, translates


def _float_of(g, x: ir.Value) -> ir.Value:
    """``x`` in the float dtype torch computes a float function of it in."""
    out = expected_dtype(g)
    if x.dtype in FLOAT_TYPES:
        return x
    return cast(g, x, out if out in FLOAT_TYPES else ir.DataType.FLOAT)


def _float_unary(onnx_op: str, name: str):
    def translation(g, self):
        return g.op(onnx_op, _float_of(g, self))

    translation.__name__ = onnx_op.lower()
    translation.__doc__ = f"{name}(Tensor self) -> Tensor  (ONNX {onnx_op})"
    translates(f"aten::{name}", f"prims::{name}", since_opset=9)(translation)


for _op, _name in [("Acosh", "acosh"), ("Asinh", "asinh"), ("Atanh", "atanh")]:
    _float_unary(_op, _name)


@translates("aten::erfc", "prims::erfc", "aten::special_erfc")
def erfc(g, self):
    """erfc(Tensor self) -> Tensor"""
    x = _float_of(g, self)
    return g.op("Sub", g.const(1.0, x.dtype), g.op("Erf", x))


@translates("aten::exp2", "prims::exp2", "aten::special_exp2")
def exp2(g, self):
    """exp2(Tensor self) -> Tensor"""
    x = _float_of(g, self)
    return g.op("Pow", g.const(2.0, x.dtype), x)


@translates("aten::log10", "prims::log10")
def log10(g, self):
    """log10(Tensor self) -> Tensor"""
    x = _float_of(g, self)
    return g.op("Div", g.op("Log", x), g.const(math.log(10.0), x.dtype))


@translates("aten::frac")
def frac(g, self):
    """frac(Tensor self) -> Tensor"""
    # x - trunc(x): Floor above zero, Ceil elsewhere.
    trunc = g.op("Where", g.op("Greater", self, g.const(0.0, self.dtype)),
                 g.op("Floor", self), g.op("Ceil", self))
    return g.op("Sub", self, trunc)


@translates("aten::signbit", "prims::signbit")
def signbit(g, self):
    """signbit(Tensor self) -> Tensor"""
    if self.dtype == ir.DataType.BOOL:
        return g.op("Equal", self, g.op("Not", self))  # all false
    zero = g.const(0, self.dtype)
    negative = g.op("Less", self, zero)
    if self.dtype not in FLOAT_TYPES:
        return negative
    # -0.0 has its sign bit set: 1 / -0.0 is -inf. (The sign of a NaN is out of reach
    # without a bit cast; torch's own samples hold no negative NaN.)
    negative_zero = g.op("And", g.op("Equal", self, zero),
                         g.op("Less", g.op("Div", g.const(1.0, self.dtype), self), zero))
    return g.op("Or", negative, negative_zero)


@translates("aten::logit", "aten::special_logit")
def logit(g, self, eps=None):
    """logit(Tensor self, float? eps=None) -> Tensor"""
    x = _float_of(g, self)
    if eps is not None:
        # torch's kernel: x < eps ? eps : (x > 1 - eps ? 1 - eps : x); unlike Clip this picks
        # eps (not 1 - eps) below eps when eps > 0.5.
        low, high = g.const(float(eps), x.dtype), g.const(1.0 - float(eps), x.dtype)
        x = g.op("Where", g.op("Less", x, low), low, g.op("Min", x, high))
    return g.op("Log", g.op("Div", x, g.op("Sub", g.const(1.0, x.dtype), x)))


@translates("aten::logaddexp2")
def logaddexp2(g, self, other):
    """logaddexp2(Tensor self, Tensor other) -> Tensor"""
    a, b = _float_of(g, self), _float_of(g, other)
    # max + log2(1 + 2^-(|a - b|)); where both are the same infinity, that infinity (a - b
    # would be NaN).
    larger = g.op("Max", a, b)
    gap = g.op("Neg", g.op("Abs", g.op("Sub", a, b)))
    log2_term = g.op("Div", g.op("Log", g.op("Add", g.const(1.0, a.dtype),
                                                g.op("Pow", g.const(2.0, a.dtype), gap))),
                     g.const(math.log(2.0), a.dtype))
    result = g.op("Add", larger, log2_term)
    same = g.op("Equal", a, b)
    return g.op("Where", same, g.op("Add", a, g.const(1.0, a.dtype)), result)


@translates("aten::logcumsumexp")
def logcumsumexp(g, self, dim):
    """logcumsumexp(Tensor self, int dim) -> Tensor"""
    x = _float_of(g, self)
    rank = len(self.shape) if self.shape is not None else 1
    axis_number = normalize_axis(dim, max(rank, 1))
    axis = g.const(axis_number, ir.DataType.INT64)
    if rank == 0:
        return g.op("Identity", x)
    # Shifted by the maximum along the axis so that Exp does not overflow; an all -inf
    # slice keeps -inf (its shift is 0, not -inf).
    peak = reduce(g, "ReduceMax", x, [axis_number], True)
    finite = g.op("Where", g.op("IsInf", peak), g.const(0.0, x.dtype), peak)
    summed = g.op("CumSum", g.op("Exp", g.op("Sub", x, finite)), axis)
    return g.op("Add", g.op("Log", summed), finite)


@translates("aten::angle")
def angle(g, self):
    """angle(Tensor self) -> Tensor"""
    # Of a real number: pi below zero, 0 elsewhere, NaN kept.
    x = _float_of(g, self)
    zero = g.const(0.0, x.dtype)
    result = g.op("Where", g.op("Less", x, zero), g.const(math.pi, x.dtype), zero)
    return g.op("Where", g.op("IsNaN", x), x, result)


@translates("aten::hypot", "prims::hypot")
def hypot(g, self, other):
    """hypot(Tensor self, Tensor other) -> Tensor"""
    a, b = _float_of(g, self), _float_of(g, other)
    # Scaled by the larger magnitude so that squares do not overflow; inf wins over NaN.
    a, b = g.op("Abs", a), g.op("Abs", b)
    large, small = g.op("Max", a, b), g.op("Min", a, b)
    zero = g.const(0.0, a.dtype)
    ratio = g.op("Where", g.op("Equal", large, zero), zero, g.op("Div", small, large))
    result = g.op("Mul", large, g.op("Sqrt", g.op("Add", g.const(1.0, a.dtype),
                                                  g.op("Mul", ratio, ratio))))
    infinite = g.op("Or", g.op("IsInf", a), g.op("IsInf", b))
    return g.op("Where", infinite, g.const(float("inf"), a.dtype), result)


@translates("aten::copysign.Tensor", "aten::copysign")
def copysign(g, self, other):
    """copysign.Tensor(Tensor self, Tensor other) -> Tensor"""
    if not isinstance(other, ir.Value):
        other = g.const(float(other), ir.DataType.FLOAT)
    magnitude = g.op("Abs", _float_of(g, self))
    negative = signbit(g, _float_of(g, other))
    return g.op("Where", negative, g.op("Neg", magnitude), magnitude)


# prims with the same meaning (and arguments) as the ATen op. Not prims::div: it truncates
# integers, aten::div does not.
for _name in ["abs", "sqrt", "rsqrt", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
              "ceil", "floor", "exp", "log", "sin", "cos", "tan", "asin", "acos", "atan",
              "sinh", "cosh", "tanh", "neg", "sign", "trunc", "round", "erf", "sigmoid",
              "atan2", "fmod", "remainder", "maximum", "minimum", "eq", "ne", "lt", "le", "gt",
              "ge", "pow", "isfinite", "mul", "sub", "add", "reciprocal"]:
    alias(f"aten::{_name}", f"prims::{_name}")


# -- gamma family: computed in double (shift up, then the asymptotic series) ---------------
_D = ir.DataType.DOUBLE


def _in_double(g, self) -> tuple[ir.Value, ir.DataType]:
    out = expected_dtype(g)
    out = out if out in FLOAT_TYPES else ir.DataType.FLOAT
    return cast(g, self, _D), out


@translates("aten::lgamma", "prims::lgamma")
def lgamma(g, self):
    """lgamma(Tensor self) -> Tensor"""
    x, out = _in_double(g, self)
    return cast(g, lgamma_double(g, x), out)


def _digamma_double(g, x) -> ir.Value:
    below, y = reflected_at_half(g, x)
    # digamma(y) = digamma(y + 8) - sum 1 / (y + k); the asymptotic series at y + 8.
    steps = [g.op("Reciprocal", g.op("Add", y, _c(g, k)) if k else y) for k in range(GAMMA_SHIFT)]
    z = g.op("Add", y, _c(g, GAMMA_SHIFT))
    inverse2 = g.op("Reciprocal", g.op("Mul", z, z))
    series = _c(g, -1.0 / 132)
    for coefficient in (1.0 / 240, -1.0 / 252, 1.0 / 120, -1.0 / 12):
        series = g.op("Add", g.op("Mul", series, inverse2), _c(g, coefficient))
    asymptotic = g.op("Sub", g.op("Add", g.op("Log", z), g.op("Mul", series, inverse2)),
                      g.op("Div", _c(g, 0.5), z))
    positive = g.op("Sub", asymptotic, g.op("Sum", *steps))
    # Reflection: digamma(x) = digamma(1 - x) - pi / tan(pi x).
    # (pi cos / sin: ONNX Runtime has no double Tan.)
    angle = g.op("Mul", x, _c(g, math.pi))
    reflected = g.op("Sub", positive, g.op("Div", g.op("Mul", _c(g, math.pi), g.op("Cos", angle)),
                                           g.op("Sin", angle)))
    result = g.op("Where", below, reflected, positive)
    # torch: -inf at 0, NaN at the negative integers.
    result = g.op("Where", nonpositive_integer(g, x), _c(g, float("nan")), result)
    return g.op("Where", g.op("Equal", x, _c(g, 0.0)), _c(g, float("-inf")), result)


@translates("aten::digamma", "prims::digamma", "aten::special_psi")
def digamma(g, self):
    """digamma(Tensor self) -> Tensor"""
    x, out = _in_double(g, self)
    return cast(g, _digamma_double(g, x), out)


# B_2j / (2j)! for the Euler-Maclaurin tail of the Hurwitz zeta function.
_BERNOULLI_TERMS = [1.0 / 12, -1.0 / 720, 1.0 / 30240, -1.0 / 1209600, 1.0 / 47900160,
                    -691.0 / 1307674368000]
_ZETA_TERMS = 20


def _hurwitz_zeta(g, s, q) -> ir.Value:
    """zeta(s, q) = sum over k >= 0 of (q + k)^-s, in double, as cephes computes it: a direct
    sum of 20 terms, then the Euler-Maclaurin tail."""
    terms = [g.op("Pow", g.op("Add", q, _c(g, k)) if k else q, g.op("Neg", s))
             for k in range(_ZETA_TERMS)]
    a = g.op("Add", q, _c(g, _ZETA_TERMS))
    a_to_minus_s = g.op("Pow", a, g.op("Neg", s))
    tail = g.op("Add", g.op("Div", g.op("Mul", a, a_to_minus_s), g.op("Sub", s, _c(g, 1.0))),
                g.op("Mul", _c(g, 0.5), a_to_minus_s))
    # term_j = B_2j/(2j)! * s (s+1) ... (s+2j-2) * a^(-s-2j+1)
    rising = s
    power = g.op("Div", a_to_minus_s, a)
    inverse2 = g.op("Reciprocal", g.op("Mul", a, a))
    for j, coefficient in enumerate(_BERNOULLI_TERMS):
        if j:
            rising = g.op("Mul", rising, g.op("Mul", g.op("Add", s, _c(g, 2 * j - 1)),
                                                g.op("Add", s, _c(g, 2 * j))))
            power = g.op("Mul", power, inverse2)
        tail = g.op("Add", tail, g.op("Mul", _c(g, coefficient), g.op("Mul", rising, power)))
    result = g.op("Add", g.op("Sum", *terms), tail)
    # cephes: inf at s == 1 and at the poles q = 0, -1, ...; NaN for s < 1, and for q < 0
    # with a fractional s.
    result = g.op("Where", nonpositive_integer(g, q), _c(g, float("inf")), result)
    fractional = g.op("Not", g.op("Equal", s, g.op("Floor", s)))
    nan = g.op("Or", g.op("Less", s, _c(g, 1.0)),
               g.op("And", g.op("Less", q, _c(g, 0.0)), fractional))
    result = g.op("Where", nan, _c(g, float("nan")), result)
    return g.op("Where", g.op("Equal", s, _c(g, 1.0)), _c(g, float("inf")), result)


@translates("aten::special_zeta", "prims::zeta")
def zeta(g, self, other):
    """special_zeta(Tensor self, Tensor other) -> Tensor"""
    out = expected_dtype(g)
    out = out if out in FLOAT_TYPES else ir.DataType.FLOAT
    s = cast(g, self if isinstance(self, ir.Value) else g.const(float(self), _D), _D)
    q = cast(g, other if isinstance(other, ir.Value) else g.const(float(other), _D), _D)
    return cast(g, _hurwitz_zeta(g, s, q), out)


@translates("aten::polygamma", "aten::special_polygamma")
def polygamma(g, n, self):
    """polygamma(int n, Tensor self) -> Tensor"""
    x, out = _in_double(g, self)
    if n == 0:
        return cast(g, _digamma_double(g, x), out)
    # psi^(n)(x) = (-1)^(n+1) n! zeta(n + 1, x)
    factor = (-1.0) ** (n + 1) * math.factorial(n)
    return cast(g, g.op("Mul", _c(g, factor), _hurwitz_zeta(g, _c(g, n + 1.0), x)), out)


_ERFINV_CENTRAL = [2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                   0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941]
_ERFINV_TAIL = [-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                -0.0076224613, 0.00943887047, 1.00167406, 2.83297682]


def _horner(g, coefficients, w):
    p = _c(g, coefficients[0])
    for coefficient in coefficients[1:]:
        p = g.op("Add", g.op("Mul", p, w), _c(g, coefficient))
    return p


def _erfinv_double(g, x):
    """Giles' approximation (single-precision accurate), evaluated in double."""
    w = g.op("Neg", g.op("Log", g.op("Mul", g.op("Sub", _c(g, 1.0), x),
                                      g.op("Add", _c(g, 1.0), x))))
    central = _horner(g, _ERFINV_CENTRAL, g.op("Sub", w, _c(g, 2.5)))
    tail = _horner(g, _ERFINV_TAIL, g.op("Sub", g.op("Sqrt", w), _c(g, 3.0)))
    result = g.op("Mul", g.op("Where", g.op("Less", w, _c(g, 5.0)), central, tail), x)
    # erfinv(+-1) = +-inf (the polynomial would give NaN there).
    edge = g.op("Equal", g.op("Abs", x), _c(g, 1.0))
    return g.op("Where", edge, g.op("Mul", x, _c(g, float("inf"))), result)


@translates("aten::erfinv", "prims::erf_inv", "aten::special_erfinv")
def erfinv(g, self):
    """erfinv(Tensor self) -> Tensor"""
    x, out = _in_double(g, self)
    return cast(g, _erfinv_double(g, x), out)


@translates("aten::special_ndtri", "prims::ndtri")
def ndtri(g, self):
    """special_ndtri(Tensor self) -> Tensor"""
    x, out = _in_double(g, self)
    # ndtri(p) = sqrt(2) erfinv(2p - 1)
    z = _erfinv_double(g, g.op("Sub", g.op("Mul", x, _c(g, 2.0)), _c(g, 1.0)))
    return cast(g, g.op("Mul", z, _c(g, math.sqrt(2.0))), out)


_ERFC_POLY = [0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806,
              0.09678418, 0.37409196, 1.00002368, -1.26551223]


@translates("aten::special_erfcx", "prims::erfcx")
def erfcx(g, self):
    """special_erfcx(Tensor self) -> Tensor"""
    x, out = _in_double(g, self)
    # erfc(|x|) = t exp(-x^2 + P(t)) with t = 1 / (1 + |x|/2) (Numerical Recipes' erfcc,
    # relative error < 1.2e-7), so exp(x^2) erfc(|x|) = t exp(P(t)) has no overflow.
    t = g.op("Reciprocal", g.op("Add", _c(g, 1.0), g.op("Mul", _c(g, 0.5), g.op("Abs", x))))
    scaled = g.op("Mul", t, g.op("Exp", _horner(g, _ERFC_POLY, t)))
    # Below zero erfc(x) = 2 - erfc(|x|).
    negative = g.op("Sub", g.op("Mul", _c(g, 2.0), g.op("Exp", g.op("Mul", x, x))), scaled)
    result = g.op("Where", g.op("Less", x, _c(g, 0.0)), negative, scaled)
    return cast(g, result, out)


# Abramowitz & Stegun 9.8.1-9.8.4 (relative error below 1e-6), highest power first.
_I0_SMALL = [0.0045813, 0.0360768, 0.2659732, 1.2067492, 3.0899424, 3.5156229, 1.0]
_I0_LARGE = [0.00392377, -0.01647633, 0.02635537, -0.02057706, 0.00916281, -0.00157565,
             0.00225319, 0.01328592, 0.39894228]
_I1_SMALL = [0.00032411, 0.00301532, 0.02658733, 0.15084934, 0.51498869, 0.87890594, 0.5]
_I1_LARGE = [-0.00420059, 0.01787654, -0.02895312, 0.02282967, -0.01031555, 0.00163801,
             -0.00362018, -0.03988024, 0.39894228]


def _bessel_i(g, x, order: int, scaled: bool):
    """I0 or I1 of x (times exp(-|x|) when ``scaled``), in double."""
    a = g.op("Abs", x)
    t = g.op("Div", a, _c(g, 3.75))
    small = _horner(g, _I0_SMALL if order == 0 else _I1_SMALL, g.op("Mul", t, t))
    if order == 1:
        small = g.op("Mul", small, a)
    if scaled:
        small = g.op("Mul", small, g.op("Exp", g.op("Neg", a)))
    # Beyond 3.75: sqrt(x) exp(-x) I(x) is a polynomial in 3.75 / x.
    large = g.op("Div", _horner(g, _I0_LARGE if order == 0 else _I1_LARGE,
                               g.op("Div", _c(g, 3.75), a)), g.op("Sqrt", a))
    if not scaled:
        large = g.op("Mul", large, g.op("Exp", a))
    result = g.op("Where", g.op("Less", a, _c(g, 3.75)), small, large)
    if order == 1:
        result = g.op("Where", g.op("Less", x, _c(g, 0.0)), g.op("Neg", result), result)
    return result


def _bessel(order: int, scaled: bool, *names: str):
    def translation(g, self):
        x, out = _in_double(g, self)
        return cast(g, _bessel_i(g, x, order, scaled), out)

    translation.__name__ = f"bessel_i{order}{'e' if scaled else ''}"
    translation.__doc__ = f"{names[0].split('::')[1]}(Tensor self) -> Tensor"
    translates(*names)(translation)


_bessel(0, False, "aten::i0", "prims::bessel_i0", "aten::special_i0",
        "aten::special_modified_bessel_i0")
_bessel(0, True, "aten::special_i0e", "prims::bessel_i0e")
_bessel(1, False, "aten::special_i1", "prims::bessel_i1", "aten::special_modified_bessel_i1")
_bessel(1, True, "aten::special_i1e", "prims::bessel_i1e")


@translates("aten::frexp.Tensor", "aten::frexp", "prims::frexp")
def frexp(g, self):
    """frexp.Tensor(Tensor self) -> (Tensor mantissa, Tensor exponent)"""
    x = cast(g, self, _D)
    magnitude = g.op("Abs", x)
    zero = g.op("Equal", magnitude, _c(g, 0.0))
    safe = g.op("Where", zero, _c(g, 1.0), magnitude)
    exponent = g.op("Add", g.op("Floor", g.op("Div", g.op("Log", safe), _c(g, math.log(2.0)))),
                    _c(g, 1.0))
    mantissa = g.op("Div", x, g.op("Pow", _c(g, 2.0), exponent))
    # Log's rounding can leave |mantissa| at 1 or under 0.5: one step back into [0.5, 1).
    high = g.op("GreaterOrEqual", g.op("Abs", mantissa), _c(g, 1.0))
    low = g.op("Less", g.op("Abs", mantissa), _c(g, 0.5))
    mantissa = g.op("Where", high, g.op("Div", mantissa, _c(g, 2.0)),
                    g.op("Where", low, g.op("Mul", mantissa, _c(g, 2.0)), mantissa))
    exponent = g.op("Add", exponent, g.op("Sub", cast(g, high, _D), cast(g, low, _D)))
    mantissa = g.op("Where", zero, x, mantissa)
    exponent = g.op("Where", zero, _c(g, 0.0), exponent)
    return cast(g, mantissa, self.dtype), cast(g, exponent, ir.DataType.INT32)


def _gcd(g, a, b):
    """Euclid's algorithm in an ONNX Loop that stops when every remainder is 0."""
    dtype = a.dtype
    a, b = g.op("Abs", a), g.op("Abs", b)
    shape = g.op("Shape", g.op("Add", a, b))
    a, b = g.op("Expand", a, shape), g.op("Expand", b, shape)
    zero = g.const(0, dtype)
    body = g.subgraph("gcd_step")
    body.add_input("gcd_i", ir.DataType.INT64, [])
    body.add_input("gcd_cond", ir.DataType.BOOL, [])
    x = body.add_input("gcd_a", dtype, None)
    y = body.add_input("gcd_b", dtype, None)
    done = body.op("Equal", y, zero)
    safe = body.op("Where", done, body.const(1, dtype), y)
    remainder = body.op("Where", done, zero, body.op("Mod", x, safe))
    body.add_output(body.op("Not", body.op("Equal", body.op("ReduceMax", body.op(
        "Concat", body.op("Reshape", remainder, body.const([-1], ir.DataType.INT64)),
        body.const([0], dtype), axis_i=0), keepdims_i=0), zero)))
    body.add_output(body.op("Where", done, x, y))
    body.add_output(remainder)
    # 100 steps bound Euclid on int64 (the worst case, Fibonacci numbers, takes 92).
    go = g.op("Not", g.op("Equal", g.op("ReduceMax", g.op("Concat", g.op(
        "Reshape", b, g.const([-1], ir.DataType.INT64)), g.const([0], dtype), axis_i=0),
        keepdims_i=0), zero))
    result, _ = g.op("Loop", g.const(100, ir.DataType.INT64), go, a, b, body_g=body.graph,
                     outputs=2)
    result.dtype = _.dtype = dtype
    return result


@translates("aten::gcd", "prims::gcd")
def gcd(g, self, other):
    """gcd(Tensor self, Tensor other) -> Tensor"""
    return _gcd(g, self, other)


@translates("aten::lcm")
def lcm(g, self, other):
    """lcm(Tensor self, Tensor other) -> Tensor"""
    divisor = _gcd(g, self, other)
    zero = g.const(0, self.dtype)
    is_zero = g.op("Equal", divisor, zero)
    safe = g.op("Where", is_zero, g.const(1, self.dtype), divisor)
    result = g.op("Abs", g.op("Mul", g.op("Div", self, safe), other))
    return g.op("Where", is_zero, zero, result)


# (mantissa bits with the hidden one, smallest normal, smallest subnormal) of the float dtypes
# whose neighbours nextafter finds exactly.
_FLOAT_GRID = {ir.DataType.FLOAT: (24, 2.0 ** -126, 2.0 ** -149),
               ir.DataType.DOUBLE: (53, 2.0 ** -1022, 2.0 ** -1074)}


@translates("aten::nextafter", "prims::nextafter")
def nextafter(g, self, other):
    """nextafter(Tensor self, Tensor other) -> Tensor"""
    from onnxport.errors import TranslationError

    dtype = expected_dtype(g)
    if dtype not in _FLOAT_GRID:
        raise TranslationError(
            f"aten::nextafter of {dtype.name if dtype else 'an unknown dtype'} has no exact "
            "translation (ONNX has no bit cast; float32 and float64 are computed exactly): "
            "cast the inputs to float32 or float64")
    bits, smallest_normal, smallest = _FLOAT_GRID[dtype]
    x, y = cast(g, self, dtype), cast(g, other, dtype)
    # No bit cast in ONNX: the neighbour is x +- a step s that rounds to exactly one spacing.
    # With s = |x| 2^-bits (1 + 2^-20), s lies in (spacing/2, spacing] of x's binade, so x + s
    # rounds up to the next float and x - s down to the previous one, also at a power of two
    # where the spacing below halves. float32 is stepped in double and rounded by the Cast
    # (its subnormals are normal there); float64 near the subnormals is scaled up first, so
    # that s stays exact, and steps by the subnormal spacing at and below the smallest normal.
    work = _D
    xd, yd = cast(g, x, work), cast(g, y, work)
    magnitude = g.op("Abs", xd)
    up = g.op("Greater", yd, xd)
    direction = g.op("Where", up, _c(g, 1.0), _c(g, -1.0))
    if dtype == ir.DataType.FLOAT:
        step = g.op("Max", g.op("Mul", magnitude, _c(g, 2.0 ** -bits * (1 + 2.0 ** -20))),
                    _c(g, smallest))
        result = cast(g, g.op("Add", xd, g.op("Mul", direction, step)), dtype)
    else:
        scale = g.op("Where", g.op("Less", magnitude, _c(g, 2.0 ** -900)), _c(g, 2.0 ** 200),
                     _c(g, 1.0))
        scaled = g.op("Mul", xd, scale)
        step = g.op("Mul", g.op("Abs", scaled), _c(g, 2.0 ** -bits * (1 + 2.0 ** -20)))
        result = g.op("Div", g.op("Add", scaled, g.op("Mul", direction, step)), scale)
        tiny = g.op("Add", xd, g.op("Mul", direction, _c(g, smallest)))
        result = g.op("Where", g.op("LessOrEqual", magnitude, _c(g, smallest_normal)), tiny,
                      result)
    # From an infinity towards anything else: the largest finite float of its sign.
    largest = g.const(float(torch.finfo(torch.float32 if dtype == ir.DataType.FLOAT
                                        else torch.float64).max), dtype)
    result = g.op("Where", g.op("IsInf", x),
                  g.op("Where", g.op("Less", x, g.const(0.0, dtype)), g.op("Neg", largest),
                       largest), result)
    # Equal (also 0 and -0): other itself; NaN in either: NaN (x + y is NaN then).
    equal = g.op("Equal", x, y)
    result = g.op("Where", equal, y, result)
    nan = g.op("Or", g.op("IsNaN", x), g.op("IsNaN", y))
    result = g.op("Where", nan, g.op("Add", x, y), result)
    # The sign is put back by a product: ONNX Runtime's Where turns a -0 it picks into +0, and
    # a zero result is y's zero when equal, else x's sign (-tiny towards 0 is -0).
    zero = g.const(0.0, dtype)
    negative = g.op("Where", g.op("Equal", result, zero),
                    g.op("Where", equal, signbit(g, y), g.op("Less", x, zero)),
                    g.op("Less", result, zero))
    return g.op("Mul", g.op("Abs", result),
                g.op("Where", negative, g.const(-1.0, dtype), g.const(1.0, dtype)))


def _double_bits(g, x) -> ir.Value:
    """The IEEE bits of float64(x) as int64, by arithmetic (ONNX before opset 26 has no bit
    cast): sign, then exponent and mantissa from x / 2^e. A NaN is the positive quiet NaN."""
    xd = cast(g, x, _D)
    magnitude = g.op("Abs", xd)
    zero = g.op("Equal", magnitude, _c(g, 0.0))
    infinite = g.op("IsInf", xd)
    special_value = g.op("Or", g.op("Or", zero, infinite), g.op("IsNaN", xd))
    safe = g.op("Where", special_value, _c(g, 1.0), magnitude)
    exponent = g.op("Floor", g.op("Div", g.op("Log", safe), _c(g, math.log(2.0))))
    # Log's rounding can put e one off: one step back so that 1 <= |x| / 2^e < 2.
    mantissa = g.op("Div", safe, g.op("Pow", _c(g, 2.0), exponent))
    high = g.op("GreaterOrEqual", mantissa, _c(g, 2.0))
    low = g.op("Less", mantissa, _c(g, 1.0))
    exponent = g.op("Add", exponent, g.op("Sub", cast(g, high, _D), cast(g, low, _D)))
    mantissa = g.op("Div", safe, g.op("Pow", _c(g, 2.0), exponent))
    # (m - 1) 2^52 is an exact integer; the subnormals of float64 are |x| 2^1074.
    fraction = g.op("Mul", g.op("Sub", mantissa, _c(g, 1.0)), _c(g, 2.0 ** 52))
    # Exponent and fraction are added as int64: their sum needs up to 63 bits, double has 53.
    int64 = ir.DataType.INT64
    biased = g.op("Mul", g.op("Add", exponent, _c(g, 1023.0)), _c(g, 2.0 ** 52))
    normal = g.op("Add", cast(g, biased, int64), cast(g, fraction, int64))
    subnormal = g.op("Mul", g.op("Mul", safe, _c(g, 2.0 ** 1000)), _c(g, 2.0 ** 74))
    bits = g.op("Where", g.op("Less", safe, _c(g, 2.0 ** -1022)), cast(g, subnormal, int64),
                normal)
    # Zero, inf and NaN are put in as int64 constants.
    bits = g.op("Where", zero, g.const(0, int64), bits)
    bits = g.op("Where", infinite, g.const(0x7FF0000000000000, int64), bits)
    bits = g.op("Where", g.op("IsNaN", xd), g.const(0x7FF8000000000000, int64), bits)
    # The sign bit: adding -2^63 to bits below 2^63 sets it without overflow.
    negative = g.op("And", g.op("Not", g.op("IsNaN", xd)), signbit(g, xd))
    return g.op("Where", negative, g.op("Add", bits, g.const(-(2 ** 63), int64)), bits)


@translates("aten::hash_tensor", since_opset=13)
def hash_tensor(g, self, dim=(), keepdim=False, mode=0):
    """hash_tensor(Tensor self, int[1] dim=[], *, bool keepdim=False, int mode=0) -> Tensor"""
    from onnxport.errors import TranslationError

    shape = g.static_shape(self)
    if mode != 0 or shape is None:
        raise TranslationError(
            "aten::hash_tensor is translated for mode 0 (xor_sum) on static shapes only"
            f" (mode {mode}, shape {self.shape})")
    int64 = ir.DataType.INT64
    # torch XORs the elements as uint64: floats by the bits of their float64 value, integers
    # and bools by their value.
    bits = _double_bits(g, self) if self.dtype in FLOAT_TYPES else cast(g, self, int64)
    rank = len(shape)
    # dim=[] is every axis; a 0-d tensor has none to name (dim 0 or -1 means itself).
    axes = sorted({normalize_axis(d, rank) for d in dim} if dim and rank else range(rank))
    # ONNX has no XOR reduction (nor BitwiseXor before opset 18): bit k of the XOR is the
    # parity of the sum of the elements' bits k. The 64 bits go on a new last axis:
    # bit k = (u >> k) - 2 (u >> (k + 1)), in int64 arithmetic that wraps like uint64.
    unsigned = g.op("Reshape", cast(g, bits, ir.DataType.UINT64), g.const(shape + [1], int64))
    shifted = cast(g, g.op("BitShift", unsigned, g.const(list(range(64)), ir.DataType.UINT64),
                           direction_s="RIGHT"), int64)
    higher = g.op("Concat", g.op("Slice", shifted, g.const([1], int64), g.const([64], int64),
                                 g.const([-1], int64)),
                  g.op("Expand", g.const([0], int64), g.const(shape + [1], int64)), axis_i=-1)
    bit = g.op("Sub", shifted, g.op("Mul", higher, g.const(2, int64)))
    counts = reduce(g, "ReduceSum", bit, axes, keepdim) if axes else bit
    parity = g.op("Mod", counts, g.const(2, int64))
    # Bits put back by their weights (2^63 is -2^63 in int64). ONNX Runtime's int64 ReduceSum
    # adds in double: it sums 16 bits at a time, which double holds exactly, and Add joins
    # the four sums.
    out_shape = [1 if a in axes else shape[a] for a in range(rank)] if keepdim else \
        [shape[a] for a in range(rank) if a not in axes]
    weights = g.const(torch.tensor([2 ** k for k in range(63)] + [-(2 ** 63)], dtype=torch.int64))
    weighted = g.op("Reshape", g.op("Mul", parity, weights), g.const(out_shape + [4, 16], int64))
    quarters = g.op("ReduceSum", weighted, g.const([-1], int64), keepdims_i=0)
    result = None
    for quarter in range(4):
        part = g.op("Gather", quarters, g.const(quarter, int64), axis_i=-1)
        result = part if result is None else g.op("Add", result, part)
    return cast(g, g.op("Reshape", result, g.const(out_shape, int64)), ir.DataType.UINT64)
