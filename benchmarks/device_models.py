"""Export the model zoo from a device (``model.to(device)``, inputs likewise) with onnxport and
with torch.onnx (dynamo=True) in the same run, run each file in ONNX Runtime on the CPU, and
compare with eager on the device.

    python benchmarks/device_models.py --device cuda                       # whole zoo, float32
    python benchmarks/device_models.py --device cuda --dtype float16 --models resnet50,bert,llama
    python benchmarks/device_models.py --device cpu --models mlp,resnet18  # works without a GPU

A model counts as exported when the file loads in ONNX Runtime and matches eager within the
device's tolerance (onnxport.verification.compare.tolerance_for; float16 at 1e-2 / 1e-2). The
model is checked to be left on its device, unchanged.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import time
import traceback

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__)))
import export_bench  # noqa: E402  (the zoo and torch.onnx's workarounds are shared with it)

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def moved(value, device, dtype):
    """Inputs moved like the model: floating tensors to ``dtype``, all to ``device``."""
    def move(leaf):
        if isinstance(leaf, torch.Tensor):
            leaf = leaf.to(device)
            return leaf.to(dtype) if leaf.is_floating_point() else leaf
        return leaf
    return torch.utils._pytree.tree_map(move, value)


def tolerance(model, args, kwargs, dtype) -> tuple[float, float]:
    from onnxport.verification.compare import tolerance_for

    if dtype != torch.float32:
        return 1e-2, 1e-2  # one rounding of a half-precision output is ~5e-4 relative
    return tolerance_for(model, args, kwargs)


def eager_leaves(model, args, kwargs) -> list[torch.Tensor]:
    from onnxport.pytree_names import exported_leaves
    from onnxport.verification.compare import full_float32

    with torch.no_grad(), full_float32():  # float32 means float32: no TF32 convolutions
        outputs = model(*copy.deepcopy(args), **copy.deepcopy(kwargs))
    return [t for t in exported_leaves(outputs) if isinstance(t, torch.Tensor)]


def compare_file(path: str, model, args, kwargs, dtype) -> tuple[bool, float | None, str]:
    """Run ``path`` in ONNX Runtime (CPU) and compare with eager on the device."""
    import onnxruntime as ort

    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feeds = export_bench.ort_feeds(session, model, moved(args, "cpu", None),
                                   moved(kwargs, "cpu", None))
    actual = session.run(None, feeds)
    expected = eager_leaves(model, args, kwargs)
    if len(actual) != len(expected):
        return False, None, f"{len(actual)} outputs, eager gives {len(expected)}"
    rtol, atol = tolerance(model, args, kwargs, dtype)
    worst = 0.0
    for a, e in zip(actual, expected):
        e = e.detach().float().cpu()
        a = torch.from_numpy(a).float()
        if a.shape != e.shape:
            return False, None, f"shape {tuple(a.shape)} vs eager {tuple(e.shape)}"
        if e.numel():
            worst = max(worst, float((a - e).abs().max()))
            if not torch.allclose(a, e, rtol=rtol, atol=atol, equal_nan=True):
                return False, worst, f"max abs diff {worst:.3g} (rtol {rtol}, atol {atol})"
    return True, worst, ""


def run_one(exporter: str, name: str, device: str, dtype, folder: str) -> dict:
    model_zoo = export_bench._import_model_zoo()
    model, args, kwargs = model_zoo.build(name)
    model = model.to(device=device, dtype=dtype)
    args, kwargs = moved(args, device, dtype), moved(kwargs, device, dtype)
    before = {k: (v.device, v.dtype, v.detach().clone()) for k, v in model.state_dict().items()}
    path = os.path.join(folder, f"{name}-{exporter}.onnx")
    start, error = time.perf_counter(), None
    # The plain call, then the workarounds a torch.onnx user applies (as export_bench does).
    for workaround, prepare, call_args, call_kwargs, *instead in export_bench.export_attempts(
            exporter, model, args, kwargs):
        try:
            prepare()
            export_bench.export_with(exporter, instead[0] if instead else model, call_args,
                                     call_kwargs, path)
            error = None
            break
        except Exception as failure:  # noqa: BLE001 (a benchmark reports every failure)
            error = error or failure
    if error is not None:
        return {"ok": False, "error": export_bench.error_summary(error)}
    seconds = time.perf_counter() - start
    after = model.state_dict()
    unchanged = all(after[k].device == d and after[k].dtype == t and torch.equal(after[k], v)
                    for k, (d, t, v) in before.items())
    try:
        ok, diff, why = compare_file(path, model, args, kwargs, dtype)
    except Exception as error:  # noqa: BLE001
        return {"ok": False, "error": f"ONNX Runtime: {export_bench.error_summary(error)}"}
    if not unchanged:
        ok, why = False, "the model was moved or changed by the export"
    return {"ok": ok, "max_abs_diff": diff, "error": why, "seconds": seconds}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--models", help="comma-separated (default: the whole zoo)")
    parser.add_argument("--exporters", default="onnxport,dynamo",
                        help="onnxport, dynamo (torch.onnx dynamo=True), torchscript, onnxport-ts")
    parser.add_argument("--opset", type=int, default=export_bench.OPSET)
    parser.add_argument("--json", help="write the results here too")
    options = parser.parse_args(argv)
    export_bench.OPSET = options.opset
    names = options.models.split(",") if options.models else export_bench.all_model_names()
    exporters = options.exporters.split(",")
    dtype = DTYPES[options.dtype]
    results: dict[str, dict[str, dict]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            results[name] = {}
            for exporter in exporters:
                try:
                    results[name][exporter] = run_one(exporter, name, options.device, dtype,
                                                      folder)
                except Exception:  # noqa: BLE001 (building the model failed)
                    results[name][exporter] = {"ok": False,
                                               "error": traceback.format_exc(limit=1)}
                result = results[name][exporter]
                state = "ok" if result["ok"] else f"FAIL {result['error'][:100]}"
                print(f"{name:22s} {exporter:12s} {state}", flush=True)
    print(f"\n{options.device}, {options.dtype}, opset {options.opset}, torch {torch.__version__}")
    print("| model | " + " | ".join(exporters) + " |")
    print("|---|" + "---|" * len(exporters))
    for name, row in results.items():
        cells = [("ok" + (f" ({r['max_abs_diff']:.1e})" if r.get("max_abs_diff") is not None
                          else "")) if r["ok"] else "FAIL" for r in row.values()]
        print(f"| {name} | " + " | ".join(cells) + " |")
    totals = [sum(results[n][e]["ok"] for n in names) for e in exporters]
    print("| **exported correctly** | " + " | ".join(f"**{t} / {len(names)}**"
                                                    for t in totals) + " |")
    if options.json:
        with open(options.json, "w") as stream:
            json.dump({"device": options.device, "dtype": options.dtype,
                       "torch": torch.__version__, "results": results}, stream, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
