"""fallback=True, and the default path (neither dynamo nor fallback given): when torch.export
cannot capture a model, tracing does, and the program says which strategy made it and why the
earlier ones failed; the default path also warns. fallback=False and dynamo=True raise."""

import warnings

import pytest
import torch

import onnxport
from onnxport.capture.strategies import capture_with_fallback
from onnxport.errors import TracingWarning
from onnxport.errors import CaptureError, FallbackWarning


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
        onnxport.export(model, (x,), fallback=False)  # strict, as asked
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


class Loop(torch.nn.Module):
    """The README's example."""

    def forward(self, x):
        for _ in range(int(x.sum() > 0) + 1):    # data-dependent: torch.export cannot
            x = x * 2
        return x


def _fixed_loop_count_inputs():
    # Both sums positive: the traced loop count (2) holds for the second input as well.
    return torch.rand(2, 3) + 0.1, torch.rand(4, 3) + 0.1


def test_the_default_call_falls_back_to_tracing_with_a_warning():
    x, other = _fixed_loop_count_inputs()
    with pytest.warns(FallbackWarning) as caught:
        program = onnxport.export(Loop(), (x,), input_names=["x"],
                                  dynamic_axes={"x": {0: "batch"}})
    [warning] = [w for w in caught if issubclass(w.category, FallbackWarning)]
    message = str(warning.message)
    # It names torch.export's failure and the line of the model that caused it.
    assert "GuardOnDataDependentSymNode" in message
    assert f"{__file__}:" in message and "range(int(x.sum() > 0) + 1)" in message
    assert warning.filename == __file__  # shown at the export call
    assert program.capture_strategy == "tracing"
    assert [name for name, _ in program.capture_attempts][0] == "torch.export (non-strict)"
    for value in (x, other):
        _close(program(value)[0], Loop()(value))


@pytest.mark.parametrize("options", [{"fallback": False}, {"dynamo": True}])
def test_fallback_false_or_dynamo_true_keep_torch_export_failures_errors(options):
    with pytest.raises(CaptureError, match="GuardOnDataDependentSymNode"):
        onnxport.export(Loop(), (torch.rand(2, 3),), **options)


def test_fallback_true_does_not_warn():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = onnxport.export(Loop(), (torch.rand(2, 3),), fallback=True)
    assert program.capture_strategy == "tracing"
    assert not [w for w in caught if issubclass(w.category, FallbackWarning)]


def test_a_model_torch_export_captures_does_not_warn_on_the_default_path():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = onnxport.export(torch.nn.Linear(3, 2), (torch.randn(2, 3),))
    assert program.capture_strategy == "torch.export (non-strict)"
    assert not [w for w in caught if issubclass(w.category, FallbackWarning)]


@torch.jit.script
def _scripted_loop(x, count):
    for i in range(int(count)):
        x = x + i
    return x


class TracedWithScriptedLoop(torch.nn.Module):
    """A traced model with a scripted loop inside it (the 1.x page's mixing of both)."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)

    def forward(self, x, count):
        return _scripted_loop(self.linear(x), count)


def test_a_scripted_loop_inside_a_traced_model_on_the_default_path():
    # torch.export would run the scripted loop step by step (or fail on its run-time count):
    # the default path traces such a model first, saying so in capture_attempts.
    model, x = TracedWithScriptedLoop().eval(), torch.randn(2, 3)
    program = onnxport.export(model, (x, torch.tensor(3)), input_names=["x", "count"],
                              dynamic_axes={"x": {0: "batch"}})
    assert program.capture_strategy == "tracing"
    assert program.capture_attempts == [("torch.export", "not tried: the model calls scripted "
                                         "code with a loop (_scripted_loop), which tracing "
                                         "keeps a loop")]
    assert "Loop" in [node.op_type for node in program.model.graph]
    with torch.no_grad():
        for value, count in ((x, 3), (torch.randn(5, 3), 7)):  # the count stays an input
            _close(program(value, torch.tensor(count))[0], model(value, torch.tensor(count)))


class _ScriptedSubmoduleWithALoop(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = torch.jit.script(_Accumulate())

    def forward(self, x):
        return self.inner(x * 2)


class _Accumulate(torch.nn.Module):
    def forward(self, x):
        acc = torch.zeros_like(x[0])
        for i in range(x.size(0)):
            acc = acc + x[i] * i
        return acc


def test_a_scripted_submodule_with_a_loop_is_traced_first_on_the_default_path():
    model = _ScriptedSubmoduleWithALoop()
    program = onnxport.export(model, (torch.randn(4, 3),), input_names=["x"],
                              dynamic_axes={"x": [0]})
    assert program.capture_strategy == "tracing"
    assert "Loop" in [node.op_type for node in program.model.graph]
    for x in (torch.randn(4, 3), torch.randn(7, 3)):
        _close(program(x)[0], model(x))


def test_dynamo_true_alone_keeps_torch_export_for_a_scripted_loop():
    # (no tracing without fallback: torch.export's own failure on the ScriptModule stands)
    with pytest.raises(CaptureError, match="torch.export could not capture"):
        onnxport.export(_ScriptedSubmoduleWithALoop(), (torch.randn(4, 3),), dynamo=True)


class _WindowOfTheLength(torch.nn.Module):
    def forward(self, x):
        return torch.linspace(0, 1, x.size(0)) * x


class _WindowAndParity(torch.nn.Module):
    def forward(self, x):  # tracing fixes the parity to the example's; eager's changes
        return torch.linspace(0, 1, x.size(0)) * x + float(x.shape[0] % 2)


def test_a_dim_torch_export_fixes_is_traced_instead_on_the_default_path():
    # linspace takes steps as a plain int: torch.export fixed the dynamic axis to 5 (an ONNX
    # model for size 5 only, with a warning); tracing keeps it dynamic and computes eager's
    # results at other sizes, so the default path takes it.
    model = _WindowOfTheLength()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = onnxport.export(model, (torch.randn(5),), input_names=["x"],
                                  dynamic_axes={"x": {0: "n"}})
    assert program.capture_strategy == "tracing"
    assert any(issubclass(w.category, FallbackWarning) and "fixed to 5" in str(w.message)
               for w in caught)
    for n in (5, 9):
        x = torch.randn(n)
        _close(program(x)[0], model(x))


def test_a_dim_torch_export_fixes_stays_fixed_with_fallback_false_or_dynamo_true():
    for options in ({"fallback": False}, {"dynamo": True}):
        with pytest.warns(onnxport.errors.DynamicDimensionFixedWarning):
            program = onnxport.export(_WindowOfTheLength(), (torch.randn(5),),
                                      input_names=["x"], dynamic_axes={"x": {0: "n"}}, **options)
        assert program.capture_strategy.startswith("torch.export")


def test_a_trace_that_computes_other_results_at_other_sizes_is_not_taken():
    with pytest.warns(onnxport.errors.DynamicDimensionFixedWarning):
        program = onnxport.export(_WindowAndParity(), (torch.randn(5),), input_names=["x"],
                                  dynamic_axes={"x": {0: "n"}})
    assert program.capture_strategy.startswith("torch.export")


@torch.jit.script
def _first_rows_when_long(x):
    if x.size(0) > 3:
        return x[:3]
    return x * 2


class _ScriptedBranchOnASize(torch.nn.Module):
    def forward(self, x):
        return _first_rows_when_long(x) + 1


class _ScriptedBranchInAHelper(torch.nn.Module):
    def helper(self, x):
        return _first_rows_when_long(x)

    def forward(self, x):
        return self.helper(x) + 1


class _ScriptedBranchAsAnAttribute(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rows = _first_rows_when_long

    def forward(self, x):
        return self.rows(x) + 1


@pytest.mark.parametrize("model", [_ScriptedBranchInAHelper, _ScriptedBranchAsAnAttribute],
                         ids=["called by a helper method", "held as an attribute"])
def test_a_scripted_branch_on_a_size_called_other_than_by_forward(model):
    # Only the names forward reads were looked at: these were silently wrong as above.
    model = model()
    program = onnxport.export(model, (torch.randn(5, 4),), input_names=["x"],
                              dynamic_axes={"x": {0: "rows"}})
    assert program.capture_strategy == "tracing"
    for rows in (5, 2):
        x = torch.randn(rows, 4)
        _close(program(x)[0], model(x))


def test_a_scripted_branch_on_a_size_inside_a_model_with_dynamic_axes():
    # torch.export ran the scripted branch of the example's size and recorded no guard: the
    # file returned x[:3] + 1 at every size, silently wrong where the model returns x * 2 + 1.
    # Such a model is traced first, which keeps the branch an If.
    model = _ScriptedBranchOnASize()
    program = onnxport.export(model, (torch.randn(5, 4),), input_names=["x"],
                              dynamic_axes={"x": {0: "rows"}})
    assert program.capture_strategy == "tracing"
    assert "a branch on a size (_first_rows_when_long)" in program.capture_attempts[0][1]
    for rows in (5, 2, 3, 8):
        x = torch.randn(rows, 4)
        _close(program(x)[0], model(x))
    static = onnxport.export(model, (torch.randn(5, 4),))  # (static: torch.export is right)
    assert static.capture_strategy != "tracing"
