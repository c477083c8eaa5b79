"""FoldScaleIntoGemm: ConvNeXt's layer scale goes into its block's last Linear; numbers stay
eager's (up to fp32 rounding of the scaled weights), at static and dynamic shapes."""

import torch
from torchvision.models.convnext import CNBlock

import onnxport


def _block():
    torch.manual_seed(0)
    block = CNBlock(16, layer_scale=1.0, stochastic_depth_prob=0.0).eval()
    with torch.no_grad():  # torchvision's 1e-6 would hide a wrong fold under atol
        block.layer_scale.copy_(torch.rand(16, 1, 1) + 0.5)
    return block


def _scale_muls(program):
    return [n for n in program.model.graph if n.op_type == "Mul"
            and any(v is not None and v.const_value is not None
                    and list(v.const_value.shape) == [16, 1, 1] for v in n.inputs)]


def test_convnext_layer_scale_is_folded():
    block, x = _block(), torch.randn(2, 16, 6, 6)
    program = onnxport.export(block, (x,), opset_version=18)
    assert not _scale_muls(program)
    torch.testing.assert_close(program(x)[0], block(x), rtol=1e-3, atol=1e-4)


def test_dynamic_batch_and_size():
    block, x = _block(), torch.randn(2, 16, 6, 6)
    dims = {0: torch.export.Dim("batch"), 2: torch.export.Dim("height")}
    program = onnxport.export(block, (x,), dynamic_shapes={"input": dims}, opset_version=18)
    assert not _scale_muls(program)
    for shape in [(2, 16, 6, 6), (3, 16, 9, 6)]:
        x = torch.randn(*shape)
        torch.testing.assert_close(program(x)[0], block(x), rtol=1e-3, atol=1e-4)


def test_scale_along_another_axis_stays():
    class RowScale(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 4)
            self.scale = torch.nn.Parameter(torch.rand(5, 1) + 0.5)

        def forward(self, x):
            return self.linear(x) * self.scale  # per row, not per output column

    model, x = RowScale(), torch.randn(2, 5, 4)
    program = onnxport.export(model, (x,), opset_version=18)
    assert "Mul" in [n.op_type for n in program.model.graph]
    torch.testing.assert_close(program(x)[0], model(x), rtol=1e-3, atol=1e-4)


def test_column_and_scalar_scales_of_a_linear_are_folded():
    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(4, 6), torch.nn.Linear(6, 3, bias=False)
            self.scale = torch.nn.Parameter(torch.rand(6) + 0.5)

        def forward(self, x):
            return self.b(torch.relu(self.a(x) * self.scale)) * 0.5

    model, x = Scaled(), torch.randn(2, 5, 4)
    program = onnxport.export(model, (x,), opset_version=18)
    assert "Mul" not in [n.op_type for n in program.model.graph]
    torch.testing.assert_close(program(x)[0], model(x), rtol=1e-3, atol=1e-4)


def test_scale_broadcasting_a_single_column_stays():
    class Widening(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 1)
            self.scale = torch.nn.Parameter(torch.rand(3) + 0.5)

        def forward(self, x):
            return self.linear(x) * self.scale  # [.., 1] * [3] -> [.., 3]: not a column scale

    model, x = Widening(), torch.randn(2, 5, 4)
    program = onnxport.export(model, (x,), opset_version=18)
    assert "Mul" in [n.op_type for n in program.model.graph]
    torch.testing.assert_close(program(x)[0], model(x), rtol=1e-3, atol=1e-4)


def test_the_folded_weight_is_written_a_slice_at_a_time(monkeypatch, tmp_path):
    # Computed whole while saving, each folded weight doubled ConvNeXt-tiny's extra memory
    # (20 MB against torch.onnx's 9); the file must hold the same numbers.
    import onnxruntime

    from onnxport import piecewise_tensor

    monkeypatch.setattr(piecewise_tensor, "_PIECE_BYTES", 64)  # (a few rows per piece)
    block, x = _block(), torch.randn(2, 16, 6, 6)
    program = onnxport.export(block, (x,), opset_version=18)
    assert any(isinstance(v.const_value, piecewise_tensor.PiecewiseTensor)
               for v in program.model.graph.initializers.values())
    program.save(tmp_path / "block.onnx")
    session = onnxruntime.InferenceSession(str(tmp_path / "block.onnx"))
    (output,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    torch.testing.assert_close(torch.from_numpy(output), block(x), rtol=1e-3, atol=1e-4)
