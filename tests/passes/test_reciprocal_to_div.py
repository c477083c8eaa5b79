import onnxruntime as ort
import pytest
import torch

import model_zoo
import onnxport


def _op_types(program):
    return [n.op_type for n in program.model.graph]


def _assert_matches_eager(program, model, args, kwargs):
    with torch.no_grad():
        expected = model(*args, **kwargs)
    expected = [t for t in torch.utils._pytree.tree_leaves(expected) if isinstance(t, torch.Tensor)]
    for actual, wanted in zip(program(*args, **kwargs), expected, strict=True):
        torch.testing.assert_close(actual, wanted, rtol=1e-3, atol=1e-4)


def _ort_fused_op_types(program, tmp_path):
    """The op types of the graph ONNX Runtime runs after its own fusions."""
    path, optimized = tmp_path / "model.onnx", tmp_path / "optimized.onnx"
    program.save(path)
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(optimized)
    options.intra_op_num_threads = 1
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    import onnx

    return [n.op_type for n in onnx.load(str(optimized)).graph.node]


def test_rsqrt_times_x_becomes_div():
    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    x, w = torch.randn(2, 5, 8), torch.randn(8)
    program = onnxport.export(rms, (x, w), opset_version=18)
    assert "Reciprocal" not in _op_types(program) and "Div" in _op_types(program)
    torch.testing.assert_close(program(x, w)[0], rms(x, w), rtol=1e-5, atol=1e-6)


def test_reciprocal_with_another_user_stays():
    def f(x):
        r = torch.rsqrt(x)
        return x * r, r

    x = torch.rand(3, 4) + 0.5
    program = onnxport.export(f, (x,), opset_version=18)
    assert _op_types(program).count("Reciprocal") == 1 and "Div" in _op_types(program)
    for actual, expected in zip(program(x), f(x)):
        torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize("name", ["llama", "t5"])
def test_norms_are_div_and_fuse_in_ort(name, tmp_path):
    model, args, kwargs = model_zoo.build(name)
    program = onnxport.export(model, args, kwargs=kwargs, opset_version=18)
    # Llama's and T5's RMSNorms are x * rsqrt(mean(x^2) + eps): Div, not Reciprocal ...
    assert "Reciprocal" not in _op_types(program)
    _assert_matches_eager(program, model, args, kwargs)
    # ... so that ONNX Runtime fuses each of them into one SimplifiedLayerNormalization.
    assert "SimplifiedLayerNormalization" in _ort_fused_op_types(program, tmp_path)
