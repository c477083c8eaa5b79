"""The diagnostics session of one export (diagnostics/session.py): it owns the recorder the
stages report to, records warnings and the failure, and writes the artifacts asked for."""

from __future__ import annotations

import warnings

import pytest

from onnxport import diagnostics
from onnxport.diagnostics.session import DiagnosticsSettings, diagnosing
from onnxport.errors import OnnxExporterError


def test_session_records_warnings_and_raises_them_again():
    timings = {"capture": 0.1}
    with pytest.warns(UserWarning, match="from a stage"):
        with diagnosing(DiagnosticsSettings(name="onnx_export_Net"), timings) as session:
            assert diagnostics.current() is session.recorder
            warnings.warn("from a stage", UserWarning)
    assert [r.rule_id for r in session.recorder.results] == ["OPX0004"]
    assert session.recorder.stage_seconds == timings
    assert diagnostics.current() is not session.recorder


def test_session_records_the_failure_with_its_stage_and_writes_the_report(tmp_path):
    settings = DiagnosticsSettings(name="onnx_export_Net", report=True, artifacts_dir=tmp_path)
    with pytest.raises(ValueError) as raised:
        with diagnosing(settings, {"capture": 0.1, "translate": 0.2}):
            raise ValueError("broken\nsecond line")
    recorder = raised.value.recorder
    (failure,) = [r for r in recorder.results if r.rule_id == "OPX0007"]
    assert failure.message == "the export failed during translate: ValueError: broken"
    assert "failed" in (tmp_path / "onnx_export_Net.md").read_text()


def test_warnings_as_errors_fails_after_the_export():
    settings = DiagnosticsSettings(name="onnx_export_Net", warnings_as_errors=True)
    with pytest.raises(OnnxExporterError, match="1 warning"), pytest.warns(UserWarning):
        with diagnosing(settings, {}):
            warnings.warn("from a stage", UserWarning)
