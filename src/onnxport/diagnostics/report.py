"""The markdown report, profile and exported-program dump that ``export(report=True,
profile=True, dump_exported_program=True)`` write into ``artifacts_dir``, from the recorder
and the model (names are deterministic: two exports of one model write the same files)."""

from __future__ import annotations

import collections
import os
import re
from typing import Any, Sequence

from onnxport.diagnostics.recorder import RULES, Recorder


def artifact_name(model: Any) -> str:
    """``onnx_export_<model class>``: the same for every export of a model."""
    label = type(model).__name__ if not callable(model) or hasattr(model, "forward") \
        else getattr(model, "__name__", type(model).__name__)
    return "onnx_export_" + re.sub(r"[^A-Za-z0-9_.-]", "_", label)


def _value_line(value) -> str:
    shape = "?" if value.shape is None else "[" + ", ".join(str(d) for d in value.shape) + "]"
    dtype = value.dtype.name if value.dtype is not None else "?"
    return f"| `{value.name}` | {dtype} | {shape} |"


def report_markdown(recorder: Recorder, *, title: str, model=None, status: str = "success",
                    error: BaseException | None = None,
                    verification: Sequence[Any] | None = None) -> str:
    """``model``: the exported ``onnx_ir.Model`` (None when the export failed before it)."""
    lines = [f"# ONNX export report: {title}", "", f"Status: **{status}**", ""]
    if error is not None:
        lines += ["## Error", "", "```", f"{type(error).__name__}: {error}", "```", ""]
    if model is not None:
        graph = model.graph
        opsets = ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in sorted(graph.opset_imports.items()))
        lines += [f"Opsets: {opsets}; {len(graph)} nodes; {len(graph.initializers)} weights", ""]
        for label, values in (("Inputs", graph.inputs), ("Outputs", graph.outputs)):
            lines += [f"## {label}", "", "| name | dtype | shape |", "|---|---|---|"]
            lines += [_value_line(v) for v in values]
            lines.append("")
        histogram = collections.Counter(
            (f"{n.domain}::" if n.domain not in ("", "ai.onnx") else "") + n.op_type
            for n in graph)
        lines += ["## Op histogram", "", "| op | count |", "|---|---|"]
        lines += [f"| {op} | {count} |" for op, count in
                  sorted(histogram.items(), key=lambda item: (-item[1], item[0]))]
        lines.append("")
    decompositions = collections.Counter(
        r.properties.get("op", "?") for r in recorder.of_rule("OPX0001"))
    lines += ["## Decompositions", ""]
    lines += [f"- {op}: {count} node(s)" for op, count in sorted(decompositions.items())] \
        or ["None: every call had a translation."]
    lines.append("")
    lines += ["## Diagnostics", ""]
    others = [r for r in recorder.results if r.rule_id != "OPX0001"]
    lines += [f"- {r.level} {r.rule_id} ({RULES[r.rule_id].name})"
              f"{' at ' + r.location if r.location else ''}: {_one_line(r.message)}"
              for r in others] or ["No warnings or errors."]
    lines.append("")
    if verification is not None:
        lines += ["## Verification", "", "| output | result | max abs diff | max rel diff |",
                  "|---|---|---|---|"]
        lines += [f"| `{r.name}` | {'ok' if r.passed else 'MISMATCH'} | {r.max_abs_diff:.3g} "
                  f"| {r.max_rel_diff:.3g} |" for r in verification]
        lines.append("")
    if recorder.stage_seconds:
        lines += ["## Stage timings", "", "| stage | seconds |", "|---|---|"]
        lines += [f"| {stage} | {seconds:.3f} |" for stage, seconds in
                  recorder.stage_seconds.items()]
        lines.append("")
    return "\n".join(lines)


def _one_line(text: str) -> str:
    text = text.strip().replace("\n", " / ")
    return text if len(text) <= 300 else text[:297] + "..."


def write_text(folder: str | os.PathLike, name: str, text: str) -> str:
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(os.fspath(folder), name)
    with open(path, "w", encoding="utf-8") as stream:
        stream.write(text if text.endswith("\n") else text + "\n")
    return path


def profile_text(profiler, stage_seconds: dict[str, float], limit: int = 40) -> str:
    """The stage timings, then where the time went by function (cProfile, cumulative)."""
    import io
    import pstats

    lines = ["# ONNX export profile", "", "Stage timings (seconds):"]
    lines += [f"  {stage:<10} {seconds:9.3f}" for stage, seconds in stage_seconds.items()]
    lines.append("")
    if profiler is not None:
        stream = io.StringIO()
        stats = pstats.Stats(profiler, stream=stream)
        stats.sort_stats("cumulative").print_stats(limit)
        lines += [f"Functions by cumulative time (top {limit}):", stream.getvalue()]
        # The exporter's own functions, which the capture's (torch's) crowd out above.
        stream = io.StringIO()
        stats.stream = stream
        stats.print_stats(r"onnxport[\\/]", limit)
        lines += [f"onnxport's functions by cumulative time (top {limit}):", stream.getvalue()]
    else:
        lines.append("(another profiler was active: function timings not collected)")
    return "\n".join(lines)
