"""Matrix products (ops/linalg.py): linear, matmul and the BLAS-style fused forms."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import onnxport

from op_check import cases, check, check_opinfo, op_types, opinfo_cases

LINALG = [
    "nn.functional.linear", "matmul", "mm", "bmm", "addmm", "baddbmm", "addbmm", "dot", "vdot",
    "mv", "inner",
]


@pytest.mark.parametrize("name, variant, dtype, subset", opinfo_cases(LINALG))
def test_linalg_opinfo(name, variant, dtype, subset):
    check_opinfo(name, variant, dtype, subset, limit=5)


A = torch.randn(4, 6)
HAND = {
    "linear 2-d": (F.linear, A, torch.randn(3, 6), torch.randn(3)),
    "linear 3-d": (F.linear, torch.randn(2, 4, 6), torch.randn(3, 6), torch.randn(3)),
    "linear no bias": (F.linear, torch.randn(2, 4, 6), torch.randn(3, 6)),
    "linear 1-d input": (F.linear, torch.randn(6), torch.randn(3, 6), torch.randn(3)),
    "nn.Linear": (torch.nn.Linear(6, 5), torch.randn(2, 3, 6)),
    "matmul broadcast": (torch.matmul, torch.randn(2, 1, 4, 6), torch.randn(3, 6, 5)),
    "matmul vector": (torch.matmul, torch.randn(2, 4, 6), torch.randn(6)),
    "mm": (torch.mm, A, torch.randn(6, 2)),
    "bmm": (torch.bmm, torch.randn(3, 4, 6), torch.randn(3, 6, 2)),
    "addmm": (torch.addmm, torch.randn(4, 2), A, torch.randn(6, 2)),
    "addmm alpha beta": (lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0),
                         torch.randn(2), A, torch.randn(6, 2)),
    "baddbmm": (lambda c, a, b: torch.baddbmm(c, a, b, beta=0.0, alpha=0.5),
                torch.randn(3, 4, 2), torch.randn(3, 4, 6), torch.randn(3, 6, 2)),
    "addbmm": (lambda c, a, b: torch.addbmm(c, a, b, beta=2.0, alpha=0.5),
               torch.randn(4, 2), torch.randn(3, 4, 6), torch.randn(3, 6, 2)),
    "dot": (torch.dot, torch.randn(6), torch.randn(6)),
    "vdot": (torch.vdot, torch.randn(6), torch.randn(6)),
    "mv": (torch.mv, A, torch.randn(6)),
    "inner 1-d": (torch.inner, torch.randn(6), torch.randn(6)),
    "inner 2-d": (torch.inner, A, torch.randn(3, 6)),
    "inner 3-d": (torch.inner, torch.randn(2, 4, 6), torch.randn(5, 3, 6)),
    "inner with a scalar": (torch.inner, torch.tensor(2.5), A),
}


@pytest.mark.parametrize("case", cases(HAND))
def test_linalg(case):
    function, *args = case
    check(function, *args)


def test_linear_on_2d_input_is_one_gemm():
    program = check(torch.nn.Linear(6, 3), A)
    assert op_types(program) == ["Gemm"]


def test_linear_on_3d_input_is_rows_through_gemm():
    # Reshape to rows, Gemm, Reshape back: the form ONNX Runtime fuses MatMul+Add into.
    program = check(torch.nn.Linear(6, 3), torch.randn(2, 4, 6))
    assert op_types(program) == ["Reshape", "Gemm", "Reshape"]


def test_linear_on_1d_input_is_matmul_add_with_a_folded_weight():
    program = check(torch.nn.Linear(6, 3), torch.randn(6))
    assert op_types(program) == ["MatMul", "Add"]


def test_addmm_is_one_gemm():
    program = check(torch.addmm, torch.randn(4, 2), A, torch.randn(6, 2))
    assert op_types(program) == ["Gemm"]


class _GroupedMM(torch.nn.Module):
    """Rows sorted by expert times each expert's weight (transformers' grouped_mm experts)."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(3, 8, 4))

    def forward(self, rows, ends):
        return torch._grouped_mm(rows, self.weight, offs=ends)


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_grouped_mm_of_rows_by_expert(dynamo):
    # ends: where each expert's rows end (an expert may have none). Float32 products: on the
    # CPU eager runs them; the meta kernel's CUDA rule refused them (capture/quirks/grouped_mm).
    torch.manual_seed(0)
    model = _GroupedMM()
    example = (torch.randn(6, 8), torch.tensor([2, 2, 6], dtype=torch.int32))
    program = onnxport.export(model, example, input_names=["rows", "ends"],
                              dynamic_axes={"rows": {0: "s"}}, dynamo=dynamo)
    for rows, ends in [example, (torch.randn(9, 8), torch.tensor([4, 7, 9], dtype=torch.int32)),
                       (torch.randn(3, 8), torch.tensor([0, 0, 3], dtype=torch.int32))]:
        torch.testing.assert_close(program(rows, ends)[0], model(rows, ends),
                                   rtol=1e-3, atol=1e-4)
