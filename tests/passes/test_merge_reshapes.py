"""MergeReshapes: Reshape chains become one Reshape, and a Reshape to its input's own shape goes."""

import torch

import onnxport


def _op_types(program):
    return [n.op_type for n in program.model.graph]


def test_chain_of_views_is_one_reshape():
    def f(x):
        return x.view(6, 4).view(2, 12).view(3, 8) + 1

    x = torch.randn(2, 3, 4)
    program = onnxport.export(f, (x,), opset_version=18)
    assert _op_types(program) == ["Reshape", "Add"], _op_types(program)
    torch.testing.assert_close(program(x)[0], f(x))


def test_reshape_back_to_the_same_shape_goes():
    def f(x):
        return x.reshape(2, 12).relu().reshape(2, 3, 4).reshape(2, 3, 4) * 2

    x = torch.randn(2, 3, 4)
    program = onnxport.export(f, (x,), opset_version=18)
    assert _op_types(program).count("Reshape") == 2, _op_types(program)
    torch.testing.assert_close(program(x)[0], f(x))


def test_dynamic_chain_keeps_zero_entries_meaning():
    def f(x):
        return x.reshape(x.shape[0], -1).reshape(x.shape[0], 3, 4) + 1

    x = torch.randn(2, 3, 4)
    program = onnxport.export(f, (x,), dynamic_shapes={"x": {0: torch.export.Dim("batch")}},
                              opset_version=18)
    for shape in [(2, 3, 4), (5, 3, 4)]:
        x = torch.randn(*shape)
        torch.testing.assert_close(program(x)[0], f(x))
