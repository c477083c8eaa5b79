"""The fake convolution's choice of CPU backend read the batch size (NNPACK from 16): on the
TorchScript path a dynamic batch was bounded to 15, and the bound's checks then ran the model
at batches of 16 and 31 (resnet18: most of an export). The choice records no guard now."""

import pytest
import torch

import onnxport


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.norm = torch.nn.BatchNorm2d(4)

    def forward(self, x):
        return torch.relu(self.norm(self.conv(x)))


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "dynamo=False"])
def test_a_dynamic_batch_of_a_convolution_is_unbounded(dynamo):
    torch.manual_seed(0)
    model, original = ConvNet().eval(), torch._C._select_conv_backend
    program = onnxport.export(model, (torch.randn(2, 3, 8, 8),), input_names=["x"],
                              dynamic_axes={"x": {0: "batch"}}, dynamo=dynamo)
    ranges = program.exported_program.range_constraints
    assert ranges and all(str(r.upper) == "int_oo" for r in ranges.values()), ranges
    for batch in (2, 17):
        x = torch.randn(batch, 3, 8, 8)
        with torch.no_grad():
            expected = model(x)
        torch.testing.assert_close(program(x)[0], expected, rtol=1e-3, atol=1e-4)
    assert torch._C._select_conv_backend is original  # (put back after the export)
