"""Export each model of issue 7 from a batch-1 example with a named dynamic batch (and sequence),
run it in ONNX Runtime at batch 1 and batch 3 (text models at a second sequence length too) and
compare with eager; prints a table. Each model runs in its own process, with a time limit.

    python benchmarks/batch1_models.py                          # the whole list
    python benchmarks/batch1_models.py --models timm.levit_128s,transformers.BertModel
    python benchmarks/batch1_models.py --torchscript              # dynamo=False
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _zoo():
    sys.path.insert(0, str(ROOT / "tests"))  # the zoo lives with the tests, which share it
    import model_zoo

    return model_zoo


def run_one(name: str, dynamo: bool | None = None) -> dict:
    """Export ``name`` (on the default path, or ``dynamo=False``) and compare; the result row
    as a dict."""
    import torch

    import onnxport
    from onnxport.pytree_names import exported_leaves

    model_zoo = _zoo()
    row = {"model": name, "status": "", "diff_batch1": None, "diff_batch3": None,
           "export_seconds": None, "strategy": "", "dynamic": False, "warnings": 0}
    case = model_zoo.batch1_case(name)
    args, kwargs = case.make_inputs(1)
    start = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            program = onnxport.export(case.model, args, kwargs=kwargs,
                                      dynamic_axes=case.dynamic_axes, dynamo=dynamo)
    except Exception as error:
        row["export_seconds"] = round(time.perf_counter() - start, 1)
        row["status"] = f"export failed: {type(error).__name__}: {str(error).splitlines()[0][:300]}"
        row["error"] = str(error)[:3000]
        return row
    row["export_seconds"] = round(time.perf_counter() - start, 1)
    row["strategy"] = program.capture_strategy or ""
    fixed = [str(w.message) for w in caught
             if issubclass(w.category, onnxport.errors.DynamicDimensionFixedWarning)]
    row["warnings"] = len(fixed)
    if fixed:
        row["fixed"] = fixed
    first = program.model.graph.inputs[0]
    row["dynamic"] = str(first.shape[0]) == "batch"
    ok = True
    for batch, key in ((1, "diff_batch1"), (3, "diff_batch3")):
        sizes = (batch, model_zoo.OTHER_SEQUENCE) if case.text and batch == 3 else (batch,)
        args, kwargs = case.make_inputs(*sizes)
        try:
            with torch.no_grad():
                expected = case.model(*args, **kwargs)
            expected = [t for t in exported_leaves(expected) if isinstance(t, torch.Tensor)]
            actual = program(*args, **kwargs)
        except Exception as error:
            row["status"] = f"run failed at batch {batch}: {type(error).__name__}: " \
                            f"{str(error).splitlines()[0][:200]}"
            return row
        if len(actual) != len(expected):
            row["status"] = f"{len(actual)} outputs, eager has {len(expected)}"
            return row
        diff = 0.0
        for a, e in zip(actual, expected):
            if a.shape != e.shape:
                row["status"] = f"shape {tuple(a.shape)} != eager {tuple(e.shape)} at batch {batch}"
                return row
            if e.numel():
                error = (a.double() - e.double()).abs()
                both_nan = torch.isnan(a.double()) & torch.isnan(e.double())
                error = torch.where(both_nan, torch.zeros_like(error), error)
                diff = max(diff, float(error.nan_to_num(nan=float("inf")).max()))
            try:
                torch.testing.assert_close(a, e, rtol=1e-3, atol=1e-4)
            except AssertionError:
                ok = False
        row[key] = diff
    row["status"] = ("ok" if ok else "mismatch") + ("" if row["dynamic"] else " (static batch)")
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated names (default: all)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per model")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--torchscript", action="store_true",
                        help="export with dynamo=False (the TorchScript path)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.worker:
        import torch

        torch.set_num_threads(1)
        row = run_one(options.worker, False if options.torchscript else None)
        print("ROW " + json.dumps(row), flush=True)
        return
    names = options.models.split(",") if options.models else _zoo().BATCH1_MODELS
    rows = []
    for name in names:
        start = time.perf_counter()
        try:
            done = subprocess.run([sys.executable, __file__, "--worker", name,
                                   *(["--torchscript"] if options.torchscript else [])],
                                  capture_output=True, text=True, timeout=options.timeout,
                                  env={**os.environ, "OMP_NUM_THREADS": "1"})
            found = [line for line in done.stdout.splitlines() if line.startswith("ROW ")]
            row = json.loads(found[-1][4:]) if found else {
                "model": name, "status": f"worker died: {done.stderr.strip().splitlines()[-1:]}"}
        except subprocess.TimeoutExpired:
            row = {"model": name, "status": f"timed out after {options.timeout:.0f}s"}
        rows.append(row)
        print(_format_row(row, time.perf_counter() - start), flush=True)
    print()
    print(_table(rows))
    if options.json:
        Path(options.json).write_text(json.dumps(rows, indent=1))


def _number(value) -> str:
    return "-" if value is None else f"{value:.2e}"


def _format_row(row: dict, seconds: float) -> str:
    return f"[{seconds:6.1f}s] {row['model']}: {row['status']}"


def _table(rows: list[dict]) -> str:
    lines = ["| model | status | max abs diff, batch 1 | max abs diff, batch 3 | export s | "
             "capture strategy |", "|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['model']} | {row['status']} | {_number(row.get('diff_batch1'))} | "
                     f"{_number(row.get('diff_batch3'))} | "
                     f"{row.get('export_seconds') if row.get('export_seconds') is not None else '-'} | "
                     f"{row.get('strategy', '')} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
