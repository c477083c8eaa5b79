"""OpInfo conformance: every op of torch's op_db, float32/int64/bool (and float16 on request),
up to 4 samples each, exported by onnxport and by torch.onnx.export(dynamo=True) on the same
samples, run in ONNX Runtime and compared with eager. Prints op-level pass counts per opset and
the ops only one exporter passes; writes everything as JSON.

    nice -n 5 python benchmarks/op_conformance.py --opsets 18 --jobs 1 --json conformance.json
    python benchmarks/op_conformance.py --opsets 13,17,18,23 --torch-onnx-opsets 18

Each op runs in a worker process with a time limit, so one hanging op costs its limit and the
run goes on (the op counts as a crash). Results are appended to the JSON per op, and a run
given the same --json resumes where it stopped.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import queue
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))  # onnxport_conformance: test tooling


def _worker(tasks, answers) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import warnings

    import torch

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    from onnxport_conformance import results

    while True:
        task = tasks.get()
        if task is None:
            return
        op, plan, dtypes, limit = task
        merged: dict = {}
        try:
            for exporter, opsets in plan:
                merged.update(results.run_op(op, (exporter,), opsets, dtypes, limit))
            answers.put((op, merged, None))
        except BaseException as error:  # the op's machinery itself failed
            answers.put((op, merged, f"{type(error).__name__}: {error}"))


class Pool:
    """Worker processes fed one op at a time; a worker past its time limit is replaced."""

    def __init__(self, jobs: int, timeout: float):
        self.context = multiprocessing.get_context("spawn")
        self.timeout = timeout
        self.workers = [self._start() for _ in range(jobs)]

    def _start(self):
        tasks, answers = self.context.Queue(), self.context.Queue()
        process = self.context.Process(target=_worker, args=(tasks, answers), daemon=True)
        process.start()
        return {"process": process, "tasks": tasks, "answers": answers, "op": None,
                "since": 0.0}

    def run(self, ops: list[str], task_of, on_result) -> None:
        pending = list(ops)
        while pending or any(w["op"] for w in self.workers):
            for index, worker in enumerate(self.workers):
                if worker["op"] is None and pending:
                    op = pending.pop(0)
                    worker["tasks"].put(task_of(op))
                    worker["op"], worker["since"] = op, time.monotonic()
                if worker["op"] is None:
                    continue
                try:
                    op, result, error = worker["answers"].get(timeout=0.05)
                    on_result(op, result, error)
                    worker["op"] = None
                except queue.Empty:
                    alive = worker["process"].is_alive()
                    late = time.monotonic() - worker["since"] > self.timeout
                    if late or not alive:
                        on_result(worker["op"], {}, "timeout" if alive else
                                  f"worker died (exit code {worker['process'].exitcode})")
                        worker["process"].kill()
                        self.workers[index] = self._start()

    def close(self) -> None:
        for worker in self.workers:
            worker["tasks"].put(None)
        for worker in self.workers:
            worker["process"].join(timeout=10)
            if worker["process"].is_alive():
                worker["process"].kill()


def _failed_op(op: str, plan, dtypes, reason: str) -> dict:
    # A timeout or a dead worker fails every (exporter, opset, dtype) of the op.
    return {exporter: {str(o): {d: [[-1, "crash", reason]] for d in dtypes} for o in opsets}
            for exporter, opsets in plan}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--opsets", default="13,17,18,23")
    parser.add_argument("--torch-onnx-opsets", default="18",
                        help="opsets at which torch.onnx.export(dynamo=True) runs ('' for none)")
    parser.add_argument("--dtypes", default="float32,int64,bool")
    parser.add_argument("--samples", type=int, default=4, help="samples per (op, dtype)")
    parser.add_argument("--ops", default="", help="comma-separated op names, run again even if "
                        "--json has them (default: all)")
    parser.add_argument("--stride", type=int, default=1,
                        help="every STRIDE-th op in name order (a deterministic subset)")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per op")
    parser.add_argument("--json", default="op_conformance.json")
    parser.add_argument("--fresh", action="store_true", help="ignore results already in --json")
    parser.add_argument("--write-expected", metavar="PATH",
                        help="write the expected-failures table of onnxport at opset 18 from "
                             "these results (reasons already in the table are kept)")
    options = parser.parse_args(argv)

    from onnxport_conformance import results, samples

    opsets = [int(o) for o in options.opsets.split(",") if o]
    torch_opsets = [int(o) for o in options.torch_onnx_opsets.split(",") if o]
    plan = [("onnxport", opsets)] + ([("torch.onnx", torch_opsets)] if torch_opsets else [])
    dtypes = options.dtypes.split(",")
    ops = options.ops.split(",") if options.ops else sorted(samples.op_infos())[::options.stride]

    document = {"results": {}}
    if os.path.exists(options.json) and not options.fresh:
        with open(options.json) as stream:
            document = json.load(stream)
    done = set(document["results"]) - (set(ops) if options.ops else set())
    document["meta"] = {
        "commit": _commit(), "opsets": opsets, "torch_onnx_opsets": torch_opsets,
        "dtypes": dtypes, "samples": options.samples, **_versions()}
    started = time.monotonic()
    todo = [op for op in ops if op not in done]
    print(f"{len(todo)} ops to run ({len(done)} already in {options.json})", flush=True)

    def on_result(op, result, error):
        if error is not None:
            result = _failed_op(op, plan, dtypes, error)
        document["results"][op] = result
        finished = len(document["results"])
        if finished % 20 == 0:
            print(f"  {finished} ops, {time.monotonic() - started:.0f} s", flush=True)
            _write(options.json, document)

    pool = Pool(options.jobs, options.timeout)
    try:
        pool.run(todo, lambda op: (op, plan, dtypes, options.samples), on_result)
    finally:
        pool.close()
        document["summary"] = _summaries(results, document["results"], plan, dtypes)
        _write(options.json, document)
    _print(document["summary"], plan)
    if options.write_expected:
        _write_expected(options.write_expected, document["results"])
    return 0


def _write_expected(path: str, by_op: dict) -> None:
    """The side table as Python source: one line per failing (op, dtype), with its reason."""
    from onnxport_conformance import results
    from onnxport_conformance.expected import EXPECTED_FAILURES

    lines = []
    for op in sorted(by_op):
        by_dtype = by_op[op].get("onnxport", {}).get("18", {})
        for dtype in ("float32", "int64", "bool"):
            status = results.dtype_status(by_dtype.get(dtype, []))
            if status is None or status[0] == "pass":
                continue
            reason = EXPECTED_FAILURES.get((op, dtype)) or _reason(*status)
            lines.append(f"    ({op!r}, {dtype!r}): {reason!r},")
    with open(path) as stream:
        text = stream.read()
    head = text[:text.index("EXPECTED_FAILURES")]
    with open(path, "w") as stream:
        stream.write(head + "EXPECTED_FAILURES: dict[tuple[str, str], str] = {\n"
                     + "\n".join(lines) + "\n}\n")
    print(f"wrote {len(lines)} expected failures to {path}")


def _reason(kind: str, detail: str) -> str:
    """A one-line reason from a failure's detail (the first line that says something)."""
    import re

    text = " ".join(detail.split())
    text = re.sub(r"export: (UnsupportedOpsError|TranslationError|CaptureError): ", "", text)
    text = re.sub(r"\[ONNXRuntimeError\] : \d+ : \w+ : ", "", text)
    text = re.sub(r"\s*used at \S+ ?", " ", text)
    return f"{kind}: {text[:140]}"


def _summaries(results, by_op: dict, plan, dtypes=()) -> dict:
    from onnxport_conformance.samples import COUNTED_DTYPES

    summary = {}
    for exporter, opsets in plan:
        for opset in opsets:
            summary[f"{exporter}@{opset}"] = results.summary(by_op, exporter, opset)
            # float16 (and any other dtype outside the op-level count) on its own line.
            for dtype in dtypes:
                if dtype not in COUNTED_DTYPES:
                    summary[f"{exporter}@{opset} {dtype}"] = results.summary(
                        by_op, exporter, opset, dtypes=(dtype,))
    return summary


def _print(summary: dict, plan) -> None:
    print(f"\n{'exporter@opset':22} {'pass':>5} / testable  clear-error mismatch crash")
    for key, counts in summary.items():
        print(f"{key:22} {counts['pass']:5} / {counts['testable']:<8} {counts['clear-error']:11}"
              f" {counts['mismatch']:8} {counts['crash']:5}"
              f"   ({100 * counts['pass'] / max(counts['testable'], 1):.1f} %)")
    for key in summary:
        if not key.startswith("torch.onnx@") or " " in key:
            continue
        ours = summary.get("onnxport@" + key.split("@")[1])
        if ours is None:
            continue
        theirs = set(summary[key]["passing_ops"])
        mine = set(ours["passing_ops"])
        print(f"\nonly onnxport passes at opset {key.split('@')[1]} ({len(mine - theirs)}): "
              + ", ".join(sorted(mine - theirs)))
        print(f"only torch.onnx passes at opset {key.split('@')[1]} ({len(theirs - mine)}): "
              + ", ".join(sorted(theirs - mine)))


def _write(path: str, document: dict) -> None:
    temporary = path + ".tmp"
    with open(temporary, "w") as stream:
        json.dump(document, stream, indent=1, sort_keys=True)
    os.replace(temporary, path)


def _commit() -> str:
    try:
        return subprocess.run(["git", "-C", HERE, "rev-parse", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except Exception:
        return "unknown"


def _versions() -> dict:
    import onnxruntime
    import torch

    return {"torch": torch.__version__, "onnxruntime": onnxruntime.__version__}


if __name__ == "__main__":
    sys.exit(main())
