"""ONNX Runtime latency of onnxport's graphs against torch.onnx dynamo=True's, at the same
opset (18 and 23), on the transformers of the model zoo and a few CNNs: ratios per model
(onnxport / torch.onnx, smaller is faster) and their geometric mean per family.

All sessions of one model run in one process, in turns (round robin), single-threaded, and
the medians over many rounds are compared, so that load on a shared machine hits them alike.

    python benchmarks/ort_latency.py                         # bert,gpt2,llama,t5,resnet18,...
    python benchmarks/ort_latency.py --models llama --opsets 23 --seconds 5
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from export_bench import _import_model_zoo, error_summary, ort_feeds, register_cache_pytrees  # noqa: E402

TRANSFORMERS = ["bert", "gpt2", "llama", "t5"]
CNNS = ["resnet18", "mobilenet_v2", "vit_b_16"]
EXPORTERS = ("onnxport", "torch.onnx")


def export(exporter: str, model, args, kwargs, opset: int, path: str) -> None:
    if exporter == "onnxport":
        import onnxport

        onnxport.export(model, args, f=path, kwargs=kwargs, opset_version=opset)
        return
    import torch

    if type(model).__module__.startswith("transformers."):
        register_cache_pytrees(model)  # what a torch.onnx user must do for HF caches
    try:
        torch.onnx.export(model, args, path, kwargs=kwargs, dynamo=True, opset_version=opset,
                          verbose=False)
    except Exception:  # noqa: BLE001 - its graph optimizer fails on T5; the unoptimized graph runs
        torch.onnx.export(model, args, path, kwargs=kwargs, dynamo=True, opset_version=opset,
                          verbose=False, optimize=False)
        print(f"  ({type(model).__name__}: torch.onnx opset {opset} with optimize=False)")


def latencies(model_name: str, opsets: list[int], folder: str, seconds: float) -> dict:
    """{(exporter, opset): median seconds or an error string} for one model."""
    import onnxruntime as ort

    model, args, kwargs = _import_model_zoo().build(model_name)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    runners, results = {}, {}
    for opset in opsets:
        for exporter in EXPORTERS:
            key = (exporter, opset)
            path = os.path.join(folder, f"{model_name}-{exporter}-{opset}.onnx")
            try:
                export(exporter, model, args, kwargs, opset, path)
                session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
                feeds = ort_feeds(session, model, args, kwargs)
                for _ in range(3):
                    start = time.perf_counter()
                    session.run(None, feeds)
                runners[key] = (session, feeds, time.perf_counter() - start)
            except Exception as error:  # noqa: BLE001 - the others still run
                results[key] = error_summary(error)
    round_seconds = sum(seconds for _, _, seconds in runners.values())
    rounds = max(20, int(seconds / max(round_seconds, 1e-6)))
    times = {key: [] for key in runners}
    for _ in range(rounds):
        for key, (session, feeds, _) in runners.items():
            start = time.perf_counter()
            session.run(None, feeds)
            times[key].append(time.perf_counter() - start)
    results.update({key: statistics.median(measured) for key, measured in times.items()})
    return results


def geometric_mean(values: list[float]) -> float | None:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(TRANSFORMERS + CNNS))
    parser.add_argument("--opsets", default="18,23")
    parser.add_argument("--seconds", type=float, default=4.0,
                        help="ONNX Runtime time per model, all sessions together")
    options = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    models = options.models.split(",")
    opsets = [int(o) for o in options.opsets.split(",")]
    ratios: dict[tuple[str, int], float] = {}
    print(f"{'model':14s}" + "".join(f"{f'opset {o}: onnxport / torch.onnx (ms)':>40s}"
                                      for o in opsets), flush=True)
    with tempfile.TemporaryDirectory() as folder:
        for name in models:
            results = latencies(name, opsets, folder, options.seconds)
            cells = []
            for opset in opsets:
                mine, theirs = results.get(("onnxport", opset)), results.get(("torch.onnx", opset))
                if isinstance(mine, float) and isinstance(theirs, float):
                    ratios[(name, opset)] = mine / theirs
                    cells.append(f"{mine / theirs:6.2f}x ({mine * 1e3:6.2f} / {theirs * 1e3:6.2f})")
                else:
                    error = mine if isinstance(mine, str) else theirs
                    cells.append(f"error: {str(error)[:60]}")
            print(f"{name:14s}" + "".join(f"{cell:>40s}" for cell in cells), flush=True)
            for key in ("onnxport", "torch.onnx"):
                for opset in opsets:
                    if isinstance(results.get((key, opset)), str):
                        print(f"  {key} opset {opset}: {results[(key, opset)]}")
    for family, members in (("transformers", TRANSFORMERS), ("CNN/ViT", CNNS)):
        line = []
        for opset in opsets:
            mean = geometric_mean([ratios[(m, opset)] for m in members if (m, opset) in ratios])
            line.append(f"opset {opset}: {mean:.2f}x" if mean else f"opset {opset}: -")
        print(f"geomean {family:12s} " + ", ".join(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
