"""max_pool1d over a dynamic length: torch's own max_pool1d fixed the length to the example's
(torch.export specialized it, and the tracer's replay too); run as max_pool2d over an axis
of one, it stays dynamic on both paths."""

import warnings

import pytest
import torch

import onnxport
from onnxport.errors import DynamicDimensionFixedWarning


class TextCNN(torch.nn.Module):
    def __init__(self, **pool):
        super().__init__()
        self.conv = torch.nn.Conv1d(4, 6, 3, padding=1)
        self.pool = torch.nn.MaxPool1d(**pool)

    def forward(self, x):
        return self.pool(torch.relu(self.conv(x)))


POOLS = {
    "kernel 2": dict(kernel_size=2),
    "ceil mode": dict(kernel_size=3, stride=2, ceil_mode=True),
    "padded and dilated": dict(kernel_size=3, stride=1, padding=1, dilation=2),
}


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "dynamo=False"])
@pytest.mark.parametrize("pool", list(POOLS))
def test_a_dynamic_length_stays_dynamic(pool, dynamo):
    torch.manual_seed(0)
    model = TextCNN(**POOLS[pool]).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DynamicDimensionFixedWarning)
        program = onnxport.export(model, (torch.randn(1, 4, 9),), input_names=["x"],
                                  dynamic_axes={"x": {0: "batch", 2: "length"}}, dynamo=dynamo)
    assert str(program.model.graph.inputs[0].shape) == "[batch,4,length]"
    for shape in [(1, 4, 9), (3, 4, 14)]:
        x = torch.randn(shape)
        with torch.no_grad():
            expected = model(x)
        torch.testing.assert_close(program(x)[0], expected, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "dynamo=False"])
def test_an_unbatched_input_and_the_function_after_the_export(dynamo):
    def pooled(x):
        return torch.nn.functional.max_pool1d(x, 2, ceil_mode=True)

    original = torch.max_pool1d
    program = onnxport.export(pooled, (torch.randn(4, 7),), input_names=["x"],
                              dynamic_axes={"x": {1: "length"}}, dynamo=dynamo)
    assert torch.max_pool1d is original
    for shape in [(4, 7), (4, 10)]:
        x = torch.randn(shape)
        torch.testing.assert_close(program(x)[0], pooled(x), rtol=1e-3, atol=1e-4)


class ScriptedPools(torch.nn.Module):
    def forward(self, x):
        return (torch.nn.functional.max_pool1d(x, 3, stride=1, padding=1),
                torch.max_pool1d(x, 2), torch.nn.functional.pad(x, [1, 2]))


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "dynamo=False"])
def test_scripted_max_pool1d_and_pad_keep_a_dynamic_length(dynamo):
    """Scripted, max_pool1d and F.pad are aten::max_pool1d and aten::pad in the graph, which
    the tracer's patch of torch.max_pool1d never sees: their kernels fixed the batch and the
    length to the example's (the file then refused other sizes)."""
    model = torch.jit.script(ScriptedPools())
    with warnings.catch_warnings():
        warnings.simplefilter("error", DynamicDimensionFixedWarning)
        program = onnxport.export(model, (torch.randn(2, 3, 8),), input_names=["x"],
                                  dynamic_axes={"x": {0: "batch", 2: "length"}}, dynamo=dynamo)
    for shape in [(2, 3, 8), (3, 3, 11)]:
        x = torch.randn(shape)
        for actual, expected in zip(program(x), model(x), strict=True):
            torch.testing.assert_close(actual, expected, rtol=1e-3, atol=1e-4)
