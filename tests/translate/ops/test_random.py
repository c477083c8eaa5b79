"""Random ops: their values differ from torch's generator, so shapes and dtypes are compared
with eager and the distributions with their moments (bounds of ~7 standard errors)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import onnxport
from op_check import as_module

N = 40_000


def _draws(x, p):
    return (torch.rand_like(x), torch.randn_like(x), torch.randn(2, N // 2) * 2 + 1,
            torch.randint(3, 7, (N,)), torch.bernoulli(torch.full((N,), 0.3)),
            torch.multinomial(p, N, replacement=True), torch.multinomial(p, 3),
            torch.nn.functional.rrelu(-x, training=True), torch.rand_like(x))


def _run(opset):
    x, p = torch.rand(N), torch.tensor([0.1, 0.2, 0.7])
    model = as_module(_draws)
    program = onnxport.export(model, (x, p), opset_version=opset)
    actual = [t.numpy() for t in program(x, p)]
    for a, e in zip(actual, _draws(x, p)):
        assert a.shape == tuple(e.shape) and a.dtype == e.numpy().dtype
    return program, actual


# ONNX Runtime has no kernel for the opset-22 Random*/Multinomial ops: from 22 on the draws come
# from a training-mode Dropout's mask.
@pytest.mark.parametrize("opset", [18, 23])
def test_random_draws_have_torch_s_distributions(opset):
    program, (uniform, normal, scaled, ints, bern, mult, distinct, rrelu, uniform2) = _run(opset)
    op_types = {node.op_type for node in program.model.graph}
    assert ("RandomUniformLike" in op_types) == (opset < 22)
    assert 0 <= uniform.min() and uniform.max() < 1 and abs(uniform.mean() - 0.5) < 0.01
    assert abs(normal.mean()) < 0.035 and abs(normal.std() - 1) < 0.03
    assert abs(scaled.mean() - 1) < 0.07 and abs(scaled.std() - 2) < 0.06
    assert set(np.unique(ints)) == {3, 4, 5, 6}
    assert abs(bern.mean() - 0.3) < 0.016
    assert np.allclose(np.bincount(mult, minlength=3) / N, [0.1, 0.2, 0.7], atol=0.015)
    assert sorted(distinct) == [0, 1, 2]
    # Two draws of the same shape in one graph stay two draws (not merged as one subexpression).
    assert abs(np.corrcoef(uniform, uniform2)[0, 1]) < 0.035
    assert abs(np.corrcoef(uniform, normal)[0, 1]) < 0.035


def test_rrelu_slopes_stay_in_their_range_at_opset_23():
    x = -torch.rand(N) - 0.5
    program = onnxport.export(as_module(
        lambda x: torch.nn.functional.rrelu(x, 0.1, 0.3, training=True)), (x,), opset_version=23)
    slopes = program(x)[0].numpy() / x.numpy()
    assert 0.1 - 1e-6 <= slopes.min() and slopes.max() <= 0.3 + 1e-6
    assert abs(slopes.mean() - 0.2) < 0.003


def test_two_draws_of_a_dynamic_shape_stay_two_at_opset_23():
    # With a dynamic shape nothing is folded, and common-subexpression elimination merged the
    # two draws' identical Dropouts into one: both outputs were the same tensor.
    x = torch.rand(5)
    program = onnxport.export(as_module(lambda x: (torch.rand_like(x), torch.rand_like(x))), (x,),
                              opset_version=23, dynamic_shapes={"x": {0: torch.export.Dim("n")}})
    first, second = program(torch.rand(64))
    assert first.shape == (64,) and not torch.equal(first, second)


def _bernoulli_draws(x, p):
    return (torch.bernoulli(x, 0.25), x.clone().bernoulli_(p), x.clone().bernoulli_(0.75),
            torch.bernoulli(x.double(), 0.5))


@pytest.mark.parametrize("dynamo", [None, False])
@pytest.mark.parametrize("opset", [18, 23])
def test_bernoulli_with_a_probability_argument(dynamo, opset):
    # bernoulli(x, p) and x.bernoulli_(p_tensor): x gives only the shape and dtype.
    x = torch.rand(N)
    p = torch.rand(N) * 0.5
    program = onnxport.export(as_module(_bernoulli_draws), (x, p), opset_version=opset,
                              dynamo=dynamo)
    actual = program(x, p)
    for a, e in zip(actual, _bernoulli_draws(x, p)):
        assert a.shape == e.shape and a.dtype == e.dtype
        assert set(torch.unique(a).tolist()) <= {0.0, 1.0}
    quarter, per_element, three_quarters, half = (a.numpy() for a in actual)
    assert abs(quarter.mean() - 0.25) < 0.015 and abs(three_quarters.mean() - 0.75) < 0.015
    assert abs(half.mean() - 0.5) < 0.016
    assert abs(per_element.mean() - p.mean().item()) < 0.015
    assert np.corrcoef(per_element, p.numpy())[0, 1] > 0.3  # drawn with each element's p


def _in_place_draws(x):
    return x.uniform_(2.0, 5.0) * 1, torch.empty_like(x).normal_(3.0, 0.5)


@pytest.mark.parametrize("dynamo", [None, False])
@pytest.mark.parametrize("opset", [18, 23])
def test_in_place_uniform_and_normal(dynamo, opset):
    # aten::uniform of a 2-D input with dynamic axes (x.uniform_(a, b)) was an unsupported
    # op on both paths: its decomposition reads strides (sym_stride), and aten::normal_functional
    # was one with torch 2.11. (The input is the model's to fill: each run gets a fresh one.)
    program = onnxport.export(as_module(_in_place_draws), (torch.rand(10, N // 10),),
                              opset_version=opset, dynamo=dynamo, input_names=["x"],
                              dynamic_axes={"x": [0, 1]})
    uniform, normal = (a.numpy() for a in program(torch.rand(20, N // 10 + 1)))
    assert uniform.shape == normal.shape == (20, N // 10 + 1) and uniform.dtype == np.float32
    # (<= 5: 2 + 3 * u for u within 2 ** -24 of 1 rounds to 5 in float32, in torch's
    # uniform_ too; about once in 80,000 draws)
    assert 2.0 <= uniform.min() and uniform.max() <= 5.0 and abs(uniform.mean() - 3.5) < 0.03
    assert abs(normal.mean() - 3.0) < 0.02 and abs(normal.std() - 0.5) < 0.015
