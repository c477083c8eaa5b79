"""Matrix decompositions composed from ONNX ops (ops/linalg_decomp.py): QR, Householder
products, least squares, eigen/singular values, pseudo-inverses, the matrix exponential."""

from __future__ import annotations

import pytest
import torch

import onnxport
from onnxport.capture.quirks.lstsq_shapes import static_lstsq_shapes
from op_check import as_module, cases, check, check_opinfo, opinfo_cases

DECOMPOSITIONS = [
    "geqrf", "linalg.qr", "linalg.householder_product", "ormqr", "linalg.svdvals",
    "linalg.eigvalsh", "linalg.matrix_rank", "linalg.matrix_rank:hermitian", "norm:nuc",
    "linalg.cond", "linalg.pinv", "linalg.pinv:hermitian", "linalg.pinv:singular", "pinverse",
    "linalg.lstsq", "linalg.lstsq:grad_oriented", "linalg.polar",
]
# torch.linalg.matrix_sqrth arrived in torch 2.12; the oldest supported torch has none.
HAS_MATRIX_SQRTH = hasattr(torch.linalg, "matrix_sqrth")
if HAS_MATRIX_SQRTH:
    DECOMPOSITIONS.append("linalg.matrix_sqrth")


@pytest.mark.parametrize("name, variant, dtype, subset", opinfo_cases(DECOMPOSITIONS))
def test_linalg_decomp_opinfo(name, variant, dtype, subset):
    check_opinfo(name, variant, dtype, subset, limit=4)


def test_matrix_exp_opinfo():
    # Only the first sample: on the second (norms near 27, entries up to 1e5), eager's own
    # float32 error at one small entry (3.6e-4 from the float64 result) exceeds atol; the
    # export computes in float64 and is 1e-6 from it (test_matrix_exp_is_float64_exact).
    check_opinfo("matrix_exp", limit=1)


def _symmetric(n, *batch):
    x = torch.randn(*batch, n, n)
    return x + x.mT


def _rank_two(rows, columns):
    return torch.randn(rows, 2) @ torch.randn(2, columns)


HAND = {
    "qr reduced, batch": (lambda a: torch.linalg.qr(a), torch.randn(2, 6, 4)),
    "qr complete": (lambda a: torch.linalg.qr(a, mode="complete"), torch.randn(6, 4)),
    "qr r": (lambda a: torch.linalg.qr(a, mode="r")[1], torch.randn(4, 6)),
    # Column 1 is zero below the diagonal after the first reflection: tau = 0 there.
    "qr of a triangular matrix": (lambda a: torch.linalg.qr(a), torch.triu(torch.randn(4, 4))),
    "geqrf with a negative pivot": (torch.geqrf, torch.tensor([[-3.0, 1.0], [4.0, 2.0]])),
    "householder_product wide tau": (torch.linalg.householder_product, torch.randn(6, 4),
                                     torch.randn(3)),
    "ormqr right transposed": (lambda a, t, c: torch.ormqr(a, t, c, left=False, transpose=True),
                               torch.randn(5, 3), torch.randn(3), torch.randn(2, 5)),
    "eigvalsh upper triangle only": (lambda a: torch.linalg.eigvalsh(a, UPLO="U"),
                                     torch.randn(3, 5, 5)),
    "eigvalsh repeated eigenvalues": (torch.linalg.eigvalsh,
                                      torch.diag(torch.tensor([2.0, -1.0, 2.0, 0.0, -1.0]))),
    "svdvals wide": (torch.linalg.svdvals, torch.randn(2, 3, 7)),
    "matrix_rank of a rank-2 matrix": (torch.linalg.matrix_rank, _rank_two(6, 5)),
    "matrix_rank with atol": (lambda a: torch.linalg.matrix_rank(a, atol=1.0, rtol=0.0),
                              torch.randn(4, 4)),
    "pinv rank-deficient": (torch.linalg.pinv, _rank_two(5, 4)),
    "pinv with tensor atol and rtol": (
        lambda a, atol, rtol: torch.linalg.pinv(a, atol=atol, rtol=rtol),
        torch.randn(2, 4, 3), torch.tensor([0.5, 0.0]), torch.tensor([0.0, 0.3])),
    "pinv hermitian": (lambda a: torch.linalg.pinv(a, hermitian=True), _symmetric(4, 2)),
    "cond 2 and -2": (lambda a: (torch.linalg.cond(a, 2), torch.linalg.cond(a, -2)),
                      torch.randn(2, 4, 4)),
    "matrix_norm 2": (lambda a: torch.linalg.matrix_norm(a, ord=2), torch.randn(3, 5)),
    "lstsq default driver": (lambda a, b: torch.linalg.lstsq(a, b), torch.randn(6, 3),
                             torch.randn(6, 2)),
    "lstsq gels residuals": (lambda a, b: torch.linalg.lstsq(a, b, driver="gels"),
                             torch.randn(2, 6, 3), torch.randn(2, 6, 2)),
    "lstsq vector, underdetermined": (lambda a, b: torch.linalg.lstsq(a, b).solution,
                                      torch.randn(3, 5), torch.randn(3)),
    "lstsq gelsd singular values": (lambda a, b: torch.linalg.lstsq(a, b, driver="gelsd"),
                                    torch.randn(3, 5), torch.randn(3, 2)),
    "lstsq of an empty matrix": (lambda a, b: torch.linalg.lstsq(a, b), torch.randn(2, 0, 3),
                                 torch.randn(2, 0, 2)),
    "lstsq gels, no columns": (lambda a, b: torch.linalg.lstsq(a, b, driver="gels"),
                               torch.randn(3, 0), torch.randn(3, 2)),
    "matrix_exp zero": (torch.linalg.matrix_exp, torch.zeros(3, 3)),
    "matrix_exp batch": (torch.linalg.matrix_exp, 0.5 * torch.randn(3, 4, 4)),
}
if HAS_MATRIX_SQRTH:
    HAND["matrix_sqrth of an indefinite matrix, lower triangle"] = (
        torch.linalg.matrix_sqrth, torch.tensor([[1.0, 5.0, 0.0], [2.0, 1.0, 7.0],
                                                 [0.5, -1.0, 3.0]]))


@pytest.mark.parametrize("case", cases(HAND))
def test_linalg_decomp(case):
    torch.manual_seed(0)
    function, *args = case
    check(function, *args)


class _Lstsq(torch.nn.Module):
    def forward(self, a, b):
        return torch.linalg.lstsq(a, b)


@pytest.mark.parametrize("a, b", [(torch.randn(6, 3), torch.randn(6, 2)),
                                  (torch.randn(2, 5, 3), torch.randn(2, 5, 1)),
                                  (torch.randn(2, 0, 3), torch.randn(2, 0, 2))],
                         ids=["matrix", "batch", "empty"])
def test_lstsq_default_driver_from_cuda_is_gels(a, b):
    # On CUDA the default driver is gels, the only one there: residuals when rows > columns,
    # and an empty rank (the translation took CPU's gelsy, and the checker refused the model).
    # CI has no GPU: the program captured on the CPU gets the results CUDA records.
    torch.manual_seed(0)
    with static_lstsq_shapes():  # (torch's own fake kernel refuses every driver)
        exported = torch.export.export(_Lstsq(), (a, b))
    node = next(n for n in exported.graph.nodes
                if n.target is torch.ops.aten.linalg_lstsq.default)
    on_cuda = torch.linalg.lstsq(a, b, driver="gels")
    values = list(node.meta["val"])
    values[1] = values[1].new_empty(on_cuda.residuals.shape)
    values[2] = values[2].new_empty((0,))
    node.meta["val"] = tuple(values)
    for user in node.users:
        user.meta["val"] = values[user.args[1]]
    actual = onnxport.export(exported)(a, b)
    for got, expected in zip(actual, on_cuda):
        torch.testing.assert_close(torch.as_tensor(got), expected, rtol=1e-3, atol=1e-4)


def test_matrix_exp_is_float64_exact():
    a = 3 * torch.randn(2, 5, 5)
    program = onnxport.export(_MatrixExp(), (a,))
    exact = torch.linalg.matrix_exp(a.double())
    assert torch.allclose(program(a)[0].double(), exact, rtol=1e-5, atol=1e-5)


class _MatrixExp(torch.nn.Module):
    def forward(self, a):
        return torch.linalg.matrix_exp(a)


@pytest.mark.skipif(not hasattr(torch.linalg, "polar"), reason="torch.linalg.polar is newer "
                    "than this torch")
def test_polar_of_a_rank_deficient_matrix_has_a_nan_u():
    # U is not unique there (eager's is LAPACK's choice); H is.
    a = torch.stack([torch.randn(5, 2) @ torch.randn(2, 3), torch.randn(5, 3)])
    program = onnxport.export(as_module(torch.linalg.polar), (a,))
    u, h = program(a)
    expected_u, expected_h = torch.linalg.polar(a)
    assert u[0].isnan().all()
    torch.testing.assert_close(u[1], expected_u[1], rtol=1e-3, atol=1e-4)
    torch.testing.assert_close(h, expected_h, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("function", [torch.linalg.qr, torch.geqrf])
def test_qr_of_a_rank_deficient_matrix_is_nan(function):
    # Past the rank, the reflectors are built from rounding noise (eager's float32 noise):
    # Q and R are arbitrary there, so that matrix's results are NaN; the full-rank one's match.
    a = torch.stack([torch.randn(6, 2) @ torch.randn(2, 4), torch.randn(6, 4)])
    program = onnxport.export(as_module(function), (a,))
    for actual, expected in zip(program(a), function(a)):
        assert actual[0].isnan().all()
        torch.testing.assert_close(actual[1], expected[1], rtol=1e-3, atol=1e-4)


def test_gels_of_a_rank_deficient_matrix_is_nan():
    a = torch.stack([torch.randn(6, 2) @ torch.randn(2, 4), torch.randn(6, 4)])
    b = torch.randn(2, 6, 1)
    function = lambda a, b: torch.linalg.lstsq(a, b, driver="gels").solution  # noqa: E731
    solution = onnxport.export(as_module(function), (a, b))(a, b)[0]
    assert solution[0].isnan().all()
    torch.testing.assert_close(solution[1], function(a, b)[1], rtol=1e-3, atol=1e-4)


def test_dynamic_batch():
    batch = torch.export.Dim("batch")
    check(lambda a: (torch.linalg.svdvals(a), torch.linalg.qr(a)[1]), torch.randn(3, 4, 4),
          dynamic_shapes=({0: batch},), run_with=[(torch.randn(5, 4, 4),)])


def test_jacobi_sweeps_are_one_loop():
    program = check(torch.linalg.eigvalsh, _symmetric(4))
    assert [n.op_type for n in program.model.graph].count("Loop") == 1


@pytest.mark.parametrize("function, name", [
    (lambda a: torch.linalg.svd(a), "linalg_svd"),
    (lambda a: torch.linalg.eigh(a), "linalg_eigh"),
])
def test_vectors_are_refused(function, name):
    with pytest.raises(onnxport.errors.TranslationError, match=f"{name}: .*unique only up to sign"):
        onnxport.export(as_module(function), (torch.randn(4, 4),))


def test_symbolic_matrix_size_is_refused():
    size = torch.export.Dim("size", min=2)
    with pytest.raises(onnxport.errors.TranslationError, match="linalg_qr: .*must be static"):
        onnxport.export(as_module(lambda a: torch.linalg.qr(a)), (torch.randn(4, 3),),
                        dynamic_shapes=({0: size},))


def test_lstsq_with_data_dependent_residuals_is_refused():
    with pytest.raises(onnxport.errors.OnnxExporterError, match="DynamicOutputShape"):
        onnxport.export(as_module(lambda a, b: torch.linalg.lstsq(a, b, driver="gelsd")),
                        (torch.randn(5, 3), torch.randn(5, 2)))


@pytest.mark.parametrize("driver", [None, "gels", "gelsy"])
def test_lstsq_on_the_torchscript_path(driver):
    # The traced graph's fake run needs lstsq's static shapes too (torch's fake kernel
    # refuses every driver): it failed with DynamicOutputShapeException.
    torch.manual_seed(0)
    function = lambda a, b: torch.linalg.lstsq(a, b, driver=driver)  # noqa: E731
    a, b = torch.randn(2, 6, 3), torch.randn(2, 6, 2)
    program = onnxport.export(as_module(function), (a, b), dynamo=False)
    for got, expected in zip(program(a, b), function(a, b)):
        torch.testing.assert_close(torch.as_tensor(got), expected, rtol=1e-3, atol=1e-4)
