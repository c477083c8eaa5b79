"""MergeTransposes: a Transpose of a Transpose is one Transpose (or none); numbers stay eager's."""

import torch

import model_zoo
import onnxport
from test_models import assert_matches_eager


def _transposes(program):
    return [n for n in program.model.graph if n.op_type == "Transpose"]


def test_two_transposes_become_one_and_inverse_ones_none():
    def f(x):
        y = x.permute(0, 2, 1, 3).transpose(-1, -2)  # one Transpose, perm (0, 2, 3, 1)
        return y, x.transpose(1, 2).transpose(1, 2) + 1  # none

    x = torch.randn(2, 3, 4, 5)
    program = onnxport.export(f, (x,), opset_version=18)
    transposes = _transposes(program)
    assert [list(n.attributes["perm"].value) for n in transposes] == [[0, 2, 3, 1]]
    for actual, expected in zip(program(x), f(x)):
        torch.testing.assert_close(actual, expected)


def test_a_transpose_used_twice_stays():
    def f(x):
        y = x.transpose(0, 1)
        return y.transpose(1, 2), y * 2

    x = torch.randn(2, 3, 4)
    program = onnxport.export(f, (x,), opset_version=18)
    assert len(_transposes(program)) == 2
    for actual, expected in zip(program(x), f(x)):
        torch.testing.assert_close(actual, expected)


def test_bert_key_is_transposed_once():
    model, args, kwargs = model_zoo.build("bert")
    program = onnxport.export(model, args, kwargs=kwargs, opset_version=18)
    # Per layer: q, k and v into heads (k straight to [B, H, D, S]) and the heads back.
    assert len(_transposes(program)) == 2 * 4
    assert_matches_eager(program, model, args, kwargs)
