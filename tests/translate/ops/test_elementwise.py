"""Elementwise ops (ops/elementwise.py): unary and binary families from OpInfo samples, the
activations, type promotion and in-place forms by hand."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from op_check import BOTH_PATHS, PATH_IDS, cases, check, check_opinfo, count, op_types, opinfo_cases

UNARY = [
    "sigmoid", "tanh", "exp", "log", "sqrt", "neg", "abs", "reciprocal", "sin", "cos", "tan",
    "asin", "acos", "atan", "sinh", "cosh", "erf", "floor", "ceil", "round", "round:decimals_3",
    "round:decimals_neg_3", "sign", "isnan", "positive", "rsqrt", "logit", "clamp",
    "clamp_min", "clamp_max", ("clamp", torch.int64), ("logical_not", torch.bool),
    "logical_not", ("bitwise_not", torch.int64), ("bitwise_not", torch.uint8),
    ("bitwise_not", torch.bool), ("neg", torch.int64), ("abs", torch.int64),
    # float functions of integers compute in float; floor/ceil/round of integers are identities
    ("exp", torch.int64), ("sqrt", torch.int64), ("sigmoid", torch.int64), ("sin", torch.int64),
    ("erf", torch.int64), ("reciprocal", torch.int64), ("rsqrt", torch.int64),
    ("floor", torch.int64), ("ceil", torch.int64), ("round", torch.int64),
    ("isnan", torch.int64), ("sign", torch.int64), ("nn.functional.relu", torch.int64),
    "nn.functional.relu", "nn.functional.hardswish", "nn.functional.hardsigmoid",
    "nn.functional.mish", "nn.functional.silu", "nn.functional.gelu", "nn.functional.hardtanh",
    "nn.functional.relu6", "nn.functional.leaky_relu", "nn.functional.elu",
    "nn.functional.selu", "nn.functional.softplus", "nn.functional.prelu",
    "expm1", "log1p", ("expm1", torch.int64), ("log1p", torch.int64), ("expm1", torch.float64),
    "nn.functional.celu", ("nn.functional.celu", torch.float64), "nn.functional.logsigmoid",
]

BINARY = [
    "add", "sub", "rsub", "mul", "div:no_rounding_mode", "div:trunc_rounding",
    "div:floor_rounding", "true_divide", "floor_divide", "remainder", "fmod", "pow", "atan2",
    "maximum", "minimum", "fmax", "fmin", "max:binary", "min:binary",
    "eq", "ne", "lt", "le", "gt", "ge", "where", "masked_fill",
    "logical_and", "logical_or", "logical_xor",
    ("logical_and", torch.bool), ("logical_or", torch.bool), ("logical_xor", torch.bool),
    ("bitwise_and", torch.int64), ("bitwise_or", torch.int64), ("bitwise_xor", torch.int64),
    ("bitwise_and", torch.bool), ("add", torch.int64), ("mul", torch.int64),
    ("sub", torch.int64), ("div:floor_rounding", torch.int64),
    ("div:trunc_rounding", torch.int64), ("floor_divide", torch.int64),
    ("remainder", torch.int64), ("fmod", torch.int64), ("maximum", torch.int64),
    ("eq", torch.int64), ("lt", torch.int64),
    # bools: ORT has no bool Where, ONNX no bool Less/Greater
    ("where", torch.bool), ("masked_fill", torch.bool), ("lt", torch.bool), ("ge", torch.bool),
    ("maximum", torch.bool), ("mul", torch.bool), ("add", torch.bool),
    ("atan2", torch.bool), ("atan2", torch.int64),  # in float32, atan2(0, 0) = 0 included
    # bit shifts: ONNX BitShift is for unsigned ints; signed ones by powers of two
    *[(f"bitwise_{side}_shift", dtype) for side in ("left", "right")
      for dtype in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)],
]


@pytest.mark.parametrize("name, variant, dtype, subset", opinfo_cases(UNARY))
def test_unary_opinfo(name, variant, dtype, subset):
    check_opinfo(name, variant, dtype, subset, limit=3)


@pytest.mark.parametrize("name, variant, dtype, subset", opinfo_cases(BINARY))
def test_binary_opinfo(name, variant, dtype, subset):
    check_opinfo(name, variant, dtype, subset, limit=3)


X = torch.randn(3, 5) * 3
POSITIVE = torch.rand(3, 5) + 0.1
INTS = torch.tensor([[-7, -3, 0, 4, 9], [5, -5, 8, -8, 1]])


def _in_place(x):
    y = x.clone()
    y.mul_(2).add_(1).sub_(0.5).div_(3).pow_(2)
    y.relu_()
    z = x.clone().sigmoid_().tanh_()
    w = x.clone()
    F.hardtanh_(w, -1.0, 1.0)
    F.leaky_relu_(w, 0.2)
    F.elu_(w)
    F.relu6(w, inplace=True)
    F.hardswish(w, inplace=True)
    F.hardsigmoid(w, inplace=True)
    F.silu(w, inplace=True)
    F.mish(w, inplace=True)
    F.selu(w, inplace=True)
    v = x.clone().clamp_(-1, 1).clamp_min_(-0.5).clamp_max_(0.5)
    v.masked_fill_(x > 1, 2.0)
    return y, z, w, v

INF, NAN = float("inf"), float("nan")

HAND = {
    # activations and their parameters
    "elu with scale and input_scale": (
        lambda x: torch.ops.aten.elu(x, 0.7, 1.3, 0.8), X),
    "softplus beta and threshold": (lambda x: F.softplus(x, beta=2.0, threshold=1.5), X),
    "hardtanh bounds": (lambda x: F.hardtanh(x, -2.0, 0.5), X),
    "leaky_relu slope": (lambda x: F.leaky_relu(x, 0.3), X),
    "prelu channels": (lambda x, w: F.prelu(x, w), torch.randn(2, 3, 4, 4), torch.rand(3)),
    "prelu one weight": (lambda x, w: F.prelu(x, w), torch.randn(2, 3, 4), torch.rand(1)),
    "logit with eps": (lambda x: torch.logit(x, eps=1e-3), torch.rand(3, 5)),
    "logit without eps": (torch.logit, torch.rand(3, 5) * 0.9 + 0.05),
    "rsqrt": (torch.rsqrt, POSITIVE),
    "gelu exact": (F.gelu, X),
    "gelu tanh": (lambda x: F.gelu(x, approximate="tanh"), X),
    "silu": (F.silu, X),
    "relu6": (F.relu6, X),
    "selu": (F.selu, X),
    "mish": (F.mish, X),
    "softsign": (F.softsign, X),
    "hardsigmoid": (F.hardsigmoid, X),
    "in-place forms": (_in_place, X),
    "celu": (lambda x: F.celu(x, 0.5), X),
    "celu float64 (no ONNX Celu)": (lambda x: F.celu(x, 2.0), X.double()),
    "logsigmoid of large values": (F.logsigmoid, torch.tensor([-100.0, -20.0, 0.0, 20.0, 100.0])),
    "expm1 edges": (torch.expm1, torch.tensor([0.0, -0.0, 1e-3, -5.0, 50.0, 100.0, -200.0,
                                                float("inf"), float("-inf"), float("nan")])),
    "log1p edges": (torch.log1p, torch.tensor([0.0, 1e-3, -0.5, -1.0, -2.0, 1e30,
                                               float("inf"), float("nan")])),
    # bit shifts
    "shift operators by a scalar": (lambda x: (x << 3, x >> 2), INTS),
    "shift by a tensor": (lambda x, s: (x << s, x >> s), INTS, torch.tensor([0, 1, 5, 62, 63])),
    "shift by the width or more, or a negative amount": (
        lambda x, s: (x << s, x >> s), torch.tensor([5, -5, 7, -7, 1]),
        torch.tensor([64, 65, -1, 100, 63])),
    "int32 shift wraps": (lambda x, s: (x << s, x >> s),
                          torch.tensor([5, -5, 2**30, -(2**31), 3], dtype=torch.int32),
                          torch.tensor([30, 31, 1, 1, 32], dtype=torch.int32)),
    "int8 shift wraps": (lambda x: (x << 3, x >> 3, x << 7, x >> 7),
                         torch.tensor([100, -100, 1, -1, -128, 127], dtype=torch.int8)),
    "uint8 shifts": (lambda x, s: (x << s, x >> s), torch.tensor([1, 200, 255, 16, 3],
                                                                  dtype=torch.uint8),
                     torch.tensor([0, 1, 7, 8, 9], dtype=torch.uint8)),
    "bitwise_left_shift of a scalar by a tensor": (
        lambda s: torch.bitwise_left_shift(3, s), torch.tensor([0, 1, 4, 70])),
    "in-place shifts": (lambda x: x.clone().bitwise_left_shift_(2).__irshift__(1), INTS),
    # clamp
    "clamp with tensor bounds": (torch.clamp, X, -torch.rand(3, 5), torch.rand(1, 5)),
    "clamp with a tensor min only": (lambda x, m: torch.clamp(x, min=m), X, torch.rand(5)),
    "clamp with a max only": (lambda x: torch.clamp(x, max=0.5), X),
    "clamp min above max": (lambda x: torch.clamp(x, 0.6, 0.4), X),
    "clamp int by float": (lambda x: torch.clamp(x, -2.5, 3.5), INTS),
    # binary forms, scalars and promotion
    "add alpha": (lambda x, y: torch.add(x, y, alpha=2.5), X, POSITIVE),
    "sub alpha": (lambda x, y: torch.sub(x, y, alpha=-1.5), X, POSITIVE),
    "rsub scalar": (lambda x: 2 - x, X),
    "rsub alpha": (lambda x, y: torch.rsub(x, y, alpha=3), X, POSITIVE),
    "int tensor plus float scalar": (lambda x: x + 1.5, INTS),
    "int tensor times float tensor": (lambda x, y: x * y, INTS, X[:2]),
    "bool plus int": (lambda x, y: (x > 0) + y, X[:2], INTS),
    "int true division": (lambda x, y: x / y, INTS, torch.tensor([3, -2, 7, 5, -3])),
    "int floor division by negatives": (
        lambda x, y: torch.div(x, y, rounding_mode="floor"), INTS,
        torch.tensor([3, -2, 7, 5, -3])),
    "int trunc division by negatives": (
        lambda x, y: torch.div(x, y, rounding_mode="trunc"), INTS,
        torch.tensor([3, -2, 7, 5, -3])),
    "float floor division": (lambda x: torch.floor_divide(x, -0.7), X),
    "remainder by negative": (lambda x: torch.remainder(x, -1.3), X),
    "fmod by scalar": (lambda x: torch.fmod(x, 1.3), X),
    # At exact multiples a - floor(a / b) * b rounds to 0 where torch gives b (2.1 % 0.7).
    "remainder at multiples": (
        lambda x: (x % 0.7, x % -0.7, torch.remainder(x, 0.3)),
        torch.tensor([1.4, 2.1, -0.7, 0.3, -1.0, 0.0, -2.1, 0.9, float("inf")])),
    "remainder of tensors": (
        torch.remainder, torch.tensor([2.1, 2.1, -2.1, -2.1, 5.0, 1.0, -1.0]),
        torch.tensor([0.7, -0.7, 0.7, -0.7, 0.0, float("inf"), float("inf")])),
    "remainder and fmod of ints": (
        lambda x, y: (torch.remainder(x, y), torch.fmod(x, y), x % -3, torch.fmod(x, 4)),
        torch.tensor([7, -7, 7, -7, 0, 6]), torch.tensor([3, 3, -3, -3, 3, -3])),
    "pow by scalar": (lambda x: x ** 3, X),
    "scalar pow by tensor": (lambda x: 2.0 ** x, X),
    "pow int": (lambda x: x ** 2, INTS),
    "atan2 all quadrants": (torch.atan2, torch.tensor([1.0, 1.0, -1.0, -1.0, 0.5]),
                            torch.tensor([1.0, -1.0, 1.0, -1.0, -2.0])),
    "atan2 of zeros and infinities": (
        torch.atan2,
        torch.tensor([0.0, 0.0, -0.0, 0.0, 1.0, -1.0, INF, INF, -INF, 1.0, 1.0, 3.0, -2.0]),
        torch.tensor([0.0, -1.0, -1.0, -0.0, 0.0, 0.0, INF, 1.0, -INF, -INF, NAN, -4.0, 0.5])),
    "fmax/fmin ignore nan": (
        lambda x, y: (torch.fmax(x, y), torch.fmin(x, y)),
        torch.tensor([1.0, float("nan"), 3.0, float("nan")]),
        torch.tensor([float("nan"), 2.0, 1.0, float("nan")])),
    "maximum propagates nan": (
        torch.maximum, torch.tensor([1.0, float("nan")]), torch.tensor([float("nan"), 2.0])),
    "isnan": (torch.isnan, torch.tensor([1.0, float("nan"), float("inf")])),
    "where with scalars": (lambda x: torch.where(x > 0, x, 0.0), X),
    "where with two scalars": (lambda x: torch.where(x > 0, 1.0, -1.0), X),
    "where int condition": (lambda c, x, y: torch.where(c.bool(), x, y), INTS[:, :3] % 2,
                            torch.randn(2, 3), torch.randn(1, 3)),
    "masked_fill tensor value": (lambda x, v: x.masked_fill(x > 0, v), X, torch.tensor(-9.0)),
    "masked_fill broadcast mask": (lambda x, m: x.masked_fill(m, 0.5), X,
                                   torch.tensor([True, False, True, False, False])),
    "comparisons with scalars": (lambda x: (x > 0.5, x <= 1, x == 0, x != 2, x >= -1, x < 0),
                                 X),
    "ne tensors": (torch.ne, INTS, INTS.flip(0)),
    "logical ops on floats": (lambda x, y: (torch.logical_and(x, y), torch.logical_or(x, y),
                                            torch.logical_xor(x, y), torch.logical_not(x)),
                              torch.tensor([0.0, 1.5, 0.0, -2.0]),
                              torch.tensor([0.0, 0.0, 3.0, 1.0])),
    "bitwise on ints": (lambda x, y: (x & y, x | y, x ^ y, ~x), INTS, INTS.flip(1)),
    "bitwise on bools": (lambda x, y: (x & y, x | y, x ^ y, ~x), INTS > 0, INTS < 3),
    "arithmetic on bools stays bool": (
        lambda x, y: (x * y, x + y, torch.maximum(x, y), torch.minimum(x, y)), INTS > 0, INTS < 3),
    "float functions of ints": (lambda x: (x.exp(), x.sqrt(), x.sigmoid(), torch.rsqrt(x),
                                           x.tanh(), x.floor(), x.round()), INTS.abs() + 1),
}


@pytest.mark.parametrize("case", cases(HAND))
def test_elementwise(case):
    function, *args = case
    check(function, *args)


@pytest.mark.parametrize("opset, fused", [(13, False), (14, True)])
@pytest.mark.parametrize("inplace", [False, True])
def test_hardswish_is_one_node_from_opset_14(opset, fused, inplace):
    program = check(lambda x: F.hardswish(x.clone(), inplace=inplace), X, opset=opset)
    assert op_types(program) == (["HardSwish"] if fused else ["HardSigmoid", "Mul"])


@pytest.mark.parametrize("opset, nodes", [(17, None), (18, ["Mish"])])
def test_mish_is_one_node_from_opset_18(opset, nodes):
    program = check(F.mish, X, opset=opset)
    if nodes is not None:
        assert op_types(program) == nodes
    else:
        assert "Mish" not in op_types(program)  # decomposed (softplus, tanh) below 18


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("opset", [18, 20])
def test_gelu_is_a_single_gelu_from_opset_20(opset, approximate):
    program = check(lambda x: F.gelu(x, approximate=approximate), X, opset=opset)
    if opset >= 20:
        assert op_types(program) == ["Gelu"]
        assert program.model.graph.node(0).attributes["approximate"].value == approximate
    else:
        assert "Gelu" not in op_types(program)
        assert ("Tanh" in op_types(program)) == (approximate == "tanh")


@pytest.mark.parametrize("opset", [13, 18])
def test_bitwise_not_on_integers(opset):
    program = check(torch.bitwise_not, INTS, opset=opset)
    assert ("BitwiseNot" in op_types(program)) == (opset >= 18)


def test_clamp_with_scalars_is_one_clip():
    program = check(lambda x: x.clamp(-1, 1), X)
    assert op_types(program) == ["Clip"]


def test_relu_is_one_relu():
    assert op_types(check(torch.relu, X)) == ["Relu"]


def test_silu_is_sigmoid_times_x():
    program = check(F.silu, X)
    assert count(program, "Sigmoid") == 1 and count(program, "Mul") == 1


def test_default_softplus_is_one_node():
    assert op_types(check(F.softplus, X)) == ["Softplus"]


# float32 values whose expm1/log1p lose every digit as Exp(x) - 1 or Log(1 + x)
TINY = torch.tensor([1e-10, -3e-9, 1e-7, -3e-6, 2e-5])


@pytest.mark.parametrize("function", [torch.expm1, torch.log1p], ids=["expm1", "log1p"])
def test_expm1_and_log1p_keep_the_digits_of_small_values(function):
    check(function, TINY, rtol=1e-5, atol=0.0)


@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int32, torch.int64])
def test_bit_shifts_at_opsets(dtype, opset):
    """BitShift for unsigned ints only; signed ones multiply/divide by powers of two."""
    x = torch.tensor([1, 3, 100, 127, 0, 64], dtype=torch.int64).to(dtype)
    if dtype != torch.uint8:
        x = torch.cat([x, -x])
    s = (torch.arange(x.numel()) % 9).to(dtype)
    program = check(lambda x, s: (x << s, x >> s, x << 2, x >> 1), x, s, opset=opset)
    assert ("BitShift" in op_types(program)) == (dtype == torch.uint8)


def test_celu_is_one_celu():
    assert op_types(check(lambda x: F.celu(x, 0.5), X)) == ["Celu"]


def test_logsigmoid_is_a_negated_softplus():
    assert op_types(check(F.logsigmoid, X)) == ["Neg", "Softplus", "Neg"]


@pytest.mark.parametrize("dtype", [torch.float16, torch.float64, torch.int8, torch.int32])
def test_remainder_and_fmod_in_other_dtypes(dtype):
    x = torch.tensor([2.1, -2.1, 7.0, -7.0, 1.4, 0.0]).to(dtype)
    y = torch.tensor([0.7, 0.7, -3.0, 3.0, -0.7, 2.0]).to(dtype)
    if not dtype.is_floating_point:
        y = torch.tensor([3, 3, -3, 3, -2, 2], dtype=dtype)
    check(lambda x, y: (torch.remainder(x, y), torch.fmod(x, y)), x, y)


SPECIAL = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, -2.5, 2.5, -0.3, 7.9])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_sign_of_nan_is_zero_as_in_torch(dtype):
    # Found by the fuzzer: ONNX Runtime's Sign(NaN) is NaN.
    check(torch.sign, SPECIAL.to(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64])
def test_trunc_of_specials(dtype):
    # Found by the fuzzer: aten::trunc fell to prims::trunc, which has no translation.
    x = SPECIAL.to(dtype) if dtype.is_floating_point else torch.tensor([-3, 0, 4])
    program = check(lambda x: (torch.trunc(x), torch.fix(x)), x)
    if dtype.is_floating_point:  # -0.0 and -0.3 give -0.0 (1 / trunc(x) is -inf)
        assert torch.signbit(program(x)[0][[4, 7]]).all()


@pytest.mark.parametrize("opset", [13, 17])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8])
def test_bitwise_ops_of_integers_before_opset_18_go_bit_by_bit(dtype, opset):
    # Before BitwiseAnd/Or/Xor (opset 18) the ops are composed from BitShift; the extremes and
    # negatives check the top bit and two's complement.
    info = torch.iinfo(dtype)
    x = torch.tensor([info.min, info.max, 0, 1, info.max // 3, info.min // 5 - 7], dtype=torch.int64)
    y = torch.tensor([info.max, info.min, info.min, -1 % (info.max + 1), info.min // 3, 12345 % info.max])
    x, y = x.to(dtype), y.to(dtype)
    program = check(lambda x, y: (x & y, x | y, x ^ y, x & 6), x, y, opset=opset)
    assert "BitwiseAnd" not in op_types(program) and "BitShift" in op_types(program)
    check(lambda x, y: (x & y, x ^ y), x > 0, y < 2, opset=opset)  # bools: And/Or/Xor


@pytest.mark.parametrize("opset", [13, 17, 23])
def test_relu_of_integers_at_every_opset(opset):
    # ONNX Runtime has no int64 Relu kernel at opsets 14-17 and 22-23 (nor integer Relu at 13).
    program = check(torch.relu, INTS, opset=opset)
    assert "Relu" not in op_types(program)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_trunc_division_keeps_the_sign_of_zero(dtype):
    # Found by the fuzzer: 1 / (0 // -2 truncated) was +inf, torch's -inf.
    x = torch.tensor([0.0, -0.0, 1.0, -3.0, 5.0], dtype=dtype)
    y = torch.tensor([-2.0, 2.0, -4.0, 2.0, 0.0], dtype=dtype)
    check(lambda x, y: torch.reciprocal(torch.div(x, y, rounding_mode="trunc")), x, y)


@pytest.mark.parametrize("opset", [17, 18, 23])
def test_atan2_of_float16_at_every_opset(opset):
    # Found by the fuzzer: IsInf of float16 made a model ONNX Runtime refused below opset 20.
    y = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), 1.5, -2.0], dtype=torch.float16)
    x = torch.tensor([-0.0, 0.0, float("inf"), -float("inf"), -3.0, 0.5], dtype=torch.float16)
    check(torch.atan2, y, x, opset=opset)
    check(lambda y: torch.atan2(y, torch.tensor(True)), y, opset=opset)


@pytest.mark.parametrize("opset", [17, 23])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_log1p_keeps_the_sign_of_zero(dtype, opset):
    # Found by the fuzzer: log1p(-0.0) was +0.0 (ONNX Runtime's Where drops the sign of a
    # -0.0 in its first branch), so atan2(log1p(x), log1p(x)) was 0 where torch gives -pi.
    x = torch.tensor([0.0, -0.0, -1.0, -1.5, INF, -INF, NAN, 1e-3, -0.5], dtype=dtype)
    check(lambda x: (torch.log1p(x), torch.reciprocal(torch.log1p(x))), x, opset=opset)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_float_floor_division_of_infinities_and_zeros(dtype):
    # Found by the fuzzer: Floor(a / b) gave inf for inf // 2 (torch: NaN), -0.0 for
    # 3 // -inf (torch: -1), +0.0 for -0.0 // 2, and 2 for 2.1 // 0.7 (torch: 3).
    values = torch.tensor([0.0, -0.0, 1.0, -2.1, 2.1, 0.7, -0.7, 5.5, 1e-30, INF, -INF, NAN])
    a = values.repeat_interleave(len(values)).to(dtype)
    b = values.repeat(len(values)).to(dtype)
    program = check(lambda a, b: (torch.div(a, b, rounding_mode="floor"),
                                  torch.reciprocal(a // b), torch.floor_divide(a, -0.7)), a, b)
    assert "Mod" in op_types(program)


def test_integer_pow_of_zero_by_negative_exponents_is_zero():
    # Found by the fuzzer: ONNX Runtime's integer Pow gave int64's minimum for 0 ** -1.
    base = torch.tensor([0, 1, -1, 2, -2, 3, 0, 0, 5, -3])
    exponent = torch.tensor([-1, -2, -3, -1, -2, 0, 0, 3, 2, 3])
    check(lambda b, e: (torch.pow(b, e), torch.pow(b.int(), e.int()), torch.pow(b > 0, e),
                        torch.pow(0, e)), base, exponent)
    assert op_types(check(lambda x: x ** 2, base)) == ["Pow"]


def test_float16_floor_division_of_tensors_stays_in_float16():
    # Found by the fuzzer: computed in float32, the Cast to float32 met the Cast ONNX Runtime
    # puts after its float32 CumSum, and it dropped both: x // y saw y unrounded, and the
    # last quotient (x == y in float16) was 0 instead of 1.
    x = torch.tensor([-0.76904296875, -0.2130126953125, -0.69287109375], dtype=torch.float16)

    def function(x):
        v = F.logsigmoid(x)
        return torch.div(v, torch.cumsum(v.flip(0), 0).flip(0), rounding_mode="floor")
    check(function, x, opset=23)


@pytest.mark.parametrize("dynamo", BOTH_PATHS, ids=PATH_IDS)
def test_floor_division_of_a_0d_small_integer_by_a_number_keeps_its_dtype(dynamo):
    # Traced, the 2 is a 0-d int64 tensor of its own: with the 0-d uint8 it promoted to int64,
    # where torch's result (a wrapped number) is uint8, and the checker refused the file.
    check(lambda x, y: ((x + 3) // 2, x // 3, torch.div(y, 2, rounding_mode="trunc")),
          torch.tensor(7, dtype=torch.uint8), torch.tensor(-7, dtype=torch.int8), dynamo=dynamo)
