"""torch._shape_as_tensor (torch.onnx.operators.shape_as_tensor, in code written for the
TorchScript exporter): one int64 tensor of the sizes, on both paths. Non-strict torch.export
failed on it, and strict torch.export returned the sizes themselves: the file had one scalar
output per axis where the model returns one tensor."""

import pytest
import torch

import onnxport


class SizesAndSum(torch.nn.Module):
    def forward(self, x):
        return torch._shape_as_tensor(x), x.sum(1)


class SizesTimesSum(torch.nn.Module):
    def forward(self, x):
        return torch._shape_as_tensor(x)[1:] * x.sum()


@pytest.mark.parametrize("model", [SizesAndSum(), SizesTimesSum()], ids=["returned", "used"])
@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "dynamo=False"])
def test_shape_as_tensor_is_one_tensor_of_the_sizes_at_run_time(dynamo, model):
    program = onnxport.export(model, (torch.randn(2, 3, 4),), input_names=["x"],
                              dynamic_axes={"x": [0, 1, 2]}, dynamo=dynamo)
    assert program.capture_attempts == []  # (torch.export itself, on the default path)
    for shape in [(2, 3, 4), (5, 1, 7)]:
        x = torch.randn(shape)
        actual, expected = program(x), model(x)
        expected = expected if isinstance(expected, tuple) else (expected,)
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            torch.testing.assert_close(a, e, rtol=1e-3, atol=1e-4)


def test_the_patch_is_undone_after_the_export():
    original = torch._shape_as_tensor
    onnxport.export(SizesAndSum(), (torch.randn(2, 3),))
    assert torch._shape_as_tensor is original
