import pytest
import torch

import model_zoo
import onnxport
from test_models import assert_matches_eager


def _op_types(program):
    return [n.op_type for n in program.model.graph]


def test_t5_norms_are_rms_normalization_at_opset_23():
    model, args, kwargs = model_zoo.build("t5")
    program = onnxport.export(model, args, kwargs=kwargs, opset_version=23)
    ops = _op_types(program)
    # Encoder: 2 per layer and a final one; decoder: 3 per layer and a final one.
    assert ops.count("RMSNormalization") == 12 and "Sqrt" not in ops
    assert_matches_eager(program, model, args, kwargs)


def _rms(x, weight=None, axes=(-1,)):
    out = x * torch.rsqrt(x.pow(2).mean(axes, keepdim=True) + 1e-6)
    return out * weight if weight is not None else out


@pytest.mark.parametrize("opset", [18, 23])
def test_weighted_norm_fuses_from_opset_23(opset):
    x, w = torch.randn(2, 5, 8), torch.randn(8)
    program = onnxport.export(_rms, (x, w), opset_version=opset)
    assert (_op_types(program) == ["RMSNormalization"]) == (opset >= 23)
    torch.testing.assert_close(program(x, w)[0], _rms(x, w), rtol=1e-5, atol=1e-6)


def test_norm_without_weight_gets_ones_and_two_trailing_axes():
    x = torch.randn(2, 3, 4, 5)
    function = lambda x: _rms(x, axes=(-2, -1))  # noqa: E731
    program = onnxport.export(function, (x,), opset_version=23)
    assert _op_types(program) == ["RMSNormalization"]
    node = next(iter(program.model.graph))
    assert node.attributes["axis"].value == 2
    torch.testing.assert_close(program(x)[0], function(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("function", [
    lambda x, y: x * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-6),  # another tensor
    lambda x, y: x * torch.rsqrt(x.pow(2).mean(1, keepdim=True) + 1e-6),  # not trailing
    lambda x, y: x * torch.rsqrt(x.pow(3).mean(-1, keepdim=True) + 1e-6),  # not squares
], ids=["other tensor", "middle axis", "cubes"])
def test_look_alikes_stay(function):
    x, y = torch.rand(2, 5, 8) + 0.5, torch.rand(2, 5, 8) + 0.5  # positive: no nan from cubes
    program = onnxport.export(function, (x, y), opset_version=23)
    assert "RMSNormalization" not in _op_types(program)
    torch.testing.assert_close(program(x, y)[0], function(x, y), rtol=1e-5, atol=1e-6)


def test_fused_ops_false_keeps_llama_decomposed_at_opset_23():
    import model_zoo

    model, args, kwargs = model_zoo.build("llama")
    program = onnxport.export(model, args, kwargs=kwargs, opset_version=23, fused_ops=False)
    ops = {n.op_type for n in program.model.graph}
    # Users who want graphs any opset-23 runtime runs: no fused op of opset 23.
    assert not ops & {"Attention", "RMSNormalization", "RotaryEmbedding"}, ops
    assert "Softmax" in ops and "ReduceMean" in ops
    with torch.no_grad():
        expected = model(*args, **kwargs)
    expected = [t for t in torch.utils._pytree.tree_leaves(expected) if isinstance(t, torch.Tensor)]
    for actual, wanted in zip(program(*args, **kwargs), expected, strict=True):
        torch.testing.assert_close(actual, wanted, rtol=1e-3, atol=1e-4)


def test_fused_ops_must_be_a_bool():
    from onnxport.errors import InvalidExportOptionsError

    with pytest.raises(InvalidExportOptionsError, match="fused_ops"):
        onnxport.export(torch.nn.ReLU(), (torch.randn(2),), fused_ops="no")
