"""Orthogonal polynomials of torch.special (Chebyshev T/U/V/W and shifted, Hermite H/He,
Laguerre, Legendre): the degree n is data, so the three-term recurrence runs in an ONNX Loop
of max(n) - 1 steps, each element keeping the term of its own degree (as torch does)."""

from __future__ import annotations

from typing import Callable

import onnx_ir as ir

from onnxport.translate.ops._helpers import FLOAT_TYPES, cast, expected_dtype
from onnxport.translate.registry import translates

_I64 = ir.DataType.INT64

# name -> (P1 from x, next term from (g, x, k, P_k, P_k-1)), P0 = 1; the shifted Chebyshev
# polynomials are the plain ones at 2x - 1.
_Recurrence = tuple[Callable, Callable]


def _c(g, value, dtype):
    return g.const(float(value), dtype)


def _chebyshev(first: Callable) -> _Recurrence:
    # P_k+1 = 2x P_k - P_k-1
    return first, lambda g, x, k, p, q: g.op("Sub", g.op("Mul", g.op("Add", x, x), p), q)


_FAMILIES: dict[str, _Recurrence] = {
    "chebyshev_polynomial_t": _chebyshev(lambda g, x: x),
    "chebyshev_polynomial_u": _chebyshev(lambda g, x: g.op("Add", x, x)),
    "chebyshev_polynomial_v": _chebyshev(
        lambda g, x: g.op("Sub", g.op("Add", x, x), _c(g, 1, x.dtype))),
    "chebyshev_polynomial_w": _chebyshev(
        lambda g, x: g.op("Add", g.op("Add", x, x), _c(g, 1, x.dtype))),
    # H_k+1 = 2x H_k - 2k H_k-1
    "hermite_polynomial_h": (
        lambda g, x: g.op("Add", x, x),
        lambda g, x, k, p, q: g.op("Sub", g.op("Mul", g.op("Add", x, x), p),
                                   g.op("Mul", g.op("Add", k, k), q))),
    # He_k+1 = x He_k - k He_k-1
    "hermite_polynomial_he": (
        lambda g, x: x,
        lambda g, x, k, p, q: g.op("Sub", g.op("Mul", x, p), g.op("Mul", k, q))),
    # L_k+1 = ((2k + 1 - x) L_k - k L_k-1) / (k + 1)
    "laguerre_polynomial_l": (
        lambda g, x: g.op("Sub", _c(g, 1, x.dtype), x),
        lambda g, x, k, p, q: g.op("Div", g.op("Sub", g.op("Mul", g.op("Sub", g.op(
            "Add", g.op("Add", k, k), _c(g, 1, x.dtype)), x), p), g.op("Mul", k, q)),
            g.op("Add", k, _c(g, 1, x.dtype)))),
    # P_k+1 = ((2k + 1) x P_k - k P_k-1) / (k + 1)
    "legendre_polynomial_p": (
        lambda g, x: x,
        lambda g, x, k, p, q: g.op("Div", g.op("Sub", g.op("Mul", g.op("Mul", g.op(
            "Add", g.op("Add", k, k), _c(g, 1, x.dtype)), x), p), g.op("Mul", k, q)),
            g.op("Add", k, _c(g, 1, x.dtype)))),
}


def _polynomial(g, x, n, family: str, shifted: bool):
    dtype = expected_dtype(g)
    dtype = dtype if dtype in FLOAT_TYPES else ir.DataType.FLOAT
    x = cast(g, x if isinstance(x, ir.Value) else g.const(float(x)), dtype)
    n = n if isinstance(n, ir.Value) else g.const(float(n))
    # torch takes the degree as an integer (a fractional n is truncated).
    degree = cast(g, n, _I64) if n.dtype in FLOAT_TYPES else cast(g, n, _I64)
    # x and n broadcast together.
    shape = g.op("Shape", g.op("Add", x, cast(g, degree, dtype)))
    x = g.op("Expand", x, shape)
    degree = g.op("Expand", degree, shape)
    if shifted:
        x = g.op("Sub", g.op("Add", x, x), _c(g, 1, dtype))
    first, step = _FAMILIES[family]
    one = g.op("Expand", _c(g, 1, dtype), shape)
    p1 = g.op("Expand", first(g, x), shape)
    zero = g.op("Expand", _c(g, 0, dtype), shape)
    result = g.op("Where", g.op("Equal", degree, g.const(0, _I64)), one,
                  g.op("Where", g.op("Equal", degree, g.const(1, _I64)), p1, zero))
    # Loop body: iteration i computes P_{i+2} from P_{i+1}, P_i.
    body = g.subgraph(f"{family}_step")
    i = body.add_input(f"{family}_i", _I64, [])
    body.add_input(f"{family}_cond", ir.DataType.BOOL, [])
    q = body.add_input(f"{family}_previous", dtype, None)
    p = body.add_input(f"{family}_current", dtype, None)
    kept = body.add_input(f"{family}_result", dtype, None)
    k_int = body.op("Add", i, body.const(1, _I64))
    k = body.op("Cast", k_int, to_i=int(dtype))
    following = step(body, x, k, p, q)
    reached = body.op("Equal", degree, body.op("Add", k_int, body.const(1, _I64)))
    body.add_output(body.op("Identity", body.const(True)))
    body.add_output(p)
    body.add_output(following)
    body.add_output(body.op("Where", reached, following, kept))
    steps = g.op("Max", g.op("Sub", g.op("ReduceMax", g.op("Concat", g.op(
        "Reshape", degree, g.const([-1], _I64)), g.const([0], _I64), axis_i=0), keepdims_i=0),
        g.const(1, _I64)), g.const(0, _I64))
    carried = g.op("Loop", steps, None, one, p1, result, body_g=body.graph, outputs=3)
    for value in carried:
        value.dtype = dtype
    result = carried[2]
    # A negative degree gives 0.
    return g.op("Where", g.op("Less", degree, g.const(0, _I64)), zero, result)


def _register(family: str, shifted: bool = False) -> None:
    name = ("shifted_" if shifted else "") + family

    def translation(g, x, n):
        return _polynomial(g, x, n, family, shifted)

    translation.__name__ = name
    translation.__doc__ = f"special_{name}(Tensor x, Tensor n) -> Tensor"
    translates(f"aten::special_{name}", f"aten::special_{name}.x_scalar",
               f"aten::special_{name}.n_scalar", since_opset=13)(translation)


for _family in _FAMILIES:
    _register(_family)
for _family in ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
                "chebyshev_polynomial_w"):
    _register(_family, shifted=True)
