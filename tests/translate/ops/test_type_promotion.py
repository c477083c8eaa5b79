"""Type promotion as torch does it (SPEC B8): python scalars and 0-d tensors mixed with tensors
of other dtypes, integer division and remainder, comparisons and where, exported and compared
with eager on values and dtypes (check_dtype is on in check)."""

from __future__ import annotations

import operator

import pytest
import torch

from op_check import check

torch.manual_seed(0)
_I64 = torch.randint(-7, 8, (3, 4))
_NONZERO_I64 = torch.where(_I64 == 0, torch.tensor(3), _I64)
OPERANDS = {
    "float32": torch.randn(3, 4) * 3,
    "float16": (torch.randn(3, 4) * 3).half(),
    "int64": _I64,
    "int32": _I64.int(),
    "int16": _I64.to(torch.int16),
    "int8": _I64.to(torch.int8),
    "uint8": _I64.abs().to(torch.uint8),
    "bool": _I64 > 0,
    "0-d float64": torch.tensor(2.5, dtype=torch.float64),
    "0-d int64": torch.tensor(-3),
    "0-d int32": torch.tensor(2, dtype=torch.int32),
    "0-d bool": torch.tensor(True),
    "nonzero int64": _NONZERO_I64,
    "nonzero int32": _NONZERO_I64.int(),
}

BINARY = {
    "add": torch.add, "mul": torch.mul, "div": torch.div,
    "floor_divide": torch.floor_divide, "remainder": torch.remainder, "fmod": torch.fmod,
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "lt": torch.lt, "eq": torch.eq, "maximum": torch.maximum,
}
# (left, right): tensors of other dtypes, 0-d tensors (which promote only within their
# category), and small integer types whose promotion (uint8 with int8 -> int16) ONNX Runtime
# has few kernels for.
PAIRS = [("int64", "0-d float64"), ("int32", "0-d int64"), ("float16", "0-d float64"),
         ("uint8", "int8"), ("bool", "int32"), ("int16", "0-d bool"), ("0-d int32", "float16"),
         ("int8", "nonzero int32"), ("uint8", "nonzero int64")]


def _valid(name, left, right):
    if name in ("floor_divide", "remainder", "fmod", "div_trunc") and \
            not right.dtype.is_floating_point and (right == 0).any():
        return False  # integer division by zero: torch raises, ONNX Runtime is undefined
    return True


BINARY_CASES = [pytest.param(name, l, r, id=f"{name}-{l}-{r}")
                for name in BINARY for l, r in PAIRS
                if _valid(name, OPERANDS[l], OPERANDS[r])]


@pytest.mark.parametrize("name, left, right", BINARY_CASES)
def test_binary_tensor_operands(name, left, right):
    check(BINARY[name], OPERANDS[left], OPERANDS[right])


SCALARS = [2.5, -3, True]
# Operators, so that a scalar can stand on the left (torch.lt(2.5, x) is no torch call).
OPERATORS = {"add": operator.add, "mul": operator.mul, "div": operator.truediv,
             "floor_divide": operator.floordiv, "remainder": operator.mod, "lt": operator.lt}


SCALAR_CASES = [pytest.param(name, scalar, operand, id=f"{name}-{scalar!r}-{operand}")
                for name in OPERATORS for scalar in SCALARS
                for operand in ["int64", "uint8", "bool", "float16"]
                # dividing by True is dividing by 1: nothing that -3 does not cover
                if not (name in ("floor_divide", "remainder") and scalar is True)]


@pytest.mark.parametrize("name, scalar, operand", SCALAR_CASES)
def test_python_scalar_operands(name, scalar, operand):
    # A negative int with an unsigned tensor wraps (uint8 + -3 adds 253), as in torch.
    check(lambda x: OPERATORS[name](x, scalar), OPERANDS[operand])
    if name in ("add", "mul", "lt"):
        check(lambda x: OPERATORS[name](scalar, x), OPERANDS[operand])


@pytest.mark.parametrize("true, false", [("int64", "float16"), ("uint8", "int8"),
                                         ("int16", "0-d int64"), ("bool", "int32"),
                                         ("float16", "0-d float64")])
def test_where_with_mixed_dtypes(true, false):
    check(lambda c, a, b: torch.where(c, a, b), OPERANDS["bool"], OPERANDS[true],
          OPERANDS[false])


@pytest.mark.parametrize("other", [2.5, 7, False], ids=["float", "int", "bool"])
def test_where_with_a_python_scalar(other):
    check(lambda c, a: torch.where(c, a, other), OPERANDS["bool"], OPERANDS["int16"])
    check(lambda c, a: torch.where(c, other, a), OPERANDS["bool"], OPERANDS["uint8"])


@pytest.mark.parametrize("operand", ["int16", "uint8", "int8"])
def test_small_integer_ops_without_runtime_kernels(operand):
    # ONNX Runtime's CPU has no int16 Max/Min/ReduceMax/ArgMax, no uint8 Relu: they run in
    # int32 between Casts, exactly.
    x = OPERANDS[operand]
    check(lambda t: (torch.relu(t), t.amax(1), t.amin(0), torch.argmax(t, 1),
                     torch.clamp(t, max=3)), x)


@pytest.mark.parametrize("operand", ["int16", "uint8", "int8"])
def test_small_integer_ops_outside_onnx_types_or_kernels(operand):
    # int8 Pow and MatMul are invalid ONNX (the export failed its own check); int8 Trilu,
    # uint8 Unique and int16 Pad have no ONNX Runtime CPU kernel. They run in int32 between
    # Casts: a product that overflows the small type wraps back as torch's does.
    x = OPERANDS[operand] * 3
    check(lambda t: (t * t, t.square(), t ** 2, t @ t.transpose(0, 1), t.tril(),
                     torch.nn.functional.pad(t, (1, 2), value=5), torch.unique(t)), x)


class _IntegersTimesFloats(torch.nn.Module):
    def forward(self, i, h):
        return (i * 2.5, 1.5 + i, i - 0.25, torch.where(i > 0, i, 1.5), i / 0.5,
                torch.remainder(i, 2.5), h * 0.1, torch.pow(i.clamp(0, 4), 0.5))


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_python_floats_with_integer_tensors_on_the_torchscript_path(dynamic):
    # The tracer records 2.5 as a 0-d double constant; with dynamic axes the fake run took it
    # as a tensor, and i * 2.5 was float64 where torch gives float32 (a silent dtype change).
    i = torch.randint(-9, 9, (3, 4))
    h = torch.randn(3, 4).half()
    axes = {"i": [0], "h": [0]} if dynamic else None
    check(_IntegersTimesFloats(), i, h, dynamo=False, input_names=["i", "h"], dynamic_axes=axes,
          rtol=1e-3, atol=1e-3,  # (h * 0.1 in float16)
          run_with=[(torch.randint(-9, 9, (5, 4)), torch.randn(5, 4).half())] if dynamic else ())
