"""The recorder of an export: what the stages report reaches program.diagnostics, its SARIF
log validates against the SARIF 2.1.0 schema, and DiagnosticOptions filters it or makes
warnings errors."""

import json
import logging
import os
import warnings

import jsonschema
import pytest
import torch

import onnxport
from onnxport import diagnostics

SCHEMA = os.path.join(os.path.dirname(__file__), "sarif-2.1.0-subset.schema.json")


def _close(actual, expected):
    torch.testing.assert_close(actual, expected, rtol=1e-3, atol=1e-4)


def _line_of(text):
    return next(i for i, line in enumerate(open(__file__).read().splitlines(), 1) if text in line)


class Warns(torch.nn.Module):
    def forward(self, x, y):
        warnings.warn("a warning from the model", UserWarning)  # the model's warning
        return torch.addcmul(x, x, y, value=0.5)  # no translation: decomposed


def _validate(log):
    with open(SCHEMA) as stream:
        schema = json.load(stream)
    jsonschema.Draft7Validator.check_schema(schema)
    jsonschema.validate(log, schema)


def test_export_records_decompositions_and_warnings_and_writes_sarif(tmp_path):
    args = (torch.randn(2, 3), torch.randn(2, 3))
    with pytest.warns(UserWarning, match="a warning from the model"):  # raised again after
        program = onnxport.export(Warns(), args)
    _close(program(*args)[0], Warns()(*args))
    recorder = program.diagnostics
    [decomposed] = recorder.of_rule("OPX0001")
    assert decomposed.properties["op"] == "aten::addcmul" and decomposed.level == "note"
    assert decomposed.file.endswith("test_diagnostics.py")
    assert decomposed.line == _line_of("# no translation: decomposed")
    [warned] = recorder.of_rule("OPX0004")
    assert warned.level == "warning" and "a warning from the model" in warned.message
    assert warned.line == _line_of("# the model's warning") and not os.path.isabs(warned.file)
    assert set(recorder.stage_seconds) >= {"capture", "translate"}

    path = tmp_path / "export.sarif"
    program.save_diagnostics(path)
    log = json.loads(path.read_text())
    _validate(log)
    [run] = log["runs"]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == ["OPX0001", "OPX0004"]
    decomposition = run["results"][0]
    assert decomposition["ruleId"] == "OPX0001"
    physical = decomposition["locations"][0]["physicalLocation"]
    assert physical["artifactLocation"]["uri"] == decomposed.file
    assert physical["region"]["startLine"] == decomposed.line
    # The schema is no formality: a log missing a result's message is refused.
    del log["runs"][0]["results"][0]["message"]
    with pytest.raises(jsonschema.ValidationError, match="message"):
        _validate(log)


def test_capture_fallback_and_traced_values_are_recorded(tmp_path):
    class Branch(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:  # data-dependent: torch.export fails, tracing fixes the branch
                return torch.relu(x) * 2
            return x - 1

    x = torch.randn(2, 3).abs()
    with pytest.warns(Warning, match="boolean"):
        program = onnxport.export(Branch(), (x,), fallback=True)
    _close(program(x)[0], Branch()(x))
    rules = [r.rule_id for r in program.diagnostics.results]
    assert "OPX0002" in rules and "OPX0005" in rules, rules
    fallbacks = program.diagnostics.of_rule("OPX0002")
    # One per strategy of the chain that failed, in order, each naming the one used.
    assert [f.properties["strategy"] for f in fallbacks] == [
        name for name, _ in program.capture_attempts]
    assert fallbacks[0].properties["strategy"].startswith("torch.export")
    assert all(f"{program.capture_strategy} was used" in f.message for f in fallbacks)
    program.save_diagnostics(tmp_path / "fallback.sarif")
    _validate(json.loads((tmp_path / "fallback.sarif").read_text()))


def test_warnings_as_errors_and_verbosity_level():
    args = (torch.randn(2, 3), torch.randn(2, 3))
    strict = onnxport.ExportOptions(
        diagnostic_options=onnxport.DiagnosticOptions(warnings_as_errors=True))
    # Warnings the user's filters ignore are not recorded: those pass through pytest.warns.
    with pytest.warns(UserWarning), pytest.raises(
            onnxport.OnnxExporterError,
            match=r"(?s)warnings_as_errors=True.*test_diagnostics.py:\d+: "
                  r"UserWarning: a warning from the model"):
        onnxport.dynamo_export(Warns(), *args, export_options=strict)
    quiet = onnxport.ExportOptions(
        diagnostic_options=onnxport.DiagnosticOptions(verbosity_level=logging.WARNING))
    with pytest.warns(UserWarning):
        program = onnxport.dynamo_export(Warns(), *args, export_options=quiet)
    _close(program(*args)[0], Warns()(*args))
    # Notes (decompositions) are below WARNING: left out; the warning stays.
    assert [r.rule_id for r in program.diagnostics.results] == ["OPX0004"]
    # Without warnings, warnings_as_errors changes nothing.
    model, x = torch.nn.Linear(3, 2), torch.randn(2, 3)
    program = onnxport.dynamo_export(model, x, export_options=strict)
    _close(program(x)[0], model(x))


class WarnsFromTorch(torch.nn.Module):
    def forward(self, x):
        # What torch's internals raise from their own files (deprecations of their internals,
        # tracing notes): nothing the user wrote or can change.
        warnings.warn_explicit("an internal note of torch", UserWarning,
                               torch.nn.modules.module.__file__, 1)
        return torch.relu(x)


def test_warnings_as_errors_ignores_torchs_own_warnings():
    x = torch.randn(2, 3)
    strict = onnxport.ExportOptions(
        diagnostic_options=onnxport.DiagnosticOptions(warnings_as_errors=True))
    with pytest.warns(UserWarning, match="internal note"):
        program = onnxport.dynamo_export(WarnsFromTorch(), x, export_options=strict)
    _close(program(x)[0], torch.relu(x))
    (recorded,) = program.diagnostics.of_rule("OPX0004")  # recorded all the same
    assert recorded.properties["from_torch"] is True


def test_the_recorder_outside_an_export():
    assert diagnostics.current() is None
    assert diagnostics.record("OPX0001", "nowhere") is None
    recorder = diagnostics.Recorder()
    with diagnostics.recording(recorder):
        diagnostics.record("OPX0003", "x", source="models/net.py:12 in forward")
        diagnostics.record("OPX0004", "y", source="somewhere")
    assert diagnostics.current() is None
    first, second = recorder.results
    assert (first.file, first.line, first.function, first.level) == (
        "models/net.py", 12, "forward", "error")
    assert (second.file, second.line) == ("somewhere", None)
    assert diagnostics.relative_path(os.path.abspath(__file__)).endswith("test_diagnostics.py")
    assert not os.path.isabs(diagnostics.relative_path("/no/such/root/x.py"))


def test_a_failed_export_keeps_its_diagnostics(tmp_path, untranslated):
    class Unsupported(torch.nn.Module):
        def forward(self, x):
            return torch.geqrf(x)[0]  # no translation (taken out), no decomposition

    with pytest.raises(onnxport.OnnxExporterError) as raised:
        onnxport.dynamo_export(Unsupported(), torch.randn(2, 4))
    failure = raised.value.diagnostics
    assert failure.stage == "translate"
    [unsupported] = failure.recorder.of_rule("OPX0003")
    assert unsupported.properties["op"] == "aten::geqrf"
    assert unsupported.line == _line_of("# no translation (taken out), no decomposition")
    failure.save_diagnostics(tmp_path / "failed.sarif")
    log = json.loads((tmp_path / "failed.sarif").read_text())
    _validate(log)
    assert [r["ruleId"] for r in log["runs"][0]["results"]] == ["OPX0003", "OPX0007"]
