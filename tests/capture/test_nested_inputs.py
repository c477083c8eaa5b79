"""Tensors nested in inputs (lists, dicts) become graph inputs named after their path, in the
order torch.export flattens them, and dynamic dims given for them keep their names."""

import pytest
import torch

import onnxport


def _dims(value):
    return [str(d) for d in value.shape]


def test_nested_inputs_are_named_by_path_and_run():
    def f(x, named, pair):
        return x + pair[0] * pair[1] - named["bias"]

    # (a dict last in args would be read as the keyword arguments, as torch.onnx does)
    args = (torch.randn(3, 4), {"bias": torch.randn(4)}, [torch.randn(3, 4), torch.randn(3, 4)])
    program = onnxport.export(f, args)
    assert [v.name for v in program.model.graph.inputs] == ["x", "named.bias", "pair.0", "pair.1"]
    torch.testing.assert_close(program(*args)[0], f(*args), rtol=1e-3, atol=1e-4)


def test_dynamic_axes_on_nested_inputs():
    def f(pair, y):
        return pair[0] + pair[1] * y

    args = ([torch.randn(3, 4), torch.randn(3, 4)], torch.randn(3, 4))
    axes = {"pair.0": {0: "batch"}, "pair.1": {0: "batch"}, "y": {0: "batch"}}
    program = onnxport.export(f, args, dynamic_axes=axes)
    for value in program.model.graph.inputs:
        assert _dims(value) == ["batch", "4"], value
    other = ([torch.randn(6, 4), torch.randn(6, 4)], torch.randn(6, 4))
    torch.testing.assert_close(program(*other)[0], f(*other), rtol=1e-3, atol=1e-4)


def test_dynamic_shapes_on_a_dict_keyword_input_given_before_a_tensor():
    def f(x, named):
        return x * named["scale"] + named["shift"]

    batch = torch.export.Dim("batch")
    kwargs = {"named": {"scale": torch.randn(3, 4), "shift": torch.randn(3, 4)},
              "x": torch.randn(3, 4)}
    shapes = {"x": {0: batch}, "named": {"scale": {0: batch}, "shift": {0: batch}}}
    program = onnxport.export(f, (), kwargs=kwargs, dynamic_shapes=shapes)
    assert [v.name for v in program.model.graph.inputs] == ["named.scale", "named.shift", "x"]
    for value in program.model.graph.inputs:
        assert _dims(value) == ["batch", "4"], value
    other = {"named": {"scale": torch.randn(5, 4), "shift": torch.randn(5, 4)},
             "x": torch.randn(5, 4)}
    torch.testing.assert_close(program(**other)[0], f(**other), rtol=1e-3, atol=1e-4)


def test_dims_left_to_torch_export_are_named_after_their_input():
    def f(x, y):
        return x.sum(1) + y.sum(1)

    batch = torch.export.Dim("batch")
    shapes = {"x": {0: batch, 1: torch.export.Dim.DYNAMIC}, "y": {0: torch.export.Dim.AUTO}}
    args = (torch.randn(3, 4), torch.randn(3, 5))
    program = onnxport.export(f, args, dynamic_shapes=shapes)
    x, y = program.model.graph.inputs
    # y's batch is x's: the given name wins over the made-up one.
    assert _dims(x) == ["batch", "x_dim_1"] and _dims(y) == ["batch", "5"]
    other = (torch.randn(2, 7), torch.randn(2, 5))
    torch.testing.assert_close(program(*other)[0], f(*other), rtol=1e-3, atol=1e-4)


class _TwoInputs(torch.nn.Module):
    def forward(self, x, y):
        return x * 2 + y, x.relu()


@pytest.mark.parametrize("dynamo", [None, True, False])
def test_one_tensor_given_twice_is_two_inputs(dynamo):
    # torch.export made a tensor given twice one input, read from its last place: the graph
    # computed y * 2 + y, right at the example and wrong for any other pair.
    x = torch.randn(3, 4)
    program = onnxport.export(_TwoInputs(), (x, x), dynamo=dynamo,
                              input_names=["x", "y"], dynamic_axes={"x": [0], "y": [0]})
    assert program.input_names == ["x", "y"]
    a, b = torch.randn(5, 4), torch.randn(5, 4)
    for actual, expected in zip(program(a, b), _TwoInputs()(a, b)):
        torch.testing.assert_close(actual, expected)
