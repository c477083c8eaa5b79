"""Exports from several threads: torch.export is not thread-safe, so export() runs one at a
time; each file is its own model's, and is_in_onnx_export() is true only in the exporting
thread."""

from __future__ import annotations

import threading

import numpy as np
import onnxruntime as ort
import torch

import onnxport


class Scaled(torch.nn.Module):
    def __init__(self, k: int):
        super().__init__()
        self.k = k
        self.fc = torch.nn.Linear(3, 2 + k)

    def forward(self, x):
        return torch.tanh(self.fc(x)) * self.k + x.sum(dim=-1, keepdim=True)


def test_exports_from_four_threads(tmp_path):
    torch.manual_seed(0)
    models = {(t, i): Scaled(2 * t + i + 1).eval() for t in range(4) for i in range(2)}
    x = torch.randn(2, 3)
    errors = []
    start = threading.Barrier(4)

    def work(t):
        try:
            start.wait()
            for i in range(2):
                onnxport.export(models[t, i], (x,), tmp_path / f"{t}_{i}.onnx")
        except Exception as error:  # reported below, with which thread failed
            errors.append((t, error))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    for (t, i), model in models.items():
        session = ort.InferenceSession(str(tmp_path / f"{t}_{i}.onnx"),
                                       providers=["CPUExecutionProvider"])
        with torch.no_grad():
            np.testing.assert_allclose(session.run(None, {"x": x.numpy()})[0], model(x).numpy(),
                                       rtol=1e-3, atol=1e-4)


def test_is_in_onnx_export_is_per_thread():
    inside = threading.Event()
    checked = threading.Event()
    seen = {}

    class Probe(torch.nn.Module):
        def forward(self, x):
            seen["exporting thread"] = onnxport.is_in_onnx_export()
            inside.set()
            checked.wait(timeout=30)
            return x + 1

    def look():
        inside.wait(timeout=30)
        seen["other thread"] = onnxport.is_in_onnx_export()
        checked.set()

    other = threading.Thread(target=look)
    other.start()
    x = torch.randn(2)
    program = onnxport.export(Probe(), (x,))
    other.join()
    assert seen == {"exporting thread": True, "other thread": False}
    assert not onnxport.is_in_onnx_export()
    torch.testing.assert_close(program(x)[0], x + 1)
