"""nn.TransformerEncoder and nn.MultiheadAttention exported under torch.no_grad() or
torch.inference_mode(), as users often wrap an export: with gradients off they run fused
inference kernels, which the tracer recorded as one call with no ONNX translation."""

import pytest
import torch

import onnxport


def _encoder():
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    return torch.nn.TransformerEncoder(layer, 2).eval()


@pytest.mark.parametrize("context", [torch.no_grad, torch.inference_mode],
                         ids=["no_grad", "inference_mode"])
@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_transformer_encoder_exported_with_gradients_off(context, dynamo):
    torch.manual_seed(0)
    model = _encoder()
    with context():
        program = onnxport.export(model, (torch.randn(2, 5, 8),), input_names=["x"],
                                  dynamic_axes={"x": {0: "batch", 1: "sequence"}},
                                  dynamo=dynamo)
    assert torch.backends.mha.get_fastpath_enabled()  # (the user's setting, put back)
    for shape in ((2, 5, 8), (3, 7, 8)):
        x = torch.randn(shape)
        with torch.no_grad():
            expected = model(x)
        torch.testing.assert_close(program(x)[0], expected, rtol=1e-3, atol=1e-4)
