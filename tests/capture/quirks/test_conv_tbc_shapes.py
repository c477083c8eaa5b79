"""torch.conv_tbc with a dynamic time and batch axis: torch's fake kernel failed on symbolic
sizes, and capture fixed both axes to the example's, with a warning, on both paths."""

import warnings

import pytest
import torch

import onnxport
from onnxport.errors import DynamicDimensionFixedWarning


class _TimeBatchChannel(torch.nn.Module):
    def forward(self, x, weight, bias):
        return torch.conv_tbc(x, weight, bias, 1)


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
@pytest.mark.parametrize("scripted", [False, True], ids=["traced", "scripted"])
def test_conv_tbc_keeps_its_time_and_batch_dynamic(scripted, dynamo):
    torch.manual_seed(0)
    model = _TimeBatchChannel()
    exported = torch.jit.script(model) if scripted else model
    weight, bias = torch.randn(3, 3, 4), torch.randn(4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DynamicDimensionFixedWarning)
        program = onnxport.export(exported, (torch.randn(5, 2, 3), weight, bias),
                                  dynamo=dynamo, input_names=["x", "weight", "bias"],
                                  dynamic_axes={"x": [0, 1]})
    for shape in ((5, 2, 3), (9, 4, 3)):
        x = torch.randn(*shape)
        torch.testing.assert_close(program(x, weight, bias)[0], model(x, weight, bias),
                                   rtol=1e-3, atol=1e-4)
