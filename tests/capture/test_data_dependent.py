"""Ops whose arguments are data while capturing (capture/data_dependent.py): narrow at a tensor
start, one_hot with inferred classes, cov/corrcoef with their value checks; each exported once
and run in ONNX Runtime on other values than the example's, and the cases refused clearly."""

from __future__ import annotations

import itertools

import pytest
import torch

import onnxport
from onnxport.capture.data_dependent import _corrcoef, _cov
from onnxport.errors import CaptureError


class Function(torch.nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, *args):
        return self.function(*args)


def _check(function, example, *others):
    model = Function(function).eval()
    program = onnxport.export(model, example, opset_version=18)
    for inputs in (example, *others):
        actual = program(*inputs)
        expected = model(*inputs)
        expected = expected if isinstance(expected, tuple) else (expected,)
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            torch.testing.assert_close(a, e, rtol=1e-3, atol=1e-4, equal_nan=True)
    return program


X = torch.randn(5, 6, 4)


def test_narrow_at_a_tensor_start_reads_the_start_at_run_time():
    # Negative starts count from the end; the graph takes every start the example's does not.
    _check(lambda x, s: torch.narrow(x, 1, s, 2) * 2 + x.narrow(1, s, 2), (X, torch.tensor(1)),
           *[(X, torch.tensor(v)) for v in (0, 4, -2, -6, 3)])


def test_narrow_at_a_negative_int_start_ending_at_the_end():
    _check(lambda x: (x.narrow(1, -2, 2), x.narrow(1, -3, 2), x.narrow(-1, -4, 4)), (X,))


def test_one_hot_with_inferred_classes_sizes_its_output_from_the_values():
    _check(lambda x: torch.nn.functional.one_hot(x), (torch.tensor([1, 3, 0, 2]),),
           (torch.tensor([0, 0, 1, 0]),), (torch.tensor([6, 2, 0, 5]),))
    _check(lambda x: torch.nn.functional.one_hot(x), (torch.tensor(2),), (torch.tensor(0),))


def test_one_hot_with_given_classes_is_unchanged():
    program = _check(lambda x: torch.nn.functional.one_hot(x, 7), (torch.tensor([1, 3, 0]),))
    assert "ReduceMax" not in [n.op_type for n in program.model.graph]


def test_cov_and_corrcoef_with_weights_and_corrections():
    x = torch.randn(3, 5)
    fweights, aweights = torch.tensor([1, 2, 1, 3, 1]), torch.rand(5) + 0.1
    _check(lambda x, f, a: (torch.cov(x, correction=2, fweights=f, aweights=a),
                            torch.cov(x, fweights=f), x.cov(correction=0, aweights=a),
                            torch.cov(x, correction=9), torch.corrcoef(x), torch.cov(x[0])),
           (x, fweights, aweights),
           (torch.randn(3, 5), torch.tensor([0, 1, 4, 1, 2]), torch.rand(5) * 3))
    _check(lambda x: (torch.cov(x), torch.corrcoef(x)), (torch.randint(-4, 5, (2, 6)),))


def test_cov_formulation_matches_torch_in_its_corner_cases():
    """One observation, one kind of weights, corrections past the observations: the same
    values and dtypes as torch.cov's kernel."""
    torch.manual_seed(0)
    for shape, integers in itertools.product([(4,), (3, 4), (2, 1), (1,)], (False, True)):
        x = torch.randint(-5, 5, shape) if integers else torch.randn(shape)
        count = shape[-1]
        torch.testing.assert_close(_corrcoef(None, x), torch.corrcoef(x), equal_nan=True)
        for correction, f, a in itertools.product(
                (0, 1, 3), (None, torch.randint(1, 4, (count,))), (None, torch.rand(count) + .1)):
            expected = torch.cov(x.clone(), correction=correction, fweights=f, aweights=a)
            torch.testing.assert_close(_cov(None, x.clone(), correction, f, a), expected,
                                       equal_nan=True)


def test_gaussian_nll_loss_without_its_check_on_the_values():
    loss = torch.nn.functional.gaussian_nll_loss
    x, target = torch.randn(4, 3, 2), torch.randn(4, 3, 2)
    _check(lambda x, t, v, w, u: (loss(x, t, v), loss(x, t, w, reduction="sum", full=True),
                                  loss(x, t, u, reduction="none", eps=0.5)),
           (x, target, torch.rand(4, 3, 2), torch.rand(4, 3), torch.rand(4, 1, 2)))


@pytest.mark.skipif(not hasattr(torch.nn, "LinearCrossEntropyOptions"), reason="torch < 2.12")
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_chunked_linear_cross_entropy_is_the_unchunked_loss(reduction):
    options = torch.nn.LinearCrossEntropyOptions(batch_chunk_size=2)
    loss = torch.nn.functional.linear_cross_entropy
    _check(lambda x, w, t, b, cw: (
        loss(x, w, t, reduction=reduction, options=options),
        loss(x, w, t, linear_bias=b, weight=cw, label_smoothing=0.1, reduction=reduction,
             options=options)),
        (torch.randn(8, 3), torch.randn(5, 3), torch.randint(0, 5, (8,)), torch.randn(5),
         torch.rand(5)))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_ctc_loss_by_its_forward_recursion(reduction):
    # Padded and concatenated targets, lengths as tensors and as lists, an item too short
    # for its target (infinite loss, zeroed by zero_infinity); run at other lengths too.
    torch.manual_seed(0)
    loss = torch.nn.functional.ctc_loss
    log_probs = torch.randn(9, 3, 5).log_softmax(2)
    targets = torch.randint(1, 5, (3, 4))

    def both(lp, t, il, tl):
        flat = torch.cat([t[0, :3], t[1, :1], t[2, :4]])
        return (loss(lp, t, il, tl, reduction=reduction),
                loss(lp, flat, [9, 7, 2], [3, 1, 4], blank=0, reduction=reduction,
                     zero_infinity=True),
                loss(lp[:, 0], t[0], torch.tensor(8), torch.tensor(4), reduction=reduction))

    _check(both, (log_probs, targets, torch.tensor([9, 6, 8]), torch.tensor([4, 2, 3])),
           (torch.randn(9, 3, 5).log_softmax(2), torch.randint(1, 5, (3, 4)),
            torch.tensor([5, 9, 1]), torch.tensor([2, 4, 0])))


def test_tensor_split_at_a_0d_tensor_of_sections_is_refused_clearly():
    with pytest.raises(CaptureError, match="number of outputs would depend on"):
        onnxport.export(Function(lambda x, n: torch.tensor_split(x, n)), (X, torch.tensor(2)))


def test_real_calls_are_untouched_after_capture():
    onnxport.export(Function(lambda x, s: x.narrow(0, s, 1)), (X, torch.tensor(1)))
    assert torch.nn.functional.one_hot(torch.tensor([2])).tolist() == [[0, 0, 1]]
    assert torch.narrow(X, 0, torch.tensor(1), 2).shape == (2, 6, 4)


def test_a_value_sized_output_with_a_dynamic_axis_of_one_in_the_example():
    # A dynamic axis that is 1 in the example makes capture compare the program's output shapes
    # with eager's at the example; the length of x[x > 0] is known only at run time (seen with
    # mistral's and qwen2's sliding-window caches exported from cuda), which the check skips.
    class Positives(torch.nn.Module):
        def forward(self, x):
            return x[x > 0] * 2, x + 1

    model, x = Positives(), torch.randn(1, 4)
    program = onnxport.export(model, (x,), input_names=["x"], dynamic_axes={"x": {0: "n"}},
                              dynamo=True)
    for inputs in ((x,), (torch.randn(3, 4),)):
        for a, e in zip(program(*inputs), model(*inputs)):
            assert a.shape == e.shape
            torch.testing.assert_close(a, e, rtol=1e-3, atol=1e-4)


class ClassesFromATensor(torch.nn.Module):
    def forward(self, x, count):
        return (torch.nn.functional.one_hot(x, count.to(torch.int32)[0]),
                torch.nn.functional.one_hot(x))


@pytest.mark.parametrize("scripted", [False, True], ids=["traced", "scripted"])
@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "dynamo=False"])
def test_one_hot_of_a_count_read_from_a_tensor_on_the_traced_paths(dynamo, scripted):
    """PyTorch's suite: ``one_hot(x, num_classes[0])`` of a tensor input. Its count is a
    plain int in the schema, so the trace's replay could not take the size read from the
    tensor, nor the -1 that infers it, on either path."""
    model = ClassesFromATensor()
    model = torch.jit.script(model) if scripted else model
    program = onnxport.export(model, (torch.arange(10), 15 * torch.ones(1)), dynamo=dynamo)
    for x, count in [(torch.arange(10), 15 * torch.ones(1)),
                     (torch.tensor([1, 6, 2, 0, 0, 4, 4, 1, 0, 2]), 12 * torch.ones(1))]:
        expected = model(x, count)
        actual = program(x, count)
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            torch.testing.assert_close(a, e)
