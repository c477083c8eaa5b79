"""Solves and their factorizations (ops/linalg_solve.py): LU, Cholesky, triangular solves and
what torch builds from them, unrolled into plain ONNX ops."""

from __future__ import annotations

import pytest
import torch

import onnxport
from onnxport.errors import TranslationError
from op_check import cases, check, check_opinfo, opinfo_cases

SOLVE_OPS = [
    "linalg.inv_ex", "linalg.solve", "linalg.solve_triangular", "triangular_solve",
    "linalg.cholesky_ex", "cholesky_solve", "linalg.lu", "linalg.lu_solve", "lu_unpack",
    "linalg.tensorsolve", "linalg.ldl_factor_ex", "linalg.ldl_solve",
]


@pytest.mark.parametrize("name, variant, dtype, subset", opinfo_cases(SOLVE_OPS))
def test_linalg_solve_opinfo(name, variant, dtype, subset):
    check_opinfo(name, variant, dtype, subset, limit=3)


generator = torch.Generator().manual_seed(0)


def randn(*shape):
    return torch.randn(*shape, generator=generator)


A = randn(2, 5, 5)
B = randn(2, 5, 3)
SPD = A @ A.mT + torch.eye(5)
L = torch.linalg.cholesky(SPD)
LU, PIVOTS = torch.linalg.lu_factor(A)
# Entries of equal magnitude in each column: getrf takes the first largest, and so must we
# (check compares the int32 pivots exactly).
TIES = torch.tensor([[1.0, 2.0, -3.0, 1.0], [-1.0, 2.0, 3.0, 0.5],
                     [1.0, -2.0, 3.0, 2.0], [0.5, 2.0, -3.0, 4.0]])
SINGULAR = A.clone()
SINGULAR[1, :, 2] = 0.0

# Small diagonals make Bunch-Kaufman take 2x2 pivots in some of the matrices, 1x1 in others.
SYMMETRIC = randn(6, 5, 5)
SYMMETRIC = SYMMETRIC + SYMMETRIC.mT
SYMMETRIC[::2].diagonal(dim1=-2, dim2=-1).mul_(0.01)
LDL, LDL_PIVOTS = torch.linalg.ldl_factor(SYMMETRIC)

HAND = {
    "lu_factor_ex batched": (torch.linalg.lu_factor_ex, A),
    "lu_factor tall": (torch.linalg.lu_factor, randn(3, 7, 4)),
    "lu_factor wide": (torch.linalg.lu_factor, randn(4, 6)),
    "lu_factor ties": (torch.linalg.lu_factor, TIES),
    "lu_factor_ex singular": (torch.linalg.lu_factor_ex, SINGULAR),
    "lu wide batched": (torch.linalg.lu, randn(2, 3, 5)),
    "lu_unpack": (torch.lu_unpack, LU, PIVOTS),
    "lu_unpack no data": (lambda lu, p: torch.lu_unpack(lu, p, unpack_data=False)[0], LU, PIVOTS),
    "lu_solve": (torch.linalg.lu_solve, LU, PIVOTS, B),
    "lu_solve adjoint": (lambda lu, p, b: torch.linalg.lu_solve(lu, p, b, adjoint=True),
                         LU, PIVOTS, B),
    "lu_solve right": (lambda lu, p, b: torch.linalg.lu_solve(lu, p, b, left=False),
                       LU, PIVOTS, B.mT),
    "lu_solve right adjoint": (lambda lu, p, b: torch.linalg.lu_solve(lu, p, b, left=False,
                                                                      adjoint=True),
                               LU, PIVOTS, B.mT),
    "inv": (torch.linalg.inv, A),
    "inv_ex singular info": (lambda a: torch.linalg.inv_ex(a).info, SINGULAR),
    "solve broadcast": (torch.linalg.solve, A, randn(3, 1, 5, 2)),
    "solve vector": (torch.linalg.solve, A, randn(2, 5)),
    "solve 1-d vector broadcast": (torch.linalg.solve, A, randn(5)),
    "solve right": (lambda a, b: torch.linalg.solve(a, b, left=False), A, B.mT),
    "_linalg_solve_ex right": (lambda a, b: torch.ops.aten._linalg_solve_ex(a, b, left=False),
                               A, B.mT),
    "solve_triangular upper": (lambda a, b: torch.linalg.solve_triangular(a, b, upper=True),
                               A, B),
    "solve_triangular lower right unit": (
        lambda a, b: torch.linalg.solve_triangular(a, b, upper=False, left=False,
                                                   unitriangular=True), A, B.mT),
    "triangular_solve transpose broadcast": (
        lambda b, a: torch.triangular_solve(b, a, upper=False, transpose=True), randn(5, 2),
        A),
    "cholesky": (torch.linalg.cholesky, SPD),
    "cholesky upper": (lambda a: torch.linalg.cholesky(a, upper=True), SPD),
    "cholesky_ex not positive-definite info": (lambda a: torch.linalg.cholesky_ex(a).info,
                                               SPD - 20 * torch.eye(5)),
    "cholesky_solve": (torch.cholesky_solve, B, L),
    "cholesky_solve upper": (lambda b, u: torch.cholesky_solve(b, u, upper=True), B, L.mT),
    "cholesky_inverse": (torch.cholesky_inverse, L),
    "matrix_power negative": (lambda a: torch.linalg.matrix_power(a, -2), A),
    "tensorinv": (lambda a: torch.linalg.tensorinv(a, ind=2), randn(4, 2, 8)),
    "ldl_factor_ex mixed pivots": (torch.linalg.ldl_factor_ex, SYMMETRIC),
    "ldl_factor_ex zero matrix info": (torch.linalg.ldl_factor_ex, torch.zeros(2, 3, 3)),
    "ldl_solve mixed pivots": (torch.linalg.ldl_solve, LDL, LDL_PIVOTS, randn(6, 5, 2)),
}


def test_ldl_samples_have_both_pivot_sizes():
    negative = (LDL_PIVOTS < 0).any(-1)
    assert negative.any() and not negative.all()


@pytest.mark.parametrize("case", cases(HAND))
def test_linalg_solve(case):
    function, *args = case
    check(function, *args)


def test_dynamic_batch_runs_at_another_batch_size():
    batch = torch.export.Dim("batch")
    check(lambda a, b: torch.linalg.solve(a, b), A, B, dynamic_shapes=({0: batch}, {0: batch}),
          run_with=[(randn(4, 5, 5), randn(4, 5, 3))])
    check(lambda a: torch.linalg.cholesky(a), SPD, dynamic_shapes=({0: batch},),
          run_with=[(torch.eye(5).expand(3, 5, 5) * 2,)])


def test_symbolic_matrix_size_is_a_clear_error():
    n = torch.export.Dim("n", min=2, max=16)
    with pytest.raises(TranslationError, match="matrix dims .* must be static"):
        onnxport.export(_Module(torch.linalg.inv), (randn(4, 4),),
                        dynamic_shapes=({0: n, 1: n},))


def test_matrix_larger_than_the_unroll_limit_is_a_clear_error():
    with pytest.raises(TranslationError, match="only up to 64x64"):
        onnxport.export(_Module(torch.linalg.inv), (randn(65, 65),))


class _Module(torch.nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, x):
        return self.function(x)


def test_lu_without_pivoting_is_doolittle():
    """torch has pivot=False on CUDA only, so eager cannot be the reference here: on a matrix
    whose columns are dominated by their diagonal, partial pivoting swaps nothing and both
    give the same factors, pivots 1..n included."""
    dominant = randn(2, 4, 4) + 10 * torch.eye(4)
    program = onnxport.export(_Module(lambda a: torch.linalg.lu_factor_ex(a, pivot=False)),
                              (dominant,))
    LU, pivots, info = program(dominant)
    expected_LU, expected_pivots, _ = torch.linalg.lu_factor_ex(dominant)
    assert torch.equal(expected_pivots, torch.arange(1, 5, dtype=torch.int32).expand(2, 4))
    torch.testing.assert_close(LU, expected_LU, rtol=1e-3, atol=1e-4)
    assert torch.equal(pivots, expected_pivots) and not info.any()
