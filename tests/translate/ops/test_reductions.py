"""Reductions and softmax-like ops (ops/reductions.py) from OpInfo samples and by hand, at
opsets before and after ReduceX took its axes as an input (18)."""

from __future__ import annotations

import pytest
import torch

import onnxport
from onnxport._versions import torch_at_least

from op_check import (BOTH_PATHS, PATH_IDS, as_module, cases, check, check_opinfo, op_types,
                      opinfo_cases)

REDUCTIONS = [
    "mean", "sum", "prod", "amax", "amin", "max:reduction_with_dim", "max:reduction_no_dim",
    "min:reduction_with_dim", "min:reduction_no_dim", "argmax", "argmin", "softmax",
    "softmax:with_dtype", "log_softmax", "log_softmax:with_dtype", "cumsum", "var",
    "var:unbiased", "std", "std:unbiased", "any", "all", "norm", "norm:inf", "norm:fro",
    "linalg.vector_norm", "logsumexp", ("any", torch.bool), ("all", torch.bool),
    ("sum", torch.int64), ("prod", torch.int64), ("amax", torch.int64), ("cumsum", torch.int64),
    ("argmax", torch.int64), ("mean", torch.float64), ("amax", torch.bool),
    ("amin", torch.bool), ("max:reduction_with_dim", torch.bool),
    ("min:reduction_no_dim", torch.bool), ("cumsum", torch.bool), ("sum", torch.bool),
    "var_mean", "var_mean:unbiased", "std_mean", "std_mean:unbiased",
    # sorting. Not the int/bool samples of topk and sort: they have ties, whose order torch's
    # (unstable) kernels leave unspecified; the stable cases are by hand below.
    "topk", "sort", "argsort", "msort", ("argsort", torch.int64), ("topk", torch.float64),
    "cov", "corrcoef",
]


@pytest.mark.parametrize("name, variant, dtype, subset", opinfo_cases(REDUCTIONS))
def test_reduction_opinfo(name, variant, dtype, subset):
    check_opinfo(name, variant, dtype, subset)


X = torch.randn(2, 3, 4, 5)
INTS = torch.randint(-5, 5, (3, 4))

HAND = {
    "mean over dims": (lambda x: x.mean(dim=(1, 3)), X),
    "mean keepdim negative dims": (lambda x: x.mean(dim=(-1, -2), keepdim=True), X),
    "mean of all": (lambda x: x.mean(), X),
    "sum with dtype": (lambda x: x.sum(dim=1, dtype=torch.float64), X),
    "sum of ints": (lambda x: x.sum(0), INTS),
    "sum of bools": (lambda x: (x > 0).sum(dim=1), X),
    "mean of empty dims list": (lambda x: x.sum(dim=[]), X),
    "prod over dim": (lambda x: x.prod(2, keepdim=True), X),
    "amax several dims": (lambda x: x.amax(dim=(0, 2)), X),
    "max with indices": (lambda x: x.max(dim=2), X),
    "min with indices keepdim": (lambda x: x.min(dim=-1, keepdim=True), X),
    "max of all": (lambda x: x.max(), X),
    "argmax keepdim": (lambda x: x.argmax(dim=1, keepdim=True), X),
    "argmin of all": (lambda x: x.argmin(), X),
    "softmax middle axis": (lambda x: x.softmax(dim=1), X),
    "softmax to float64": (lambda x: x.softmax(-1, dtype=torch.float64), X),
    "log_softmax": (lambda x: x.log_softmax(dim=-1), X),
    "aten::_softmax": (lambda x: torch.ops.aten._softmax(x, 2, False), X),
    "aten::_log_softmax": (lambda x: torch.ops.aten._log_softmax(x, -1, False), X),
    "special softmax and log_softmax": (
        lambda x: (torch.special.softmax(x, 1), torch.special.log_softmax(x, 1)), X),
    "cumsum with dtype": (lambda x: x.cumsum(1, dtype=torch.float64), X),
    "cumsum of ints": (lambda x: x.cumsum(0), INTS),
    "var over dim (var.dim)": (lambda x: torch.var(x, 1, True, True), X),
    "var correction 0": (lambda x: torch.var(x, dim=(1, 2), correction=0), X),
    "var correction 2": (lambda x: torch.var(x, dim=-1, correction=2, keepdim=True), X),
    "var of all, unbiased": (lambda x: torch.var(x, unbiased=True), X),
    "var of one sample is nan": (lambda x: torch.var(x, dim=0), X[:1]),
    "std over dims": (lambda x: x.std(dim=(0, 3)), X),
    "std unbiased=False": (lambda x: torch.std(x, 2, False), X),
    "any over dim": (lambda x: (x > 1).any(dim=1), X),
    "all of all": (lambda x: (x > -5).all(), X),
    "any of floats": (lambda x: x.any(dim=0), torch.tensor([[0.0, 1.0], [0.0, 0.0]])),
    "norm 2": (lambda x: torch.linalg.vector_norm(x, dim=-1), X),
    "norm 1": (lambda x: torch.linalg.vector_norm(x, 1, dim=(1, 2)), X),
    "norm 3": (lambda x: torch.linalg.vector_norm(x, 3, dim=1, keepdim=True), X),
    "norm 0.5": (lambda x: torch.linalg.vector_norm(x, 0.5), X),
    "norm inf": (lambda x: torch.linalg.vector_norm(x, float("inf"), dim=0), X),
    "norm -inf": (lambda x: torch.linalg.vector_norm(x, float("-inf"), dim=0), X),
    "norm 0 counts nonzeros": (lambda x: torch.linalg.vector_norm(x, 0, dim=1),
                               torch.tensor([[0.0, 1.0, 2.0], [0.0, 0.0, -3.0]])),
    "torch.norm": (lambda x: torch.norm(x, dim=1), X),
    "F.normalize": (lambda x: torch.nn.functional.normalize(x, dim=1), X),
    "logsumexp": (lambda x: x.logsumexp(dim=(1, 2)), X),
    "var_mean": (lambda x: torch.var_mean(x, dim=1), X),
    "var_mean keepdim (var_mean.dim)": (lambda x: torch.var_mean(x, 1, True, True), X),
    "std_mean of all, correction 0": (lambda x: torch.std_mean(x, correction=0), X),
    "var_mean of nothing is nan": (lambda x: torch.var_mean(x, dim=0), torch.randn(0, 3)),
    # sorting
    "topk": (lambda x: torch.topk(x, 3), X),
    "topk smallest on an axis": (lambda x: torch.topk(x, 2, dim=1, largest=False), X),
    "topk unsorted": (lambda x: torch.topk(x, 2, dim=-2, sorted=False), X),
    "topk of a 0-d tensor": (lambda x: torch.topk(x, 1), torch.tensor(2.5)),
    "topk of uint8": (lambda x: torch.topk(x, 2, dim=0),
                      torch.tensor([[3, 200], [7, 0], [9, 1]], dtype=torch.uint8)),
    "topk of ints without ties": (lambda x: torch.topk(x, 4), torch.randperm(20).view(2, 10)),
    "sort": (lambda x: torch.sort(x, dim=1), X),
    "sort descending": (lambda x: torch.sort(x, descending=True), X),
    "stable sort of ties": (lambda x: torch.sort(x, dim=-1, stable=True), INTS % 3),
    "stable descending sort of ties": (lambda x: torch.sort(x, dim=0, stable=True,
                                                            descending=True), INTS % 3),
    "stable sort of bools": (lambda x: torch.sort(x > 0, stable=True), X),
    "sort with nan": (lambda x: torch.sort(x), torch.tensor([1.0, float("nan"), -2.0, 0.5])),
    "sort of a 0-d tensor": (lambda x: torch.sort(x), torch.tensor(1.5)),
    "argsort": (lambda x: torch.argsort(x, dim=2, descending=True), X),
    "stable argsort of ties": (lambda x: torch.argsort(x, stable=True), INTS % 2),
    "msort": (torch.msort, X),
    "logsumexp of ints": (lambda x: x.logsumexp(dim=1), INTS),
}


@pytest.mark.parametrize("case", cases(HAND))
def test_reduction(case):
    function, *args = case
    check(function, *args)


@pytest.mark.parametrize("opset", [17, 18])
@pytest.mark.parametrize("reduction", ["mean", "sum", "amax", "amin", "prod", "logsumexp",
                                       "norm1", "norm2"])
def test_axes_as_attribute_or_input(reduction, opset):
    """ReduceSum took its axes as an input from opset 13, the other reductions from 18."""
    functions = {
        "mean": lambda x: x.mean(dim=(0, 2)),
        "sum": lambda x: x.sum(dim=(0, 2)),
        "amax": lambda x: x.amax(dim=(0, 2)),
        "amin": lambda x: x.amin(dim=(0, 2)),
        "prod": lambda x: x.prod(dim=2),
        "logsumexp": lambda x: x.logsumexp(dim=(0, 2)),
        "norm1": lambda x: torch.linalg.vector_norm(x, 1, dim=(0, 2)),
        "norm2": lambda x: torch.linalg.vector_norm(x, 2, dim=(0, 2)),
    }
    program = check(functions[reduction], X, opset=opset)
    # (amax and amin of floats are followed by the nodes that propagate a NaN)
    assert len(op_types(program)) == 1 or reduction in ("amax", "amin"), op_types(program)
    node = program.model.graph.node(0)
    assert ("axes" in node.attributes) == (opset < 18 and node.op_type != "ReduceSum")


def test_mean_is_one_reduce_mean():
    assert op_types(check(lambda x: x.mean(-1, keepdim=True), X)) == ["ReduceMean"]


def test_softmax_is_one_softmax():
    assert op_types(check(lambda x: x.softmax(1), X)) == ["Softmax"]


@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("sorting", ["topk", "sort", "argsort", "topk of the batch size"])
def test_sorting_with_dynamic_shapes(sorting, opset):
    """k and the sorted length read from the input's shape at run time."""
    n, b = torch.export.Dim("n", min=2), torch.export.Dim("b", max=8)
    functions = {  # (function, dynamic dims, an input of other sizes)
        "topk": (lambda x: torch.topk(x, 2, dim=1), {1: n}, torch.randn(3, 11)),
        "sort": (lambda x: torch.sort(x, dim=1, descending=True), {1: n}, torch.randn(3, 11)),
        "argsort": (lambda x: torch.argsort(x, dim=0), {0: b}, torch.randn(5, 8)),
        "topk of the batch size": (lambda x: torch.topk(x, x.shape[0], dim=1), {0: b},
                                   torch.randn(5, 8)),
    }
    function, dims, other = functions[sorting]
    program = check(function, torch.randn(3, 8), opset=opset, dynamic_shapes={"x": dims},
                    run_with=[(other,)])
    assert op_types(program).count("TopK") == 1


def test_sort_is_one_topk():
    program = check(lambda x: torch.sort(x, dim=1), X)
    assert op_types(program) == ["TopK"]


def test_topk_ties_take_the_lower_index_first():
    """torch.topk leaves the order of ties unspecified; ONNX TopK's is the lower index first:
    the values are eager's and the indices the first of each tie."""
    x = torch.tensor([[3, 1, 3, 2, 3, 1]])
    values, indices = onnxport.export(lambda x: torch.topk(x, 4), (x,))(x)
    assert values.tolist() == torch.topk(x, 4).values.tolist()
    assert indices.tolist() == [[0, 2, 4, 3]]


NAN = float("nan")
WITH_NAN = torch.tensor([[1.0, NAN, 2.0, NAN], [3.0, 0.5, -1.0, 4.0], [NAN, 9.0, 1.0, 0.0]])


@pytest.mark.parametrize("opset", [13, 18])
def test_max_and_min_propagate_nan(opset):
    # ONNX Runtime's ReduceMax/ReduceMin/ArgMax skip a NaN; torch's max and min return it
    # (and its first index).
    check(lambda x: (x.amax(), x.amin(1), x.amax(0, keepdim=True), x.max(), x.min(),
                     x.max(1), x.min(0, keepdim=True), x.argmax(1), x.argmin(0), x.argmax(),
                     torch.linalg.vector_norm(x, float("inf"), 1),
                     torch.linalg.vector_norm(x, float("-inf"))),
          WITH_NAN, opset=opset)


def test_max_of_float16_propagates_nan():
    check(lambda x: (x.max(1), x.amin(0)), WITH_NAN.half())


def test_max_of_integers_has_no_nan_check():
    program = check(lambda x: (x.amax(1), x.max(0), x.argmin(1)), INTS)
    assert op_types(program) == ["ReduceMax", "ReduceMax", "ArgMax", "ArgMin"]


class _IntegerSums(torch.nn.Module):
    def forward(self, x):
        return x.sum(), x.sum(0), x.sum(-1, keepdim=True), x.sum((0, 1)), x.int().sum(1)


@pytest.mark.parametrize("opset", [13, 18])
def test_int64_sums_beyond_2_to_the_53_are_exact(opset):
    # ONNX Runtime's int64 ReduceSum accumulates in double: [2**60 + 1, 2] summed to 2**60.
    x = torch.tensor([[2**60 + 1, 2, 3], [5, 2**61 + 7, -2**62 - 1]])
    program = onnxport.export(_IntegerSums(), (x,), opset_version=opset, input_names=["x"],
                              dynamic_axes={"x": {0: "n"}})
    assert "ReduceSum" not in op_types(program)
    for rows in (x, torch.randint(-2**62, 2**62, (5, 3)), torch.zeros(0, 3, dtype=torch.int64)):
        for ours, eager in zip(program(rows), _IntegerSums()(rows)):
            assert ours.dtype == eager.dtype and ours.shape == eager.shape
            assert torch.equal(ours, eager), (ours, eager)


# The `unbiased` overloads, which TorchScript hands over with 0/1 for the bool: read by the
# overload's own schema, not by the arguments' types (std(x, unbiased=False) reduced nothing).
UNBIASED = {
    "std unbiased=False": lambda x: torch.std(x, unbiased=False),
    "var unbiased=True": lambda x: torch.var(x, True),
    "var.dim unbiased=False": lambda x: torch.var(x, 1, unbiased=False),
    "std.dim unbiased=False keepdim": lambda x: torch.std(x, [0], False, True),
    "std_mean unbiased=False": lambda x: torch.std_mean(x, unbiased=False),
    "var_mean unbiased=True": lambda x: torch.var_mean(x, True),
    "var_mean.dim unbiased=False": lambda x: torch.var_mean(x, [1], unbiased=False),
    "std_mean.dim keepdim": lambda x: torch.std_mean(x, 0, True, keepdim=True),
}


@pytest.mark.parametrize("dynamo", BOTH_PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("function", UNBIASED.values(), ids=UNBIASED.keys())
def test_unbiased_overloads(function, dynamo):
    check(function, torch.randn(3, 4), dynamo=dynamo)


@pytest.mark.parametrize("dynamo", BOTH_PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_of_all_with_keepdim_keeps_every_axis_as_one(op, dynamo):
    program = check(lambda x: getattr(torch, op)(x, keepdim=True), torch.randn(2, 3, 4),
                    dynamo=dynamo)
    assert program(torch.randn(2, 3, 4))[0].shape == (1, 1, 1)


class _Means(torch.nn.Module):
    def forward(self, x):
        return x.mean(0), x.mean(), x.mean([0, 1], keepdim=True), x.mean(1)


@pytest.mark.parametrize("dynamo", BOTH_PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("example", [3, 0], ids=["example of 3", "empty example"])
def test_mean_over_an_axis_that_may_be_empty_is_nan_there(dynamo, example):
    # ONNX Runtime's ReduceMean of no elements is 0; torch's mean is NaN (torch.onnx gives 0).
    # A dynamic axis may be empty at run time: the mean is the sum over the count there.
    # (An empty example failed on dynamo=False: the size-2 check grew the axis from nothing.)
    program = onnxport.export(_Means(), (torch.randn(example, 4),), dynamo=dynamo,
                              input_names=["x"], dynamic_axes={"x": {0: "n"}})
    for rows in (0, 5):
        x = torch.randn(rows, 4)
        for actual, expected in zip(program(x), _Means()(x)):
            torch.testing.assert_close(actual, expected, rtol=1e-3, atol=1e-4, equal_nan=True)
    # Over a static axis that is not empty, it stays one ReduceMean.
    assert [n.op_type for n in program.model.graph if n.op_type == "ReduceMean"] == ["ReduceMean"]


def test_float16_mean_of_a_dynamic_axis_counts_past_65504():
    # (the count, cast to float16, would be inf, and the mean 0)
    program = onnxport.export(as_module(lambda x: x.mean(0)), (torch.ones(8, 2).half(),),
                              input_names=["x"], dynamic_axes={"x": {0: "n"}})
    x = torch.ones(70000, 2).half()
    torch.testing.assert_close(program(x)[0], x.float().mean(0).half())


@pytest.mark.parametrize("dynamo", BOTH_PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("opset", [14, 18])
def test_cummax_and_cummin_along_a_dynamic_axis(dynamo, opset):
    # Refused before ("a dynamic length along the axis has no translation yet"): the prefix
    # mask is now built from the length at run time. Small integers make ties: torch's index
    # is the last position holding the extreme.
    def extremes(x):
        (v, i), (w, j) = torch.cummax(x, 1), torch.cummin(x, 0)
        return v, i, w, j

    def ints(*shape):
        return (torch.randint(0, 3, shape).float(),)

    torch.manual_seed(0)
    check(extremes, *ints(2, 3), opset=opset, dynamo=dynamo, input_names=["x"],
          dynamic_axes={"x": {0: "a", 1: "b"}}, run_with=[ints(5, 7), ints(1, 1), ints(4, 1)])


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_diff_opinfo_samples(dtype):
    # n, dim, prepend and append; a bool diff is an exclusive or, as torch's.
    assert check_opinfo("diff", dtype=dtype, limit=12) > 0


@pytest.mark.skipif(not torch_at_least("2.14"), reason="torch 2.11 keeps the dims of 1 static "
                    "(dynamo) and cannot propagate the empty piece (tracing): loud there")
@pytest.mark.parametrize("dynamo", BOTH_PATHS, ids=PATH_IDS)
def test_diff_of_a_piece_empty_at_the_example(dynamo):
    # The second half of one column is empty: torch's decomposition of diff, traced there,
    # took its branch for an empty axis and returned its input at every size (found by
    # differential fuzzing, seed 29040: the halves' values where torch has their differences).
    def second_half_differences(x):
        return x.tensor_split(2, 1)[1].diff(dim=1), x.diff(n=2, dim=0, append=x[:1])

    check(second_half_differences, torch.randn(1, 1), dynamo=dynamo, input_names=["x"],
          dynamic_axes={"x": {0: "a", 1: "b"}},
          run_with=[(torch.randn(6, 4),), (torch.randn(3, 5),), (torch.randn(2, 2),)])


_FREQUENCIES = torch.tensor([1, 2, 1, 3, 1])
_WEIGHTS = torch.tensor([0.5, 0.25, 1.0, 0.75, 0.125])
COVARIANCES = {
    "rows": lambda x: torch.cov(x),
    "no correction": lambda x: torch.cov(x, correction=0),
    "one row, 0-d": lambda x: torch.cov(x[0]),
    "frequencies": lambda x: torch.cov(x[:, :5], fweights=_FREQUENCIES),
    "weights": lambda x: torch.cov(x[:, :5], aweights=_WEIGHTS),
    "both, correction 2": lambda x: torch.cov(x[:, :5], fweights=_FREQUENCIES,
                                              aweights=_WEIGHTS, correction=2),
    "corrcoef": lambda x: torch.corrcoef(x),
    "corrcoef of one row": lambda x: torch.corrcoef(x[1]),
}


@pytest.mark.parametrize("dynamo", BOTH_PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("case", COVARIANCES.values(), ids=list(COVARIANCES))
def test_cov_and_corrcoef_on_both_paths(case, opset, dynamo):
    # Traced, cov and corrcoef were one call each whose decomposition reads the weights'
    # values: dynamo=False refused them. The observations' axis is dynamic.
    check(case, torch.randn(3, 6), dynamo=dynamo, opset=opset, input_names=["x"],
          dynamic_axes={"x": {1: "n"}}, run_with=[(torch.randn(3, 9),)])
