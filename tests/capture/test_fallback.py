"""fallback=True: when torch.export cannot capture a model, tracing does, and the program says
which strategy made it and why the earlier ones failed."""

import warnings

import pytest
import torch

import onnxport
from onnxport.capture.torchscript import TracingWarning, capture_with_fallback
from onnxport.errors import CaptureError


def _close(actual, expected):
    torch.testing.assert_close(actual, expected, rtol=1e-3, atol=1e-4)


class DataDependentLoop(torch.nn.Module):
    def forward(self, x):
        for i in range(int(x.sum())):
            x = x + i
        return x


class DataDependentBranch(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return torch.relu(x) * 2
        return x - 1


def test_data_dependent_loop_is_traced_after_torch_export_fails():
    model, x = DataDependentLoop(), torch.full((2, 3), 0.5)  # sum 3: three iterations
    with pytest.raises(CaptureError):
        onnxport.export(model, (x,))  # the regression: without fallback this cannot export
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = onnxport.export(model, (x,), fallback=True)
    fixed = [w for w in caught if issubclass(w.category, TracingWarning)]
    assert fixed and all(w.filename == __file__ for w in fixed)
    assert program.capture_strategy == "tracing"
    [(strategy, reason)] = program.capture_attempts[:1]
    assert strategy == "torch.export (non-strict)" and reason
    _close(program(x)[0], model(x))


def test_data_dependent_branch_via_fallback():
    model, x = DataDependentBranch(), torch.randn(2, 3).abs()
    with pytest.warns(TracingWarning, match="boolean"):
        program = onnxport.export(model, (x,), fallback=True, input_names=["x"],
                                  dynamic_axes={"x": {0: "batch"}})
    assert program.capture_strategy == "tracing"
    for batch in (2, 5):
        x = torch.randn(batch, 3).abs()
        _close(program(x)[0], model(x))


def test_a_model_torch_export_captures_does_not_fall_back():
    model, x = torch.nn.Linear(3, 2), torch.randn(2, 3)
    program = onnxport.export(model, (x,), fallback=True)
    assert program.capture_strategy == "torch.export (non-strict)"
    assert program.capture_attempts == []
    with torch.no_grad():
        _close(program(x)[0], model(x))


def test_when_every_strategy_fails_the_error_lists_each_with_its_reason():
    class Untraceable(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                raise RuntimeError("positive inputs are not allowed")
            return x

    with pytest.raises(CaptureError) as raised:
        onnxport.export(Untraceable(), (torch.ones(2),), fallback=True)
    message = str(raised.value)
    assert "every capture strategy failed" in message
    assert "- torch.export (non-strict): " in message and "- tracing: " in message
    assert "positive inputs are not allowed" in message


def test_strategies_named_by_the_torch_export_chain_are_kept_in_order():
    error = CaptureError("all torch.export strategies failed")
    error.attempts = [("torch.export strict", "reason a"), ("torch.export non-strict", "reason b")]

    def chain():
        raise error

    captured, strategy, attempts = capture_with_fallback(chain, lambda: "traced", fallback=True)
    assert (captured, strategy) == ("traced", "tracing")
    assert [name for name, _ in attempts] == ["torch.export strict", "torch.export non-strict"]
