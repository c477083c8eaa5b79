"""Normalization (ops/normalization.py): batch, layer, group, instance and RMS norms, their
native_* forms with saved statistics, and the opset-dependent single nodes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import onnxport
from op_check import cases, check, check_opinfo, op_types, opinfo_cases

NORMS = [
    "nn.functional.batch_norm", "nn.functional.layer_norm", "nn.functional.group_norm",
    "nn.functional.instance_norm", "nn.functional.rms_norm", "native_layer_norm",
    "native_batch_norm", "native_group_norm", "_native_batch_norm_legit",
]


@pytest.mark.parametrize("name, variant, dtype, subset", opinfo_cases(NORMS))
def test_normalization_opinfo(name, variant, dtype, subset):
    check_opinfo(name, variant, dtype, subset, limit=5)


X = torch.randn(3, 4, 5, 6)
C = 4


def _stats():
    torch.manual_seed(1)
    return (torch.randn(C) * 0.5, torch.rand(C) + 0.5, torch.rand(C) + 0.5, torch.randn(C))


def _batch_norm_module():
    module = torch.nn.BatchNorm2d(C)
    mean, var, weight, bias = _stats()
    with torch.no_grad():
        module.running_mean.copy_(mean)
        module.running_var.copy_(var)
        module.weight.copy_(weight)
        module.bias.copy_(bias)
    return module


def _layer_norm_native(x, w, b):
    return torch.ops.aten.native_layer_norm(x, [5, 6], w, b, 1e-5)


HAND = {
    "batch_norm module (eval)": (_batch_norm_module(), X),
    "batch_norm functional, no affine": (
        lambda x, m, v: F.batch_norm(x, m, v, eps=1e-3), X, *_stats()[:2]),
    "batch_norm training=True uses batch statistics": (
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), X, *_stats()[2:]),
    "batch_norm 1d (N, C)": (lambda x, m, v: F.batch_norm(x, m, v), torch.randn(5, C),
                             *_stats()[:2]),
    "native_batch_norm eval": (lambda x, w, b, m, v: torch.ops.aten.native_batch_norm(
        x, w, b, m, v, False, 0.1, 1e-5)[0], X, *_stats()[2:], *_stats()[:2]),
    "native_batch_norm training saves statistics": (
        lambda x, w, b: torch.ops.aten.native_batch_norm(x, w, b, None, None, True, 0.1, 1e-5),
        X, *_stats()[2:]),
    "aten::_native_batch_norm_legit_no_training": (
        lambda x, w, b, m, v: torch.ops.aten._native_batch_norm_legit_no_training(
            x, w, b, m, v, 0.1, 1e-5)[0], X, *_stats()[2:], *_stats()[:2]),
    "aten::_native_batch_norm_legit.no_stats": (
        lambda x, w, b: torch.ops.aten._native_batch_norm_legit.no_stats(x, w, b, True, 0.1,
                                                                         1e-5), X, *_stats()[2:]),
    "aten::_native_batch_norm_legit (functionalized)": (
        lambda x, w, b, m, v: torch.ops.aten._native_batch_norm_legit(
            x, w, b, m.clone(), v.clone(), True, 0.1, 1e-5), X, *_stats()[2:], *_stats()[:2]),
    "layer_norm last axis": (lambda x, w, b: F.layer_norm(x, (6,), w, b), X, torch.randn(6),
                             torch.randn(6)),
    "layer_norm two axes no affine": (lambda x: F.layer_norm(x, (5, 6), eps=1e-3), X),
    "layer_norm weight only": (lambda x, w: F.layer_norm(x, (6,), w), X, torch.randn(6)),
    "native_layer_norm saves mean and rstd": (_layer_norm_native, X, torch.randn(5, 6),
                                              torch.randn(5, 6)),
    "group_norm": (lambda x, w, b: F.group_norm(x, 2, w, b), X, torch.randn(C), torch.randn(C)),
    "group_norm no affine 3-d": (lambda x: F.group_norm(x, 4, eps=1e-3), torch.randn(2, 8, 7)),
    "native_group_norm saves mean and rstd": (
        lambda x, w, b: torch.ops.aten.native_group_norm(x, w, b, 3, 4, 30, 2, 1e-5),
        X, torch.randn(C), torch.randn(C)),
    "instance_norm": (lambda x, w, b: F.instance_norm(x, weight=w, bias=b), X, torch.randn(C),
                      torch.randn(C)),
    "instance_norm with running stats": (
        lambda x, m, v: F.instance_norm(x, m, v, use_input_stats=False), X, *_stats()[:2]),
    "rms_norm": (lambda x, w: F.rms_norm(x, (6,), w, eps=1e-6), X, torch.randn(6)),
    "rms_norm default eps, no weight": (lambda x: F.rms_norm(x, (5, 6)), X),
}


@pytest.mark.parametrize("case", cases(HAND))
@pytest.mark.parametrize("opset", [13, 18])
def test_normalization(case, opset):
    """Below and above LayerNormalization (17); RMSNormalization (23) is tested below."""
    function, *args = case
    check(function, *args, opset=opset)


@pytest.mark.parametrize("opset", [13, 16, 17, 18])
def test_layer_norm_is_one_node_from_opset_17(opset):
    program = check(torch.nn.LayerNorm(6), X, opset=opset)
    if opset >= 17:
        assert op_types(program) == ["LayerNormalization"]
    else:
        assert "LayerNormalization" not in op_types(program)


@pytest.mark.parametrize("opset", [22, 23])
def test_rms_norm_is_one_node_from_opset_23(opset):
    program = check(torch.nn.RMSNorm(6), X, opset=opset)
    assert (op_types(program) == ["RMSNormalization"]) == (opset >= 23)


def test_batch_norm_in_eval_is_one_node():
    program = check(_batch_norm_module(), X)
    assert op_types(program) == ["BatchNormalization"]


@pytest.mark.parametrize("opset", [18, 23])
def test_rms_norm_of_half_floats_uses_float32_eps_and_arithmetic(opset):
    # A small row: with float16's eps (1e-3) in place of float32's, 0.0149 normalizes to 0.43;
    # torch gives 0.9995.
    x = torch.tensor([[0.0149], [0.5], [-2.0]], dtype=torch.float16)
    weight = torch.tensor([1.5], dtype=torch.float16)
    check(lambda x, w: (F.rms_norm(x, [1]), F.rms_norm(x, [1], w)), x, weight, opset=opset,
          rtol=1e-2, atol=1e-3)  # half floats: one unit in the last place of 1.5


CHANNELS = torch.export.Dim("channels", min=2, max=64)
DYNAMIC_CHANNELS = {
    "instance_norm": (lambda x: F.instance_norm(x), torch.randn(2, 3, 4, 4), {1: CHANNELS},
                      torch.randn(2, 5, 4, 4)),
    "instance_norm 1-d": (lambda x: F.instance_norm(x), torch.randn(2, 3, 7),
                          {1: CHANNELS, 2: torch.export.Dim("length", min=2)},
                          torch.randn(2, 6, 4)),
    "batch_norm with batch statistics": (
        lambda x: F.batch_norm(x, None, None, training=True), torch.randn(2, 3, 4, 4),
        {1: CHANNELS}, torch.randn(2, 5, 4, 4)),
    "layer_norm over a dynamic size": (lambda x: F.layer_norm(x, x.shape[-1:]),
                                       torch.randn(2, 3, 4), {2: CHANNELS}, torch.randn(2, 3, 7)),
    "rms_norm over a dynamic size": (lambda x: F.rms_norm(x, x.shape[-2:]), torch.randn(2, 3, 4),
                                     {2: CHANNELS}, torch.randn(2, 3, 7)),
}


@pytest.mark.parametrize("opset", [13, 18, 23])
@pytest.mark.parametrize("case", cases(DYNAMIC_CHANNELS))
def test_norms_without_weights_over_dynamic_sizes(case, opset):
    # The ones and zeros standing for a missing weight and bias take the run-time size.
    function, x, dims, other = case
    check(function, x, opset=opset, dynamic_shapes={"x": dims}, run_with=[(other,)])


@pytest.mark.parametrize("affine", [False, True])
def test_instance_norm_module_over_dynamic_sizes(affine):
    sizes = {"input": {0: torch.export.Dim("batch"), 2: torch.export.Dim("height", min=2),
                       3: torch.export.Dim("width", min=2)}}
    program = check(torch.nn.InstanceNorm2d(3, affine=affine), torch.randn(2, 3, 4, 4),
                    dynamic_shapes=sizes, run_with=[(torch.randn(3, 3, 6, 5),)])
    assert op_types(program) == ["InstanceNormalization"]


def test_float16_native_norms_keep_torch_s_statistics_dtypes():
    # LayerNormalization's mean and 1/std come out in float32 (its stash type), torch's in
    # float16; the functional batch norm casts its updated running stats back to float16,
    # values inference leaves out (the Cast of nothing failed).
    aten = torch.ops.aten
    x = torch.randn(4, 5, 6, dtype=torch.float16)
    w, b = torch.rand(6, dtype=torch.float16), torch.rand(6, dtype=torch.float16)
    check(lambda x, w, b: aten.native_layer_norm(x, [6], w, b, 1e-5), x, w, b,
          rtol=1e-2, atol=1e-2)  # float16's 3 digits
    stats = [torch.rand(5, dtype=torch.float16) for _ in range(4)]
    check(lambda x, w, b, m, v: aten._native_batch_norm_legit(x, w, b, m, v, True, 0.5, 0.6)[:3],
          x, *stats, rtol=1e-2, atol=1e-2)



def test_native_batch_norm_in_eval_returns_cuda_s_running_statistics():
    # From a model on cuda, the eval batch norm's saved statistics are the running mean and
    # 1/sqrt(running var + eps), of shape [C] (the translation gave the CPU's empty tensors,
    # and the checker refused the model). CI has no GPU: the program captured on the CPU gets
    # the [C] results CUDA's kernel records.
    aten = torch.ops.aten

    class Model(torch.nn.Module):
        def forward(self, x, w, b, m, v):
            return aten.native_batch_norm(x, w, b, m, v, False, 0.1, 1e-5)

    torch.manual_seed(0)
    x = torch.randn(2, 3, 4, 4)
    w, b, mean = torch.rand(3), torch.rand(3), torch.rand(3)
    var = torch.rand(3) + 0.5
    exported = torch.export.export(Model(), (x, w, b, mean, var))
    norm = next(n for n in exported.graph.nodes if n.target is aten.native_batch_norm.default)
    out, _, _ = norm.meta["val"]
    stats = out.new_empty(3)
    norm.meta["val"] = (out, stats, stats)
    for user in norm.users:
        if user.args[1] > 0:
            user.meta["val"] = stats
    actual = onnxport.export(exported)(x, w, b, mean, var)
    expected = aten.native_batch_norm(x, w, b, mean, var, False, 0.1, 1e-5)[0]
    torch.testing.assert_close(torch.as_tensor(actual[0]), expected, rtol=1e-3, atol=1e-4)
    torch.testing.assert_close(torch.as_tensor(actual[1]), mean)
    torch.testing.assert_close(torch.as_tensor(actual[2]), (var + 1e-5).rsqrt())
