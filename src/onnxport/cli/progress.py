"""What the command shows while it works and after: a live display on a terminal, plain
timestamped lines on a pipe (each flushed as its stage ends), nothing with ``--quiet``; then
the summary, as a table or (``--json``) as one JSON object on stdout.

Stages follow one another without gaps, each starting when the previous one ends, so that
their times add up to the command's wall time (imports and model building included)."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

STAGE_TEXT = {
    "import": "importing torch and onnxport",  # and parsing the command line before
    "build": "building the model and its example inputs",
    "arguments": "checking the export's arguments",
    "capture": "capturing the model with torch.export",
    "translate": "translating ATen calls to ONNX",
    "passes": "running the ONNX passes",  # optimizations, casts, module functions
    "check": "checking the ONNX model",
    "verify": "comparing ONNX Runtime's outputs with PyTorch's",
    "save": "writing {output}",
}


class Stages:
    """Times contiguous stages from ``started`` (a ``time.perf_counter()``) and shows them."""

    def __init__(self, started: float, *, output: str, quiet: bool, stream=None):
        self.started = started
        self.output = output
        self.seconds: dict[str, float] = {}
        self.current: str | None = None
        self._since = started
        stream = stream or sys.stderr
        if quiet:
            self.display: _Display = _Display()
        elif stream.isatty():
            self.display = _LiveDisplay(stream)
        else:
            self.display = _PlainDisplay(stream)

    def begin(self, name: str) -> None:
        """End the current stage (if any) and start ``name``."""
        now = time.perf_counter()
        if self.current is not None:
            self._close(now)
        elif not self.seconds:
            now = self.started  # the first stage counts from the start: parsing is in it
        self.current, self._since = name, now
        self.display.begin(name, STAGE_TEXT.get(name, name).format(output=self.output))

    def end(self) -> None:
        if self.current is not None:
            self._close(time.perf_counter())
            self.current = None

    def stop(self) -> None:
        """End the display (after a failure too); the current stage stays unfinished."""
        self.display.stop()

    def total(self) -> float:
        return sum(self.seconds.values())

    def _close(self, now: float) -> None:
        seconds = now - self._since
        # A stage that runs twice (none does today) adds up.
        self.seconds[self.current] = self.seconds.get(self.current, 0.0) + seconds
        self.display.end(self.current, seconds, now - self.started)


class _Display:
    def begin(self, name: str, text: str) -> None:
        pass

    def end(self, name: str, seconds: float, elapsed: float) -> None:
        pass

    def stop(self) -> None:
        pass


class _PlainDisplay(_Display):
    """One line per finished stage, with the time of day and the time since the start."""

    def __init__(self, stream):
        self.stream = stream

    def end(self, name: str, seconds: float, elapsed: float) -> None:
        stamp = time.strftime("%H:%M:%S")
        self.stream.write(f"{stamp} onnxport: {name:<9} {seconds:7.2f} s  "
                          f"(total {elapsed:.2f} s)\n")
        self.stream.flush()


class _LiveDisplay(_Display):
    """rich's live display: one row per stage, the running one with a spinner and its clock."""

    def __init__(self, stream):
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.progress = Progress(SpinnerColumn(finished_text="[green]✓"),
                                 TextColumn("[bold]{task.fields[stage]:<9}[/bold] "
                                            "{task.description}"),
                                 TimeElapsedColumn(),
                                 console=Console(file=stream), transient=False)
        self.progress.start()
        self.task = None

    def begin(self, name: str, text: str) -> None:
        self.task = self.progress.add_task(text, total=1, stage=name)

    def end(self, name: str, seconds: float, elapsed: float) -> None:
        if self.task is not None:
            self.progress.update(self.task, completed=1)
            self.progress.stop_task(self.task)
            self.task = None

    def stop(self) -> None:
        if self.task is not None:
            self.progress.stop_task(self.task)
            self.task = None
        if self.progress.live.is_started:
            self.progress.stop()


# -- the summary ---------------------------------------------------------------------------
def summary(program, output: str, files: list[str], size: int, stages: Stages, *,
            verified: bool, extra: dict[str, Any]) -> dict[str, Any]:
    """What the command reports: the same fields in the table and in ``--json``."""
    graph = program.model.graph
    result: dict[str, Any] = {
        "output": output,
        "files": files,
        "bytes": size,
        "nodes": len(graph),
        "opset": program.model.opset_imports.get("", None),
        "inputs": [_value(v) for v in graph.inputs],
        "outputs": [_value(v) for v in graph.outputs],
        "seconds": round(stages.total(), 3),
        "stages": {name: round(s, 3) for name, s in stages.seconds.items()},
        "captured_by": getattr(program, "capture_strategy", None),
        "capture_failures": [{"strategy": failed, "reason": reason.splitlines()[0]}
                             for failed, reason in getattr(program, "capture_attempts", None)
                             or []],
        **extra,
    }
    if verified:
        results = getattr(program, "verification", None) or []
        result["verification"] = {
            "passed": all(r.passed for r in results),
            "max_abs_diff": max((float(r.max_abs_diff) for r in results), default=0.0),
            "outputs": {r.name: float(r.max_abs_diff) for r in results},
        }
    return result


def _value(value) -> dict[str, Any]:
    shape = None if value.shape is None else [
        dim if isinstance(dim, int) else str(dim) for dim in value.shape]
    return {"name": value.name, "dtype": None if value.dtype is None else value.dtype.name,
            "shape": shape}


def print_json(result: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


def print_table(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(f"exported {result['output']}"), show_header=False,
                  title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    table.add_row("nodes", str(result["nodes"]))
    table.add_row("file size", human_size(result["bytes"]))
    if len(result["files"]) > 1:
        table.add_row("files", escape(", ".join(result["files"])))
    table.add_row("inputs", _values_text(result["inputs"]))
    table.add_row("outputs", _values_text(result["outputs"]))
    if result.get("task"):
        table.add_row("task", result["task"])
    if result["captured_by"]:
        table.add_row("captured by", result["captured_by"])
    for failure in result["capture_failures"]:
        table.add_row(f"  {failure['strategy']} failed", failure["reason"][:120], style="dim")
    table.add_row("seconds", f"{result['seconds']:.2f}")
    for stage, seconds in result["stages"].items():
        table.add_row(f"  {stage}", f"{seconds:.2f}", style="dim")
    if "verification" in result:
        verification = result["verification"]
        table.add_row("max abs diff", f"{verification['max_abs_diff']:.3g} "
                                      f"({'passed' if verification['passed'] else 'FAILED'})")
    Console(highlight=False, soft_wrap=True).print(table)


def _values_text(values: list[dict[str, Any]], limit: int = 8) -> str:
    from rich.markup import escape

    def one(v):
        shape = "?" if v["shape"] is None else ", ".join(str(d) for d in v["shape"])
        return escape(f"{v['name']}[{shape}]")
    text = ", ".join(one(v) for v in values[:limit])
    return text + (f" and {len(values) - limit} more" if len(values) > limit else "")


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    value = float(size)
    for unit in ("KB", "MB", "GB", "TB"):
        value /= 1024
        if value < 1024 or unit == "TB":
            return f"{value:.1f} {unit} ({size:,} bytes)"
    raise AssertionError("unreachable")
