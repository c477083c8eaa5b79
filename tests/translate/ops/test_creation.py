"""Tensor creation (ops/creation.py): arange, full, zeros/ones/empty and their *_like and
new_* forms, fill, scalar_tensor, tril/triu."""

from __future__ import annotations

import pytest
import torch

import onnxport
from op_check import BOTH_PATHS, PATH_IDS, cases, check, check_opinfo, op_types, opinfo_cases

CREATION = [
    "arange", "full", "zeros", "ones", "new_zeros", "new_ones", "new_full", "zeros_like",
    "ones_like", "full_like", "fill", "scalar_tensor", "tril", "triu", ("tril", torch.int64),
    ("triu", torch.bool),
]


@pytest.mark.parametrize("name, variant, dtype, subset", opinfo_cases(CREATION))
def test_creation_opinfo(name, variant, dtype, subset):
    check_opinfo(name, variant, dtype, subset, limit=5)


X = torch.randn(3, 4)


def _fill_tensor(x, v):
    return x.clone().fill_(v)


HAND = {
    "arange end": (lambda x: x + torch.arange(4), X),
    "arange start end step": (lambda x: torch.arange(2, 11, 3) * 1.5, X),
    "arange float step": (lambda x: torch.arange(0.0, 1.0, 0.125), X),
    "arange float dtype": (lambda x: torch.arange(5, dtype=torch.float64), X),
    "arange from a size": (lambda x: torch.arange(x.shape[1]) + x, X),
    "full": (lambda x: torch.full((2, 3), 1.5), X),
    "full int": (lambda x: torch.full((2, 3), 7), X),
    "full bool": (lambda x: torch.full((2,), True), X),
    "full large is made at run time": (lambda x: torch.full((64, 64), 2.0), X),
    "full with a tensor value": (lambda x: torch.full((2, 2), x[0, 0].item()), X),
    "zeros": (lambda x: torch.zeros(2, 5) + x.sum(), X),
    "ones int": (lambda x: torch.ones(3, dtype=torch.int32), X),
    "new_zeros": (lambda x: x.new_zeros(2, 3), X),
    "new_ones with dtype": (lambda x: x.new_ones((4,), dtype=torch.int64), X),
    "new_full": (lambda x: x.new_full((2, 2), -3.0), X),
    "zeros_like": (torch.zeros_like, X),
    "ones_like with dtype": (lambda x: torch.ones_like(x, dtype=torch.int64), X),
    "full_like": (lambda x: torch.full_like(x, 0.25), X),
    "fill_ scalar": (lambda x: x.clone().fill_(4.0), X),
    "fill_ tensor": (_fill_tensor, X, torch.tensor(-2.0)),
    "aten::fill": (lambda x: torch.ops.aten.fill(x, 3), X),
    "scalar_tensor": (lambda x: x * torch.scalar_tensor(2.5), X),
    "tril": (torch.tril, X),
    "triu diagonal": (lambda x: torch.triu(x, 1), X),
    "tril negative diagonal batched": (lambda x: torch.tril(x, -1), torch.randn(2, 4, 5)),
}


@pytest.mark.parametrize("case", cases(HAND))
def test_creation(case):
    function, *args = case
    check(function, *args)


@pytest.mark.parametrize("opset, trilu", [(13, False), (14, True)])
@pytest.mark.parametrize("diagonal", [-1, 0, 2])
@pytest.mark.parametrize("upper", [False, True])
def test_tril_triu_before_and_with_trilu(opset, trilu, diagonal, upper):
    function = torch.triu if upper else torch.tril
    program = check(lambda x: function(x, diagonal), torch.randn(2, 4, 5), opset=opset)
    assert ("Trilu" in op_types(program)) == trilu


@pytest.mark.parametrize("make", [
    lambda x: torch.empty(2, 3),
    lambda x: x.new_empty(4, 2),
    lambda x: torch.empty_like(x),
    lambda x: torch.empty(3, dtype=torch.int64),
], ids=["empty", "new_empty", "empty_like", "empty int"])
def test_empty_has_the_shape_and_dtype(make):
    """Uninitialized memory has no values to compare: only the shape and dtype."""
    program = onnxport.export(make, (X,))
    (actual,) = program(X)
    expected = make(X)
    assert actual.shape == expected.shape and actual.dtype == expected.dtype


def test_small_filled_tensors_are_constants():
    program = check(lambda x: x + torch.full((3, 4), 1.5), X)
    assert op_types(program) == ["Add"]


def test_large_filled_tensors_are_constant_of_shape():
    """The op library keeps large fills out of the file (before any constant folding pass)."""
    program = check(lambda x: torch.full((64, 64), 2.0), X, optimize=False)
    assert op_types(program) == ["ConstantOfShape"]


@pytest.mark.parametrize("opset", [13, 18, 20, 23])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_large_low_precision_fill_keeps_its_value(opset, dtype):
    """ConstantOfShape takes a bfloat16 value only from opset 20: below it the fill is made in
    float and cast (with no value at all it was float zeros, which ORT refused to load).
    The sum is in float: ONNX Runtime's CPU kernels have no bfloat16 Add."""
    program = check(lambda x: x + torch.full((64, 64), 3.0, dtype=dtype).float(),
                    torch.zeros(64, 64), opset=opset, optimize=False)
    assert op_types(program)[0] == "ConstantOfShape"


@pytest.mark.parametrize("length, periodic", [(8, True), (7, False), (1, True), (1, False)])
@pytest.mark.parametrize("dynamo", [True, False])
def test_hann_window(length, periodic, dynamo):
    # torch 2.11 keeps hann_window whole (later versions decompose it); length 1 is [1].
    class Windowed(torch.nn.Module):
        def forward(self, x):
            return x * torch.hann_window(length, periodic=periodic)

    x = torch.randn(3, length)
    program = onnxport.export(Windowed(), (x,), opset_version=17, dynamo=dynamo)
    torch.testing.assert_close(program(x)[0], Windowed()(x), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("dynamo", BOTH_PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("start, end, step", [(0, 1.8, 0.2), (0.1, 1.0, 0.1), (1.0, 2.2, 0.3),
                                              (-1.0, 1.0, 0.1), (0, 0.9, 0.3)])
def test_float_step_arange_counts_as_torch(start, end, step, dynamo):
    check(lambda x: torch.arange(start, end, step) + x, torch.zeros(1), dynamo=dynamo)


@pytest.mark.parametrize("opset", [17, 18])
def test_float_step_arange_of_a_dynamic_size_counts_in_double(opset):
    """n * 0.2 / 0.2 is 9 in double but above 9 in float32: a float32 Range made 10 elements
    where torch makes 9 (its count is ceil((end - start) / step) in double)."""
    check(lambda x: torch.arange(0, x.shape[0] * 0.2, 0.2), torch.zeros(9), opset=opset,
          input_names=["x"], dynamic_axes={"x": {0: "n"}},
          run_with=[(torch.zeros(7),), (torch.zeros(12),), (torch.zeros(3),)])


EYES = {
    "eye(n)": (lambda x: torch.eye(4) + x, torch.zeros(1)),
    "eye(n, m)": (lambda x: torch.eye(3, 5) + x, torch.zeros(1)),
    "eye(n) int64": (lambda x: torch.eye(3, dtype=torch.int64), torch.zeros(1)),
    "eye(n) of a dynamic size": (lambda x: torch.eye(x.shape[0]) + x, torch.zeros(3, 3)),
    "eye(n, m) of dynamic sizes": (lambda x: torch.eye(x.shape[0], x.shape[1]) * 2,
                                   torch.zeros(3, 4)),
    "eye(n) bool of a dynamic size": (lambda x: torch.eye(x.shape[0], dtype=torch.bool),
                                      torch.zeros(3, 4)),
}


@pytest.mark.parametrize("opset", [17, 18])
@pytest.mark.parametrize("dynamo", BOTH_PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("case", EYES.values(), ids=EYES.keys())
def test_eye(case, dynamo, opset):
    function, x = case
    others = [(torch.zeros(5, 2),)] if x.shape == (3, 4) else \
        [(torch.zeros(5, 5),)] if x.shape == (3, 3) else []
    dynamic = {"x": {0: "n", 1: "m"}} if x.dim() == 2 and x.shape[0] != x.shape[1] else \
        {"x": {0: "n", 1: "n"}} if x.dim() == 2 else None
    check(function, x, dynamo=dynamo, opset=opset, input_names=["x"], dynamic_axes=dynamic,
          run_with=others)


LINSPACES = [(0, 1, 5, None), (-3.5, 7.25, 11, None), (2, 2, 1, None), (-1, 3, 1, None),
             (0, 10, 4, torch.int64),
             (-7, 3, 6, torch.int32), (1, 0, 7, torch.float64), (0, 1, 0, None)]


@pytest.mark.parametrize("dynamo", BOTH_PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("start, end, steps, dtype", LINSPACES)
def test_linspace_counts_and_rounds_as_torch(start, end, steps, dtype, dynamo):
    check(lambda x: torch.linspace(start, end, steps, dtype=dtype) + x,
          torch.zeros(1, dtype=dtype or torch.float32), dynamo=dynamo)


WINDOWS_OF_A_SIZE = {
    "linspace": lambda x: torch.linspace(-1, 2, x.size(0)) + x,
    "hann_window": lambda x: torch.hann_window(x.size(0)) * x,
    "hann_window not periodic": lambda x: torch.hann_window(x.size(0), periodic=False) * x,
}


@pytest.mark.parametrize("function", WINDOWS_OF_A_SIZE.values(), ids=WINDOWS_OF_A_SIZE.keys())
def test_a_count_taken_as_a_plain_int_follows_a_dynamic_size_on_the_torchscript_path(function):
    # linspace's steps and hann_window's length are `int` in torch's schema, not SymInt:
    # propagating them as symbols fixed the dynamic size to the example's (the export failed).
    check(function, torch.randn(5), dynamo=False, input_names=["x"],
          dynamic_axes={"x": {0: "n"}}, run_with=[(torch.randn(8),), (torch.randn(1),)])


@pytest.mark.parametrize("dynamo", BOTH_PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("periodic", [True, False])
def test_kaiser_window(periodic, dynamo):
    # No translation nor decomposition before: refused.
    check(lambda x: x * torch.kaiser_window(6, periodic=periodic, beta=8.0) +
          torch.kaiser_window(6, periodic), torch.randn(3, 6), dynamo=dynamo)


@pytest.mark.parametrize("dynamo", BOTH_PATHS, ids=PATH_IDS)
def test_triangle_indices(dynamo):
    check(lambda x: (torch.tril_indices(4, 3) + x.sum().long(), torch.triu_indices(3, 5, 1),
                     torch.tril_indices(3, 3, -1), x[torch.triu_indices(3, 4).unbind()]),
          torch.randn(3, 4), dynamo=dynamo)


def test_window_and_indices_of_a_dynamic_size_are_clear_errors():
    # (The default path: torch.export fixes the size, which the schema takes as a plain int,
    # and warns; tracing keeps it a run's value, which these have no ONNX form for.)
    for function, name in ((lambda x: torch.kaiser_window(x.size(0)), "kaiser_window"),
                           (lambda x: torch.tril_indices(x.size(0), 3).float(), "tril_indices")):
        with pytest.raises(onnxport.errors.OnnxExporterError,
                           match=f"{name}.*computed at run time.*static"):
            check(function, torch.randn(4, 3), dynamo=False, input_names=["x"],
                  dynamic_axes={"x": {0: "n"}})
        with pytest.warns(onnxport.errors.DynamicDimensionFixedWarning):
            check(function, torch.randn(4, 3), input_names=["x"], dynamic_axes={"x": {0: "n"}})


@pytest.mark.parametrize("dynamo", BOTH_PATHS, ids=PATH_IDS)
def test_one_hot(dynamo):
    import torch.nn.functional as F

    labels = torch.tensor([[0, 3, 1], [2, 2, 4]])
    check(lambda i: F.one_hot(i, 6), labels, dynamo=dynamo)
    if dynamo is not False:  # (-1: as many classes as the largest label says, data-dependent)
        check(lambda i: F.one_hot(i), labels, dynamo=dynamo)


def test_one_hot_of_a_dynamic_class_count():
    # Traced, the class count stays a run's value (torch.export fixes it, with a warning).
    import torch.nn.functional as F

    labels = torch.tensor([[0, 3, 1], [2, 2, 4]])
    check(lambda i, x: F.one_hot(i, x.size(0)).float() @ x, labels, torch.randn(5, 2),
          dynamo=False, input_names=["i", "x"], dynamic_axes={"x": {0: "n"}},
          run_with=[(labels, torch.randn(7, 2))])


class _TriangleOfASize(torch.nn.Module):
    def forward(self, x):
        n = x.size(0)
        return torch.tril(x, n - 4), torch.triu(x, 2 - n)


@pytest.mark.parametrize("dynamo", BOTH_PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("opset", [13, 14])
def test_tril_triu_by_a_diagonal_computed_from_a_dynamic_size(dynamo, opset):
    # The diagonal came as a value of the graph: int() of it failed the translation.
    check(_TriangleOfASize(), torch.randn(5, 5), opset=opset, dynamo=dynamo,
          input_names=["x"], dynamic_axes={"x": [0, 1]},
          run_with=[(torch.randn(7, 4),), (torch.randn(3, 6),)])
