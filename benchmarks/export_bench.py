"""Benchmark onnxport.export against torch.onnx.export (dynamo=True and dynamo=False) on the
model zoo: export time, extra peak RSS, node count, file size and ONNX Runtime latency;
onnxport's own ``dynamo=False`` (tracing) path is measured beside torch.onnx's.

Each (exporter, model) export runs in a fresh process (this script with ``--worker``), so that
peak memory does not depend on what earlier exports left allocated; the three exporters of one
model run back to back, and their ONNX files then run in ONNX Runtime in turns in one process,
so that the ratios see the same machine load (on a shared machine, latencies measured one
exporter after the other differed by 1.5x for identical graphs).

    python benchmarks/export_bench.py                       # whole zoo
    python benchmarks/export_bench.py --models mlp,resnet18,bert --repeat 3 --json out.json
    python benchmarks/export_bench.py --exporters torchscript,onnxport-ts --skip-ort
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# dynamo/torchscript: torch.onnx, dynamo=True/False; onnxport-ts: onnxport.export(dynamo=False)
EXPORTERS = ["onnxport", "dynamo", "torchscript", "onnxport-ts"]
EXPORTER_LABELS = {"onnxport": "onnxport", "dynamo": "torch.onnx dynamo=True",
                   "torchscript": "torch.onnx dynamo=False",
                   "onnxport-ts": "onnxport dynamo=False"}
RSS_SAMPLE_SECONDS = 0.005
ORT_TARGET_SECONDS = 2.0  # ONNX Runtime time per model, all exporters: enough runs for a median
ORT_MIN_RUNS = 5
MIN_EXTRA_RSS_MB = 5.0  # extra RSS below this is allocator noise; floored so ratios stay defined
# Every exporter exports at the same opset (``--opset``): torch.onnx's own default (20) has ops
# that opset 18 lacks (one Gelu node instead of five), which would be compared as graph quality.
OPSET = 18


def all_model_names() -> list[str]:
    model_zoo = _import_model_zoo()
    return ["mlp", *model_zoo.TORCHVISION_MODELS, *model_zoo.TRANSFORMERS_MODELS]


def _import_model_zoo():
    # The zoo lives with the tests (they share it); it is not part of the installed package.
    sys.path.insert(0, str(ROOT / "tests"))
    import model_zoo

    return model_zoo


# -- one measurement, in the worker process ------------------------------------------------
def export_with(exporter: str, model, args: tuple, kwargs: dict, path: str) -> None:
    """The export call being timed: each exporter's plain call, writing to ``path``."""
    if exporter in ("onnxport", "onnxport-ts"):
        import onnxport

        onnxport.export(model, args, f=path, kwargs=kwargs, opset_version=OPSET,
                        dynamo=(exporter == "onnxport"))
    else:
        import torch

        torch.onnx.export(model, args, path, kwargs=kwargs, dynamo=(exporter == "dynamo"),
                          opset_version=OPSET)


def as_positional(model, args: tuple, kwargs: dict) -> tuple:
    """``args`` and ``kwargs`` as one positional tuple in ``forward``'s order, skipped
    parameters at their defaults: the TorchScript tracer may take no keyword inputs."""
    import inspect

    signature = inspect.signature(model.forward)
    bound = signature.bind_partial(*args, **kwargs).arguments
    names = list(signature.parameters)
    last = max(names.index(name) for name in bound)
    return tuple(bound.get(name, signature.parameters[name].default) for name in names[:last + 1])


def register_cache_pytrees(model) -> None:
    """What a torch.onnx user does when torch.export rejects a transformers model returning a
    KV cache (onnxport does the same by itself): register the cache classes as pytrees."""
    from transformers.exporters.exporter_dynamo import register_cache_pytrees_for_model

    register_cache_pytrees_for_model(model)


def tuple_outputs(model, keywords: list[str]):
    """``model`` (transformers) called with its keyword tensors given positionally, returning
    a tuple and no cache (torch is imported by the worker only, hence the local class)."""
    import torch

    class TupleOutputs(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, first, *rest):
            output = self.model(first, **dict(zip(keywords, rest)), use_cache=False)
            return tuple(v for v in output.values() if isinstance(v, torch.Tensor))

    return TupleOutputs().eval()


def export_attempts(exporter: str, model, args: tuple, kwargs: dict):
    """The plain call first, then the workaround a user would try when it fails:
    (workaround or None, prepare, args, kwargs[, model to export instead]) each."""
    yield None, lambda: None, args, kwargs
    if exporter == "torchscript" and kwargs:
        yield "kwargs passed positionally", lambda: None, as_positional(model, args, kwargs), {}
    if exporter == "torchscript" and type(model).__module__.startswith("transformers."):
        # The TorchScript exporter takes no ModelOutput or cache object: what its users do is
        # wrap the model, tensors in and a tuple out, without the cache.
        wrapper = tuple_outputs(model, list(kwargs))
        yield ("wrapped: tensors in, tuple out, use_cache=False", lambda: None,
               (*args, *kwargs.values()), {}, wrapper)
    if exporter == "dynamo" and type(model).__module__.startswith("transformers."):
        yield "transformers cache pytrees registered", lambda: register_cache_pytrees(model), \
            args, kwargs


def warm_up_export(exporter: str, model, args: tuple, kwargs: dict,
                   path: str) -> tuple[str | None, tuple, dict]:
    """The untimed first export (imports, registries, caches). Returns the workaround that
    made it work (None for the plain call) and the (args, kwargs) to time with."""
    errors = []
    for workaround, prepare, call_args, call_kwargs, *instead in export_attempts(
            exporter, model, args, kwargs):
        try:
            prepare()
            exported = instead[0] if instead else model
            export_with(exporter, exported, call_args, call_kwargs, path)
            return workaround, call_args, call_kwargs, exported
        except Exception as error:  # noqa: BLE001 - the next workaround may work
            errors.append(f"{workaround or 'plain call'}: {error_summary(error)}")
    raise ExportFailed("; ".join(errors))


class ExportFailed(Exception):
    """Every attempt of ``export_attempts`` failed; the message has one summary per attempt."""


def error_summary(error: BaseException) -> str:
    """One line on the error: torch.onnx puts the cause under "Exception summary" in colours."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error)).strip()
    if "## Exception summary" in text:
        text = text.split("## Exception summary", 1)[1].strip()
    lines = text.splitlines()
    return f"{type(error).__name__}: {lines[0][:160] if lines else ''}"


class PeakRSSSampler:
    """Samples this process's RSS every few milliseconds in a background thread and keeps the
    maximum; ``ru_maxrss`` cannot be reset between the warm-up and the timed export."""

    def __init__(self):
        import psutil

        self._process = psutil.Process()
        self._stop = threading.Event()
        self.peak = 0

    def __enter__(self) -> "PeakRSSSampler":
        self.peak = self._process.memory_info().rss
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._process.memory_info().rss)
            time.sleep(RSS_SAMPLE_SECONDS)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._process.memory_info().rss)


def release_freed_memory() -> None:
    """Collect garbage and hand freed heap pages back to the OS (glibc ``malloc_trim``), so the
    baseline RSS before a timed export does not hide memory the warm-up freed but kept."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def current_rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def onnx_file_stats(folder: str, path: str) -> dict:
    """Node count of the top graph and bytes on disk, side files (external data) included."""
    import onnx

    proto = onnx.load(path, load_external_data=False)
    size = sum(f.stat().st_size for f in Path(folder).rglob("*") if f.is_file())
    return {"nodes": len(proto.graph.node), "file_bytes": size}


def ort_feeds(session, model, args: tuple, kwargs: dict) -> dict:
    """The example inputs as ONNX Runtime feeds: tensor leaves of (args, kwargs) in order, which
    is the input order of all three exporters; by name when an exporter dropped an input."""
    import inspect

    import torch

    leaves = [leaf for leaf in torch.utils._pytree.tree_leaves((args, kwargs))
              if isinstance(leaf, torch.Tensor)]
    names = [i.name for i in session.get_inputs()]
    if len(names) == len(leaves):
        return {name: leaf.numpy() for name, leaf in zip(names, leaves)}
    parameters = list(inspect.signature(model.forward).parameters)
    by_name = dict(zip(parameters, args)) | kwargs
    missing = [name for name in names if name not in by_name]
    if missing:
        raise RuntimeError(f"the ONNX model takes inputs {names}, {len(leaves)} tensors given; "
                           f"cannot match {missing}")
    return {name: by_name[name].numpy() for name in names}


def ort_latencies(model_name: str, onnx_paths: dict[str, str]) -> dict[str, dict]:
    """Median single-threaded ONNX Runtime latency of each exporter's file for one model. The
    sessions run in turns (3 warm-up runs each, then at least ``ORT_MIN_RUNS`` rounds, about
    ``ORT_TARGET_SECONDS`` in all), so that a load change on the machine hits all of them."""
    import onnxruntime as ort

    model, args, kwargs = _import_model_zoo().build(model_name)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    runners, results = {}, {}
    for exporter, path in onnx_paths.items():
        try:
            session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
            feeds = ort_feeds(session, model, args, kwargs)
            for _ in range(3):
                start = time.perf_counter()
                session.run(None, feeds)
            runners[exporter] = (session, feeds, time.perf_counter() - start)
        except Exception as error:  # noqa: BLE001 - the other exporters' files still run
            results[exporter] = {"ort_error": error_summary(error)}
    round_seconds = sum(seconds for _, _, seconds in runners.values())
    rounds = max(ORT_MIN_RUNS, int(ORT_TARGET_SECONDS / max(round_seconds, 1e-6)))
    times = {exporter: [] for exporter in runners}
    for _ in range(rounds):
        for exporter, (session, feeds, _) in runners.items():
            start = time.perf_counter()
            session.run(None, feeds)
            times[exporter].append(time.perf_counter() - start)
    for exporter, measured in times.items():
        results[exporter] = {"ort_seconds": statistics.median(measured), "ort_runs": rounds}
    return results


def measure_export(exporter: str, model_name: str, repeat: int, output_dir: str) -> dict:
    """Export time, extra peak RSS, node count and file size of one exporter on one model; the
    timed export is left in ``output_dir/exporter/``. Failures are recorded, not raised."""
    model, args, kwargs = _import_model_zoo().build(model_name)
    result: dict = {"exporter": exporter, "model": model_name, "status": "ok"}
    timed_folder = Path(output_dir, exporter)
    timed_folder.mkdir()
    path = str(timed_folder / "model.onnx")
    with tempfile.TemporaryDirectory(prefix="export-bench-warm-up-") as warm_folder:
        try:
            workaround, export_args, export_kwargs, model = warm_up_export(
                exporter, model, args, kwargs, os.path.join(warm_folder, "model.onnx"))
            result["workaround"] = workaround
            seconds, extra, absolute = [], [], []
            for _ in range(repeat):
                release_freed_memory()
                baseline = current_rss()
                with PeakRSSSampler() as sampler:
                    start = time.perf_counter()
                    export_with(exporter, model, export_args, export_kwargs, path)
                    seconds.append(time.perf_counter() - start)
                extra.append(sampler.peak - baseline)
                absolute.append(sampler.peak)
        except Exception as error:  # noqa: BLE001 - a benchmark records failures and goes on
            result["status"] = "failed"
            result["error"] = str(error) if isinstance(error, ExportFailed) else error_summary(error)
            result["traceback"] = traceback.format_exc(limit=-6)
            return result
    result.update(export_seconds=statistics.median(seconds), export_runs=seconds,
                  extra_rss_bytes=max(extra), peak_rss_bytes=max(absolute))
    result.update(onnx_file_stats(str(timed_folder), path))
    return result


def run_worker(task: str, model_name: str, repeat: int, output_dir: str, result_path: str) -> None:
    """``task`` is an exporter (export it) or "onnxruntime" (run every exporter's file)."""
    if task == "onnxruntime":
        paths = {exporter: str(Path(output_dir, exporter, "model.onnx")) for exporter in EXPORTERS
                 if Path(output_dir, exporter, "model.onnx").exists()}
        result = ort_latencies(model_name, paths)
    else:
        result = measure_export(task, model_name, repeat, output_dir)
    Path(result_path).write_text(json.dumps(result))


# -- the driver ----------------------------------------------------------------------------
def run_in_subprocess(task: str, model_name: str, repeat: int, output_dir: str,
                      timeout: float) -> dict:
    """One worker task in a fresh interpreter; a crash or time-out becomes {"error": ...}."""
    result_path = os.path.join(output_dir, f"{task}.json")
    command = [sys.executable, __file__, "--worker", task, model_name, "--repeat", str(repeat),
               "--opset", str(OPSET),
               "--output-dir", output_dir, "--result", result_path]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if os.path.exists(result_path):
        return json.loads(Path(result_path).read_text())
    tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
    return {"error": f"worker exited with {done.returncode}: " + " | ".join(tail)}


def benchmark_model(model_name: str, repeat: int, timeout: float, log,
                    exporters: list[str] = EXPORTERS, ort: bool = True) -> dict[str, dict]:
    """The exporters back to back, then ONNX Runtime on their files in turns (unless not
    ``ort``: export metrics only)."""
    results = {}
    with tempfile.TemporaryDirectory(prefix=f"export-bench-{model_name}-") as output_dir:
        for exporter in exporters:
            result = run_in_subprocess(exporter, model_name, repeat, output_dir, timeout)
            result.setdefault("status", "failed")
            results[exporter] = result
        latencies = (run_in_subprocess("onnxruntime", model_name, repeat, output_dir, timeout)
                     if ort else {})
    for exporter, result in results.items():
        if result["status"] == "ok" and ort:
            latency = latencies.get(exporter) or {"ort_error": latencies.get("error", "no result")}
            if "ort_error" in latency:
                result.update(status="onnxruntime failed", error=latency["ort_error"])
            else:
                result.update(latency)
        log(f"{model_name:<20} {EXPORTER_LABELS[exporter]:<24} {describe(result)}")
    return results


def describe(result: dict) -> str:
    text = ""
    if "export_seconds" in result:
        text = (f"export {result['export_seconds']:.2f} s, extra RSS "
                f"{result['extra_rss_bytes'] / 2**20:.0f} MB (peak "
                f"{result['peak_rss_bytes'] / 2**20:.0f} MB), {result['nodes']} nodes")
    if "ort_seconds" in result:
        text += f", ORT {result['ort_seconds'] * 1e3:.3g} ms"
    if result["status"] != "ok":
        text += f" {result['status']}: {result.get('error', '')[:160]}"
    return text.strip(", ")


# -- metrics, ratios, table ----------------------------------------------------------------
# (key, header, value shown in the table from a result)
METRICS = [
    ("export_seconds", "export s", lambda r: r["export_seconds"]),
    ("extra_rss_bytes", "extra RSS MB",
     lambda r: max(r["extra_rss_bytes"] / 2**20, MIN_EXTRA_RSS_MB)),
    ("nodes", "nodes", lambda r: r["nodes"]),
    ("file_bytes", "file MB", lambda r: r["file_bytes"] / 2**20),
    ("ort_seconds", "ORT ms", lambda r: r["ort_seconds"] * 1e3),
]


def metric_value(result: dict | None, key: str):
    """The metric's value, or None when that exporter failed before producing it."""
    if result is None or key not in result:
        return None
    return next(value(result) for name, _, value in METRICS if name == key)


def ratio(results: dict, key: str, other: str, mine: str = "onnxport") -> float | None:
    mine, theirs = metric_value(results.get(mine), key), metric_value(results.get(other), key)
    if mine is None or theirs is None or theirs <= 0:
        return None
    return mine / theirs


def geometric_mean(values: list[float]) -> float | None:
    values = [v for v in values if v is not None and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def format_value(key: str, value, ran: bool = True) -> str:
    if not ran:
        return "—"
    if value is None:
        return "failed"
    if key == "nodes":
        return str(value)
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


def format_ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


# The ratio columns of each metric: (header, onnxport's exporter, torch.onnx's exporter).
RATIOS = [("op/dyn", "onnxport", "dynamo"), ("op/ts", "onnxport", "torchscript"),
          ("opts/ts", "onnxport-ts", "torchscript")]


def table_rows(all_results: dict, metrics: list = METRICS,
               ) -> tuple[list[tuple[str, str]], list[list[str]]]:
    headers = [("", "model")]  # (metric, column) pairs: two header lines
    for _, header, _ in metrics:
        headers += [(header, "onnxport"), ("", "dynamo"), ("", "op-ts")]
        headers += [("", name) for name, _, _ in RATIOS]
    rows, ratio_columns = [], {(key, name): [] for key, _, _ in metrics for name, _, _ in RATIOS}
    for model_name, results in all_results.items():
        workaround = any(r.get("workaround") for r in results.values())
        row = [model_name + ("*" if workaround else "")]
        for key, _, _ in metrics:
            for exporter in ("onnxport", "dynamo", "onnxport-ts"):
                row.append(format_value(key, metric_value(results.get(exporter), key),
                                        exporter in results))
            for name, mine, other in RATIOS:
                value = ratio(results, key, other, mine)
                ratio_columns[key, name].append(value)
                row.append(format_ratio(value))
        rows.append(row)
    geomean_row = ["geomean"]
    for key, _, _ in metrics:
        geomean_row += ["", "", ""]
        geomean_row += [format_ratio(geometric_mean(ratio_columns[key, name]))
                        for name, _, _ in RATIOS]
    rows.append(geomean_row)
    return headers, rows


def print_table(all_results: dict, metrics: list = METRICS) -> None:
    headers, rows = table_rows(all_results, metrics)
    title = (f"onnxport vs torch.onnx at opset {OPSET} (dynamo = torch.onnx dynamo=True, "
             "ts = dynamo=False, op-ts/opts = onnxport dynamo=False; ratios onnxport/other, "
             "lower is better)")
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print(title)
        header_lines = [[metric for metric, _ in headers], [column for _, column in headers]]
        lines = [*header_lines, *rows]
        widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
        for line in lines:
            print("  ".join(cell.rjust(w) for cell, w in zip(line, widths)))
        return
    table = Table(title=title)
    for metric, column in headers:
        table.add_column(f"{metric}\n{column}", justify="left" if column == "model" else "right",
                         no_wrap=True)
    for i, row in enumerate(rows):
        table.add_row(*row, end_section=(i == len(rows) - 2))
    Console(width=max(220, Console().width)).print(table)


def check_targets(all_results: dict, ort: bool = True) -> list[tuple[str, bool, str]]:
    """The targets this benchmark checks: (target, passed, detail), of the exporters that ran.
    A model that onnxport fails to export fails every per-model target; a model that
    dynamo=True fails is not compared."""
    checks = []
    ran = {exporter for results in all_results.values() for exporter in results}
    for mine, other, limit, label in [
            ("onnxport", "dynamo", 0.25, "export time geomean <= 0.25 x dynamo=True"),
            ("onnxport-ts", "torchscript", 0.8,
             "dynamo=False export time geomean <= 0.8 x torch.onnx dynamo=False")]:
        if {mine, other} <= ran:
            mean = geometric_mean([ratio(r, "export_seconds", other, mine)
                                   for r in all_results.values()])
            failed = [m for m, r in all_results.items() if r.get(mine, {}).get("status") != "ok"]
            detail = f"geomean {format_ratio(mean)}"
            if failed:
                detail += f" ({mine} failed: {', '.join(failed)})"
            checks.append((label, mean is not None and mean <= limit and not failed, detail))
    if not {"onnxport", "dynamo"} <= ran:
        return checks
    for key, label, limit in [("nodes", "node count <= 1.1 x dynamo=True, every model", 1.1),
                              ("ort_seconds", "ORT latency <= 1.1 x dynamo=True, every model", 1.1),
                              ("extra_rss_bytes", "extra peak RSS <= dynamo=True's, every model", 1.0)]:
        if key == "ort_seconds" and not ort:
            continue
        offenders, not_compared = [], []
        for model_name, results in all_results.items():
            if results.get("onnxport", {}).get("status") != "ok":
                offenders.append(f"{model_name} (onnxport failed)")
                continue
            value = ratio(results, key, "dynamo")
            if value is None:
                not_compared.append(model_name)
            elif value > limit:
                offenders.append(f"{model_name} {value:.2f}")
        detail = ", ".join(offenders) or "all within"
        if not_compared:
            detail += f" (not compared, dynamo=True failed: {', '.join(not_compared)})"
        checks.append((label, not offenders, detail))
    return checks


def print_targets(checks: list[tuple[str, bool, str]]) -> None:
    print("\nTargets:")
    for label, passed, detail in checks:
        print(f"  {'PASS' if passed else 'FAIL'}  {label}: {detail}")


def print_failures(all_results: dict) -> None:
    workarounds = [(m, e, r) for m, results in all_results.items() for e, r in results.items()
                   if r.get("workaround")]
    if workarounds:
        print("\n* The plain call failed; measured with a workaround:")
        for model_name, exporter, result in workarounds:
            print(f"  {model_name} / {EXPORTER_LABELS[exporter]}: {result['workaround']}")
    failures = [(m, e, r) for m, results in all_results.items() for e, r in results.items()
                if r["status"] != "ok"]
    if failures:
        print("\nFailures:")
        for model_name, exporter, result in failures:
            print(f"  {model_name} / {EXPORTER_LABELS[exporter]}: {result['status']}: "
                  f"{result.get('error', '')[:300]}")


def environment() -> dict:
    import onnxruntime
    import torch

    import onnxport

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip()

    # The source may change while a long run goes on: the JSON says which commit was measured.
    return {"commit": git("rev-parse", "HEAD"),
            "uncommitted_src_changes": bool(git("status", "--porcelain", "--", "src")),
            "python": platform.python_version(), "torch": torch.__version__,
            "onnxruntime": onnxruntime.__version__, "onnxport": onnxport.__version__,
            "cpus": os.cpu_count(), "platform": platform.platform(), "argv": sys.argv,
            "opset": OPSET}


def main(argv: list[str] | None = None) -> int:
    global OPSET
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", help="comma-separated model names (default: the whole zoo)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="timed exports after the warm-up one; the median is reported")
    parser.add_argument("--json", help="write the raw results to this file")
    parser.add_argument("--timeout", type=float, default=1800,
                        help="seconds one (exporter, model) measurement may take")
    parser.add_argument("--opset", type=int, default=OPSET,
                        help="ONNX opset every exporter exports at (default %(default)s, "
                             "onnxport's default)")
    parser.add_argument("--exporters", default=",".join(EXPORTERS),
                        help="comma-separated exporters to run (default: %(default)s)")
    parser.add_argument("--skip-ort", action="store_true",
                        help="export metrics only: no ONNX Runtime latency")
    parser.add_argument("--worker", nargs=2, metavar=("TASK", "MODEL"), help=argparse.SUPPRESS)
    parser.add_argument("--output-dir", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    OPSET = options.opset

    if options.worker:
        run_worker(*options.worker, options.repeat, options.output_dir, options.result)
        return 0

    known = all_model_names()
    names = options.models.split(",") if options.models else known
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(f"unknown models {unknown}; known: {', '.join(known)}")
    exporters = options.exporters.split(",")
    if not set(exporters) <= set(EXPORTERS):
        parser.error(f"unknown exporters {sorted(set(exporters) - set(EXPORTERS))}; "
                     f"known: {', '.join(EXPORTERS)}")

    run_environment = environment()  # before the run: others may commit during it
    all_results: dict[str, dict[str, dict]] = {}
    started = time.perf_counter()
    for index, model_name in enumerate(names, 1):
        def log(line: str) -> None:
            print(f"[{index}/{len(names)}] {line}", file=sys.stderr, flush=True)

        all_results[model_name] = benchmark_model(model_name, options.repeat, options.timeout, log,
                                                  exporters, not options.skip_ort)
    print(f"({time.perf_counter() - started:.0f} s in all)\n", file=sys.stderr)

    metrics = [m for m in METRICS if m[0] != "ort_seconds" or not options.skip_ort]
    print_table(all_results, metrics)
    checks = check_targets(all_results, not options.skip_ort)
    print_targets(checks)
    print_failures(all_results)
    if options.json:
        Path(options.json).write_text(json.dumps(
            {"environment": run_environment, "results": all_results,
             "targets": [{"target": t, "passed": p, "detail": d} for t, p, d in checks]},
            indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
