"""Number arguments (int, float, bool) are graph inputs in their places, as torch.onnx's
TorchScript exporter makes them, so that code feeding every argument by position (torch's own
exporter tests do) runs the file; keyword numbers and ``dynamo=True`` keep the dynamo
exporters' rule (no input)."""

from __future__ import annotations

import io
import warnings

import numpy as np
import onnxruntime as ort
import pytest
import torch

import onnxport


class _Arithmetic(torch.nn.Module):
    def forward(self, x, y: int, z: bool, t: float):
        x = x + y
        x = x - y
        if z:
            x = x * (y * 3)
            x = x / (y * 4)
        return x / t, z


def _run_positionally(data: bytes, inputs) -> list[np.ndarray]:
    """As torch's exporter tests feed a file: every argument by position, numbers as numpy."""
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    values = [v.numpy() if isinstance(v, torch.Tensor) else np.array(v) for v in inputs]
    return session.run(None, {i.name: v for i, v in zip(session.get_inputs(), values)})


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
@pytest.mark.parametrize("scripted", [False, True], ids=["traced", "scripted"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_numbers_are_inputs_fed_by_position(dynamo, scripted, dtype):
    model = torch.jit.script(_Arithmetic()) if scripted else _Arithmetic()
    x = torch.ones(2, 3, 4, dtype=dtype) * 5
    inputs = (x, 2, True, 1.5)
    f = io.BytesIO()
    with pytest.warns(UserWarning, match=r"y=2, z=True, t=1.5 are graph inputs"):
        onnxport.export(model, inputs, f, dynamo=dynamo)
    session = ort.InferenceSession(f.getvalue(), providers=["CPUExecutionProvider"])
    assert [(i.name, i.type, i.shape) for i in session.get_inputs()] == [
        ("x", f"tensor({'float' if dtype == torch.float32 else 'int64'})", [2, 3, 4]),
        ("y", "tensor(int64)", []), ("z", "tensor(bool)", []), ("t", "tensor(double)", [])]
    expected = model(*inputs)
    got = _run_positionally(f.getvalue(), inputs)
    torch.testing.assert_close(torch.from_numpy(got[0]), expected[0], rtol=1e-3, atol=1e-4)
    assert got[1].dtype == np.bool_ and bool(got[1]) is True


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_number_first_is_the_first_input_and_input_names_name_it(dynamo):
    class NumberFirst(torch.nn.Module):
        def forward(self, n: int, x):
            return x * n

    x = torch.randn(2, 3)
    f = io.BytesIO()
    with pytest.warns(UserWarning, match="count=3 is a graph input"):
        program = onnxport.export(NumberFirst(), (3, x), f, dynamo=dynamo,
                                  input_names=["count", "x"], dynamic_axes={"x": {0: "b"}})
    other = torch.randn(5, 3)
    got = _run_positionally(f.getvalue(), (3, other))
    torch.testing.assert_close(torch.from_numpy(got[0]), other * 3, rtol=1e-3, atol=1e-4)
    # The program runs with the numbers given, or with the tensors alone
    torch.testing.assert_close(program(3, other)[0], other * 3, rtol=1e-3, atol=1e-4)
    torch.testing.assert_close(program(other)[0], other * 3, rtol=1e-3, atol=1e-4)
    assert program.input_names == ["count", "x"]


def test_a_number_input_takes_a_free_name():
    # A number named like a value of the graph takes another name: names stay unique.
    class Clash(torch.nn.Module):
        def forward(self, x, mul: int):
            return x * mul

    with pytest.warns(UserWarning, match="mul_1=2 is a graph input"):
        program = onnxport.export(Clash(), (torch.randn(2), 2), dynamo=False,
                                  output_names=["mul"])
    assert [v.name for v in program.model.graph.inputs] == ["x", "mul_1"]


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_keyword_numbers_and_dynamo_true_make_no_input(dynamo):
    class Scaled(torch.nn.Module):
        def forward(self, x, scale: float = 1.0):
            return x * scale

    x = torch.randn(2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        by_keyword = onnxport.export(Scaled(), (x,), kwargs={"scale": 2.0}, dynamo=dynamo)
    assert [v.name for v in by_keyword.model.graph.inputs] == ["x"]
    torch.testing.assert_close(by_keyword(x)[0], x * 2, rtol=1e-3, atol=1e-4)
    if dynamo is None:
        exported = onnxport.export(Scaled(), (x, 2.0), dynamo=True)
        assert [v.name for v in exported.model.graph.inputs] == ["x"]
        torch.testing.assert_close(exported(x)[0], x * 2, rtol=1e-3, atol=1e-4)
