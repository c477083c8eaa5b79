"""Arithmetic on symbolic sizes (ops/symbolic.py): each operator on a dynamic batch size,
exported once and run at sizes other than the example's."""

from __future__ import annotations

import math

import pytest
import torch

from op_check import cases, check, count, op_types

BATCH = torch.export.Dim("batch", min=8, max=64)
SHAPES = {"x": {0: BATCH}}


def _x(batch):
    return (torch.arange(batch * 3, dtype=torch.float32).reshape(batch, 3),)


HAND = {
    "add": lambda x: x.new_zeros(x.shape[0] + 1),
    "sub": lambda x: x[: x.shape[0] - 1],
    "mul": lambda x: x.new_ones(x.shape[0] * 3),
    "floordiv": lambda x: x.new_zeros(x.shape[0] // 4),
    "mod": lambda x: torch.full((2,), x.shape[0] % 4),
    "truediv": lambda x: x * (x.shape[0] / 4),
    "neg": lambda x: torch.full((2,), -x.shape[0]),
    # (the numel of a square is s0**2: torch records operator.pow; it had no translation)
    "pow, a square's numel": lambda x: (x @ x.T) / (x @ x.T).numel(),
    "pow, a cube and a float exponent": lambda x: (torch.full((1,), x.shape[0] ** 3),
                                                   x * x.shape[0] ** 0.5),
    "sym_max": lambda x: x.new_zeros(torch.sym_max(x.shape[0], 20)),
    "sym_min": lambda x: x.new_zeros(torch.sym_min(x.shape[0], 10)),
    "sym_float": lambda x: x * torch.sym_float(x.shape[0]),
    "math.floor": lambda x: x.new_zeros(math.floor(x.shape[0] / 4)),
    "math.ceil": lambda x: x.new_zeros(math.ceil(x.shape[0] / 4)),
    "math.trunc": lambda x: x.new_zeros(math.trunc(x.shape[0] / 4)),
    "sym_int": lambda x: x.new_zeros(torch.sym_int(x.shape[0] / 4)),
    "lt": lambda x: torch.full((1,), x.shape[0] < 12),
    "eq": lambda x: torch.scalar_tensor(x.shape[0] == 13),
    "gt, le, ge": lambda x: (torch.full((1,), x.shape[0] > 12), torch.full((1,), x.shape[0] <= 12),
                             torch.full((1,), x.shape[0] >= 13)),
    "sizes mixed with constants": lambda x: x.reshape(x.shape[0] * 3 // 3, 3) + x.shape[0],
    "numel": lambda x: torch.full((1,), x.numel()),
    "item of a tensor": lambda x: torch.full((2,), x[0, 1].item()),
    "aten::_local_scalar_dense": lambda x: torch.full(
        (2,), torch.ops.aten._local_scalar_dense(x[1, 2])),
    "item of an int tensor": lambda x: x.new_zeros(3) + x.long()[0, 2].item(),
}


@pytest.mark.parametrize("function", cases(HAND))
def test_symbolic(function):
    check(function, *_x(10), dynamic_shapes=SHAPES, run_with=[_x(13), _x(17), _x(8)])


@pytest.mark.parametrize("opset", [13, 15, 18])
def test_sizes_at_opsets_before_and_with_shape_slicing(opset):
    """size_of reads one dimension with Shape(start, end) from opset 15, Gather before."""
    program = check(lambda x: x.new_zeros(x.shape[0] * 2, 3), *_x(10), dynamic_shapes=SHAPES,
                    run_with=[_x(9)], opset=opset)
    assert ("Gather" in op_types(program)) == (opset < 15)


def test_size_arithmetic_is_few_nodes():
    program = check(HAND["mul"], *_x(10), dynamic_shapes=SHAPES, run_with=[_x(9)])
    assert count(program, "Shape") == 1 and count(program, "Mul") == 1
