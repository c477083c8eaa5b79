"""Two exports of the same model are the same bytes wherever its file lives and whatever the
working directory, and hold no absolute path (where the user's files are is private)."""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
import torch

import onnxport

MODEL_SOURCE = '''
import torch


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.fc(x)) * 2
'''


def export_from(folder, monkeypatch) -> bytes:
    path = os.path.join(folder, "user_model.py")
    with open(path, "w") as file:
        file.write(MODEL_SOURCE)
    monkeypatch.chdir(folder)
    spec = importlib.util.spec_from_file_location("user_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    model = module.Block().eval()
    x = torch.randn(2, 4)
    program = onnxport.export(model, (x,), os.path.join(folder, "m.onnx"))
    session = ort.InferenceSession(os.path.join(folder, "m.onnx"),
                                   providers=["CPUExecutionProvider"])
    with torch.no_grad():
        np.testing.assert_allclose(session.run(None, {"x": x.numpy()})[0], model(x).numpy(),
                                   rtol=1e-3, atol=1e-4)
    assert program.model.graph.node(0).metadata_props["onnxport.source"].startswith(
        "user_model.py:")
    with open(os.path.join(folder, "m.onnx"), "rb") as file:
        return file.read()


def assert_no_absolute_path(data: bytes, *folders: str) -> None:
    for folder in folders:
        assert os.fsencode(folder) not in data, folder


def test_same_bytes_from_two_folders(tmp_path, monkeypatch):
    first, second = tmp_path / "one", tmp_path / "two" / "deeper"
    first.mkdir()
    second.mkdir(parents=True)
    a = export_from(str(first), monkeypatch)
    b = export_from(str(second), monkeypatch)
    assert a == b
    assert_no_absolute_path(a, str(first), str(second), os.getcwd(), sys.prefix,
                            tempfile.gettempdir(), os.path.expanduser("~"))


def test_library_model_source_is_relative_to_its_package(monkeypatch, tmp_path):
    from torchvision.ops import SqueezeExcitation

    monkeypatch.chdir(tmp_path)
    model = SqueezeExcitation(4, 2).eval()
    x = torch.randn(1, 4, 5, 5)
    program = onnxport.export(model, (x,))
    sources = {n.metadata_props.get("onnxport.source", "") for n in program.model.graph}
    assert any(s.startswith("torchvision/ops/misc.py:") for s in sources), sources
    data = program.model_proto.SerializeToString()
    assert_no_absolute_path(data, sys.prefix, os.path.dirname(torch.__file__), str(tmp_path))
    onnx.checker.check_model(program.model_proto)
    with torch.no_grad():
        torch.testing.assert_close(program(x)[0], model(x), rtol=1e-3, atol=1e-4)
