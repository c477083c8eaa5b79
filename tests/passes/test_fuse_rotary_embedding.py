import pytest
import torch

import model_zoo
import onnxport
from onnxport.capture import parameter_names
from test_models import _resized, assert_matches_eager


def _op_types(program):
    return [n.op_type for n in program.model.graph]


@pytest.mark.parametrize("dynamic", [False, True])
def test_llama_rotary_is_rotary_embedding_at_opset_23(dynamic):
    model, args, kwargs = model_zoo.build("llama")
    axes = model_zoo.dynamic_axes_for("llama", args, kwargs, parameter_names(model))
    program = onnxport.export(model, args, kwargs=kwargs, opset_version=23,
                              dynamic_axes=axes if dynamic else None)
    ops = _op_types(program)
    # Query and key of both layers; no rotate-half left (Neg, and Slice of the heads).
    assert ops.count("RotaryEmbedding") == 4 and "Neg" not in ops
    assert_matches_eager(program, model, args, kwargs)
    if dynamic:
        assert_matches_eager(program, model, *_resized("llama", args, kwargs, batch=3, sequence=11))


def test_below_opset_23_rotary_stays_portable():
    model, args, kwargs = model_zoo.build("llama")
    program = onnxport.export(model, args, kwargs=kwargs, opset_version=22)
    # Llama's 16-wide heads rotate by a MatMul there (RotateHalfMatMul), not by a Neg.
    assert "RotaryEmbedding" not in _op_types(program) and "Mul" in _op_types(program)
    assert any(n.op_type == "MatMul" and n.inputs[1].name.startswith("rotate_half")
               for n in program.model.graph)


def _rotate_half(x):
    return torch.cat((-x[..., x.shape[-1] // 2:], x[..., : x.shape[-1] // 2]), dim=-1)


@pytest.mark.parametrize("halves_equal", [True, False])
def test_constant_tables_fuse_only_with_equal_halves(halves_equal):
    torch.manual_seed(0)
    angles = torch.randn(1, 1, 5, 4)
    angles = torch.cat((angles, angles if halves_equal else torch.randn(1, 1, 5, 4)), dim=-1)
    cos, sin = angles.cos(), angles.sin()

    def f(x):
        return x * cos + _rotate_half(x) * sin

    x = torch.randn(2, 3, 5, 8)
    program = onnxport.export(f, (x,), opset_version=23)
    assert ("RotaryEmbedding" in _op_types(program)) == halves_equal
    torch.testing.assert_close(program(x)[0], f(x), rtol=1e-5, atol=1e-5)
