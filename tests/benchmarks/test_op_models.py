"""benchmarks/op_models.py (issue 8's models and patterns) on three of its cheapest cases, so
that the script's case list and comparison cannot rot between full runs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "op_models.py"


@pytest.fixture(scope="module")
def op_models():
    spec = importlib.util.spec_from_file_location("op_models", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["op_models"] = module  # dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules["op_models"]


@pytest.mark.parametrize("name, op_type", [("LSTMCell", "LSTM"), ("cumprod", None),
                                           ("quantize_dynamic Linear", "MatMulInteger")])
def test_cheap_cases_pass(op_models, name, op_type):
    row = op_models.run_case(name)
    assert row["status"] == "pass", row.get("traceback") or row["error"]
    assert row["export_seconds"] > 0 and row["max_abs_diff"] is not None
    if op_type:
        assert row["ops"].get(op_type, 0) >= 1, row["ops"]
    assert name in op_models.format_table([row])


def test_a_failing_case_is_reported_not_raised(op_models, monkeypatch):
    def broken():
        raise ValueError("no such model")

    monkeypatch.setitem(op_models.CASES, "broken", broken)
    row = op_models.run_case("broken")
    assert row["status"] == "FAIL" and "no such model" in row["error"]
    assert "0 / 1 cases pass" in op_models.format_table([row])
