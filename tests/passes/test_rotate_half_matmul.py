"""RotateHalfMatMul: rotary embeddings of small heads rotate with one MatMul by a signed
permutation instead of Slices, Neg and Concat; numbers stay eager's, at static and dynamic
shapes."""

import pytest
import torch

import model_zoo
import onnxport
from onnxport.capture import parameter_names
from onnxport.passes.rotate_half_matmul import rotation
from test_models import _resized, assert_matches_eager


def _op_types(program):
    return [n.op_type for n in program.model.graph]


@pytest.mark.parametrize("dynamic", [False, True])
def test_llama_rotates_queries_and_keys_with_one_matmul_each(dynamic):
    model, args, kwargs = model_zoo.build("llama")  # head size 16
    axes = model_zoo.dynamic_axes_for("llama", args, kwargs, parameter_names(model))
    program = onnxport.export(model, args, kwargs=kwargs, opset_version=18,
                              dynamic_axes=axes if dynamic else None)
    assert "Neg" not in _op_types(program)
    rotations = [n for n in program.model.graph if n.op_type == "MatMul"
                 and n.inputs[1].name.startswith("rotate_half")]
    assert len(rotations) == 4  # queries and keys of two layers, one shared matrix
    assert len({id(n.inputs[1]) for n in rotations}) == 1
    assert_matches_eager(program, model, args, kwargs)
    if dynamic:
        assert_matches_eager(program, model, *_resized("llama", args, kwargs, batch=3, sequence=11))


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def test_rotation_matrix_is_rotate_half():
    x = torch.randn(3, 5, 8)
    torch.testing.assert_close(x @ torch.from_numpy(rotation(8, "float32")), _rotate_half(x),
                               rtol=0, atol=0)


@pytest.mark.parametrize(("size", "rotated_by_matmul"), [(32, True), (64, False)])
def test_large_heads_keep_the_slices(size, rotated_by_matmul):
    # Past 32 the MatMul's size multiply-adds per element cost more than moving the halves.
    def f(x, cos, sin):
        return x * cos + _rotate_half(x) * sin

    x, cos, sin = torch.randn(2, 4, 6, size), torch.randn(6, size), torch.randn(6, size)
    program = onnxport.export(f, (x, cos, sin), opset_version=18)
    assert ("Neg" not in _op_types(program)) == rotated_by_matmul
    torch.testing.assert_close(program(x, cos, sin)[0], f(x, cos, sin), rtol=1e-3, atol=1e-4)


def test_other_concat_of_halves_is_kept():
    # Halves swapped without the sign: not rotate_half.
    def f(x):
        return torch.cat((x[..., 4:], -x[..., :4]), dim=-1)

    x = torch.randn(2, 3, 8)
    program = onnxport.export(f, (x,), opset_version=18)
    assert "MatMul" not in _op_types(program)
    torch.testing.assert_close(program(x)[0], f(x), rtol=1e-3, atol=1e-4)
