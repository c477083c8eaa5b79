"""A None among a model's outputs is no ONNX output; the tensors around it keep their names and
ONNX Runtime returns eager's tensor outputs in order (issue 6)."""

from __future__ import annotations

import torch

import onnxport


class ReturnsNone(torch.nn.Module):
    def forward(self, x):
        return x + 1, None, x * 2


class ReturnsDictWithNone(torch.nn.Module):
    def forward(self, x):
        return {"first": x.sin(), "nothing": None, "last": x.cos()}


def _eager_tensors(model, *args):
    with torch.no_grad():
        leaves = torch.utils._pytree.tree_leaves(model(*args))
    return [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]


def _check(program, model, *args):
    actual = program(*args)
    expected = _eager_tensors(model, *args)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, rtol=1e-3, atol=1e-4)


def test_none_output_is_not_an_onnx_output():
    model = ReturnsNone()
    program = onnxport.export(model, (torch.randn(2, 3),), dynamic_axes={"x": {0: "batch"}},
                              input_names=["x"])
    assert len(program.model.graph.outputs) == 2
    assert [n.op_type for n in program.model.graph] == ["Add", "Mul"]
    _check(program, model, torch.randn(2, 3))
    _check(program, model, torch.randn(5, 3))


def test_output_names_skip_the_none():
    model = ReturnsNone()
    program = onnxport.export(model, (torch.randn(2, 3),), output_names=["plus", "times"])
    assert [v.name for v in program.model.graph.outputs] == ["plus", "times"]
    assert program.output_names == ["plus", "times"]
    _check(program, model, torch.randn(2, 3))


def test_output_names_given_for_every_item_drop_the_none_one():
    model = ReturnsNone()
    program = onnxport.export(model, (torch.randn(2, 3),),
                              output_names=["plus", "unused", "times"])
    assert [v.name for v in program.model.graph.outputs] == ["plus", "times"]
    _check(program, model, torch.randn(2, 3))


def test_named_outputs_around_a_none_keep_their_names():
    model = ReturnsDictWithNone()
    program = onnxport.export(model, (torch.randn(2, 3),))
    assert [v.name for v in program.model.graph.outputs] == ["first", "last"]
    _check(program, model, torch.randn(2, 3))


def test_verify_passes_with_a_none_output():
    model = ReturnsNone()
    program = onnxport.export(model, (torch.randn(2, 3),), verify=True)
    assert all(r.passed for r in program.verification)
    assert len(program.verification) == 2
