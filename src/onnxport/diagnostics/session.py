"""One export's diagnostics session: the recorder the stages report to, the Python warnings
and the failure it records, and the artifacts (report, profile, exported program) it writes."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import types
import warnings
from typing import Any

import torch

from onnxport.diagnostics import report as reports
from onnxport.diagnostics.recorder import Recorder, recording, relative_path
from onnxport.errors import OnnxExporterError, UnsupportedOpsError


@dataclasses.dataclass(frozen=True)
class DiagnosticsSettings:
    """What one export records and writes: results from ``verbosity_level`` up, warnings as
    errors or not, and the artifacts asked for (named ``name``, in ``artifacts_dir``)."""

    name: str
    report: bool = False
    profile: bool = False
    dump_exported_program: bool = False
    artifacts_dir: Any = "."
    verbosity_level: int = logging.INFO
    warnings_as_errors: bool = False


@contextlib.contextmanager
def diagnosing(settings: DiagnosticsSettings, timings: dict[str, float]):
    """Around one export: makes a new recorder the one the stages report to, records the
    Python warnings raised (and raises them again after), the failure if any, and writes the
    artifacts asked for, also when the export failed (that is when they help most). Yields
    the session: its ``recorder``, and ``program`` and ``exported_program`` for the stages
    to set as they have them."""
    recorder = Recorder(verbosity_level=settings.verbosity_level)
    session = types.SimpleNamespace(program=None, exported_program=None, recorder=recorder)
    profiler = _start_profiler() if settings.profile else None
    failure = None
    caught: list = []
    try:
        with recording(recorder), warnings.catch_warnings(record=True) as caught:
            try:
                yield session
            except BaseException as error:
                failure = error
                _record_failure(recorder, error, timings)
                if isinstance(error, Exception) and not hasattr(error, "recorder"):
                    error.recorder = recorder  # what the export recorded until it failed
                raise
            finally:
                if profiler is not None:
                    profiler.disable()
                for caught_warning in caught:
                    _record_warning(recorder, caught_warning)
    finally:
        for w in caught:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
        recorder.stage_seconds = dict(timings)
        try:
            _write_artifacts(session, failure, settings, profiler)
        except OSError:
            if failure is None:
                raise
    _fail_on_warnings(recorder, settings)


def _fail_on_warnings(recorder: Recorder, settings: DiagnosticsSettings) -> None:
    # torch's own warnings about its internals (raised from torch's files) say nothing of
    # this export: they are recorded, but do not fail it.
    failing = [r for r in recorder.warnings if not r.properties.get("from_torch")]
    if settings.warnings_as_errors and failing:
        listed = "\n".join(f"  - {r.location + ': ' if r.location else ''}{r.message}"
                           for r in failing)
        raise OnnxExporterError(
            f"{len(failing)} warning(s) during the export, and "
            f"DiagnosticOptions(warnings_as_errors=True) makes them errors:\n{listed}")


def _start_profiler():
    import cProfile

    profiler = cProfile.Profile()
    try:
        profiler.enable()
    except ValueError:  # another profiler is active (a debugger, an outer cProfile)
        return None
    return profiler


_TORCH_FOLDER = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


def _record_warning(recorder: Recorder, caught) -> None:
    category = caught.category.__name__
    # torch's TracerWarning and the capture's TracingWarning: a value fixed at its traced one.
    rule = "OPX0005" if category in ("TracerWarning", "TracingWarning") else "OPX0004"
    from_torch = {"from_torch": True} if (
        rule == "OPX0004" and os.path.abspath(caught.filename).startswith(_TORCH_FOLDER)) else {}
    recorder.record(rule, f"{category}: {caught.message}",
                    file=relative_path(caught.filename), line=caught.lineno,
                    category=category, **from_torch)


def _record_failure(recorder: Recorder, error: BaseException,
                    timings: dict[str, float]) -> None:
    if isinstance(error, UnsupportedOpsError):
        for op, places in sorted(error.missing.items()):
            recorder.record("OPX0003", f"{op} has no translation at opset {error.opset} and no "
                            "decomposition into ops that have one",
                            source=places[0] if places else None, op=op, places=places)
    stage = list(timings)[-1] if timings else "argument checks"
    first_line = (str(error).strip().splitlines() or [""])[0]
    recorder.record("OPX0007", f"the export failed during {stage}: {type(error).__name__}: "
                    f"{first_line}", stage=stage)


def _write_artifacts(session, failure, settings: DiagnosticsSettings, profiler) -> None:
    if not (settings.report or settings.profile or settings.dump_exported_program):
        return
    program, recorder = session.program, session.recorder
    folder, name = settings.artifacts_dir, settings.name
    if settings.report:
        text = reports.report_markdown(
            recorder, title=name.removeprefix("onnx_export_"),
            model=program.model if program is not None else None,
            status="success" if failure is None else "failed", error=failure,
            verification=getattr(program, "verification", None))
        reports.write_text(folder, name + ".md", text)
    if settings.profile:
        reports.write_text(folder, name + "_profile.txt",
                           reports.profile_text(profiler, recorder.stage_seconds))
    if settings.dump_exported_program and session.exported_program is not None:
        reports.write_text(folder, name + "_exported_program.txt", str(session.exported_program))
        _save_exported_program(session.exported_program, os.path.join(os.fspath(folder),
                                                                       name + ".pt2"))


def _save_exported_program(program, path: str) -> None:
    """The ExportedProgram as torch.export.save writes it (``torch.export.load`` reads it back),
    as torch.onnx's dump_exported_program does; the text beside it is for reading."""
    try:
        torch.export.save(program, path)
    except Exception as error:  # noqa: BLE001 - a graph torch cannot serialize
        with contextlib.suppress(OSError):
            os.remove(path)
        # The TorchScript path's graph may hold calls torch's serializer does not know (a
        # scripted loop); the text dump is still written.
        warnings.warn(f"dump_exported_program: torch.export.save could not write {path} "
                      f"({type(error).__name__}: {(str(error).strip().splitlines() or [''])[0]});"
                      " the text dump beside it was written", UserWarning)
