"""The one recorder of an export: stages call ``record(rule_id, message, ...)`` and the export
that is running (found through a context variable) keeps the result; outside an export a
record goes nowhere."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import logging
import os
import re
import sys
from typing import Any, Iterator


@dataclasses.dataclass(frozen=True)
class Rule:
    id: str
    name: str
    description: str
    level: str  # the default SARIF level: "error", "warning" or "note"


RULES = {rule.id: rule for rule in (
    Rule("OPX0001", "decomposition-used",
         "An ATen op without a translation was decomposed into ops that have one.", "note"),
    Rule("OPX0002", "capture-strategy-failed",
         "A capture strategy failed and the next one of the chain was tried.", "warning"),
    Rule("OPX0003", "unsupported-op",
         "An ATen op has neither a translation nor a decomposition.", "error"),
    Rule("OPX0004", "python-warning",
         "A Python warning was raised while exporting.", "warning"),
    Rule("OPX0005", "value-fixed-by-tracing",
         "A value computed in Python was fixed at its traced value (a constant in the graph).",
         "warning"),
    Rule("OPX0006", "verification-mismatch",
         "ONNX Runtime's output differs from PyTorch's.", "error"),
    Rule("OPX0007", "export-failed",
         "The export failed at a stage.", "error"),
    Rule("OPX0008", "module-left-inline",
         "A module chosen by export_modules_as_functions could not become a function; its "
         "nodes stay in the graph.", "note"),
)}

_LOGGING_LEVELS = {"note": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}

_LOCATION = re.compile(r"^(?P<file>.+?):(?P<line>\d+)(?: in (?P<function>.+))?$")


@dataclasses.dataclass
class Result:
    rule_id: str
    level: str
    message: str
    file: str | None = None  # relative to an import root: never an absolute path
    line: int | None = None
    function: str | None = None
    properties: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def location(self) -> str:
        if self.file is None:
            return ""
        return f"{self.file}:{self.line}" if self.line else self.file


class Recorder:
    """What one export reported, in order, plus its stage timings."""

    def __init__(self, verbosity_level: int = logging.INFO) -> None:
        self.verbosity_level = verbosity_level  # results of a lower level are not kept
        self.results: list[Result] = []
        self.stage_seconds: dict[str, float] = {}

    def record(self, rule_id: str, message: str, *, level: str | None = None,
               source: str | None = None, file: str | None = None, line: int | None = None,
               **properties: Any) -> Result:
        """``source`` is a "file:line in function" as stamped on nodes (``onnxport.source``)."""
        rule = RULES[rule_id]
        level = level or rule.level
        function = None
        if source:
            match = _LOCATION.match(source)
            if match:
                file, line, function = (match["file"], int(match["line"]), match["function"])
            else:
                file = source
        result = Result(rule_id, level, message, file, line, function, dict(properties))
        if _LOGGING_LEVELS[level] >= self.verbosity_level:
            self.results.append(result)
        return result

    def of_rule(self, rule_id: str) -> list[Result]:
        return [r for r in self.results if r.rule_id == rule_id]

    @property
    def warnings(self) -> list[Result]:
        return [r for r in self.results if r.level == "warning"]

    def __repr__(self) -> str:
        return f"Recorder({len(self.results)} results)"


_current: contextvars.ContextVar[Recorder | None] = contextvars.ContextVar(
    "onnxport_diagnostics", default=None)


def current() -> Recorder | None:
    """The recorder of the export running in this context, if any."""
    return _current.get()


def record(rule_id: str, message: str, **details: Any) -> Result | None:
    recorder = _current.get()
    if recorder is None:
        return None
    return recorder.record(rule_id, message, **details)


@contextlib.contextmanager
def recording(recorder: Recorder) -> Iterator[Recorder]:
    token = _current.set(recorder)
    try:
        yield recorder
    finally:
        _current.reset(token)


def relative_path(file: str) -> str:
    """``file`` relative to the deepest import root or working directory holding it, else its
    name alone: never an absolute path (it would tell where the user's files live and make two
    exports from two folders differ)."""
    if not os.path.isabs(file):
        return file.replace(os.sep, "/")
    try:
        cwd = os.getcwd()
    except OSError:  # the working directory was deleted
        cwd = None
    # Every node of a graph asks for its file; the roots are resolved once per (file, sys.path,
    # working directory), so a changed sys.path or directory still gives the right answer.
    return _relative_path(file, tuple(p for p in sys.path if isinstance(p, str)), cwd)


@functools.lru_cache(maxsize=4096)
def _relative_path(file: str, path: tuple[str, ...], cwd: str | None) -> str:
    if cwd is not None:
        roots = [os.path.join(cwd, p) if p and not os.path.isabs(p) else (p or cwd)
                 for p in path]
        roots = [os.path.normpath(r) for r in roots] + [cwd]
    else:
        roots = [p for p in path if os.path.isabs(p)]
    inside = [r for r in roots if file.startswith(r.rstrip(os.sep) + os.sep)]
    file = os.path.relpath(file, max(inside, key=len)) if inside else os.path.basename(file)
    return file.replace(os.sep, "/")
