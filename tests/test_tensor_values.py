"""Device independence without a GPU: every read of a torch tensor's values during an export,
a save and a verification goes through onnxport.tensor_values, which brings it to the CPU (a
pass that read a weight itself failed on CUDA: "Expected all tensors to be on the same device"
in FuseConvBatchNorm, "can't convert cuda:0 device type tensor to numpy" in FoldScaleIntoGemm)."""

from __future__ import annotations

import os
import sys

import pytest
import torch

import model_zoo
import onnxport

_PACKAGE = os.path.dirname(onnxport.__file__)
_HELPER = os.path.join(_PACKAGE, "tensor_values.py")
_READS = ("numpy", "cpu", "item", "tolist", "__array__")


@pytest.fixture
def reads_outside_the_helper(monkeypatch):
    """The places in onnxport, outside tensor_values, that read a torch tensor's values."""
    found = []

    def watched(name):
        real = getattr(torch.Tensor, name)

        def read(self, *args, **kwargs):
            caller = sys._getframe(1).f_code.co_filename
            if caller.startswith(_PACKAGE) and caller != _HELPER:
                found.append(f"{name}() at {os.path.relpath(caller, _PACKAGE)}:"
                             f"{sys._getframe(1).f_lineno}")
            return real(self, *args, **kwargs)
        return read

    for name in _READS:
        monkeypatch.setattr(torch.Tensor, name, watched(name))
    return found


class ConvBatchNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(8)

    def forward(self, x):
        return torch.relu(self.norm(self.conv(x)))


class LayerScale(torch.nn.Module):
    """ConvNeXt's block end: a Linear, then a per-channel scale (folded into the Linear)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 16)
        self.gamma = torch.nn.Parameter(torch.rand(16) + 0.5)

    def forward(self, x):
        return self.gamma * self.fc(x)


def _cases():
    torch.manual_seed(0)
    bert, args, kwargs = model_zoo.transformers_model("bert")
    return {"conv+batchnorm": (model_zoo.randomize_(ConvBatchNorm().eval()),
                               (torch.randn(2, 3, 8, 8),), {}),
            "layer scale": (LayerScale().eval(), (torch.randn(2, 5, 8),), {}),
            "bert": (bert, args, kwargs)}


@pytest.mark.parametrize("name", ["conv+batchnorm", "layer scale", "bert"])
def test_export_save_and_verify_read_values_only_through_the_helper(
        name, tmp_path, reads_outside_the_helper):
    model, args, kwargs = _cases()[name]
    program = onnxport.export(model, args, kwargs=kwargs, verify=True)
    program.save(tmp_path / "m.onnx", external_data=True)
    assert reads_outside_the_helper == []
    if name == "conv+batchnorm":
        assert "BatchNormalization" not in [n.op_type for n in program.model.graph]
    if name == "layer scale":
        assert [n.op_type for n in program.model.graph].count("Mul") == 0
    outputs = onnxport.ONNXProgram.load(tmp_path / "m.onnx")(*args, **kwargs)
    with torch.no_grad():
        expected = [t for t in torch.utils._pytree.tree_leaves(model(*args, **kwargs))
                    if isinstance(t, torch.Tensor)]
    for got, want in zip(outputs, expected):
        torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-4)


def test_weights_given_at_save_are_read_through_the_helper(tmp_path, reads_outside_the_helper):
    torch.manual_seed(0)
    model, x = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval(), \
        torch.randn(1, 3, 6, 6)
    program = onnxport.export(model, (x,))
    trained = {k: v + 1 for k, v in model.state_dict().items()}
    program.save(tmp_path / "m.onnx", model_state=trained, external_data=True)
    assert reads_outside_the_helper == []
    model.load_state_dict(trained)
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(onnxport.ONNXProgram.load(tmp_path / "m.onnx")(x)[0], expected,
                               rtol=1e-3, atol=1e-4)
