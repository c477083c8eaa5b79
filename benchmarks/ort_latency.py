"""ONNX Runtime latency of onnxport's graphs against torch.onnx dynamo=True's, at the same
opset (18 and 23), on the transformers of the model zoo and a few CNNs: ratios per model
(onnxport / torch.onnx, smaller is faster) and their geometric mean per family. Where onnxslim
is installed, each exporter's graph after onnxslim runs too, and onnxport is also compared
with torch.onnx + onnxslim (latency and node count). When torch.onnx's plain call fails, the
workaround a user would apply is tried (T5: transformers' eager attention instead of SDPA) and
named in the output; every graph's outputs are checked against eager PyTorch in ONNX Runtime.

All sessions of one model run in one process, in turns (round robin), single-threaded, and
the medians over many rounds are compared, so that load on a shared machine hits them alike.

    python benchmarks/ort_latency.py                         # bert,gpt2,llama,t5,resnet18,...
    python benchmarks/ort_latency.py --models llama --opsets 23 --seconds 5
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import random
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


def onnxslim_module():
    try:
        import onnxslim
    except ImportError:
        return None
    return onnxslim


def slimmed(path: str) -> str:
    """``path`` after onnxslim, written beside it."""
    import onnx

    out = path.replace(".onnx", "-slim.onnx")
    onnx.save(onnxslim_module().slim(onnx.load(path)), out)
    return out


def node_count(path: str) -> int:
    import onnx

    return len(onnx.load(path, load_external_data=False).graph.node)


def export(exporter: str, model, args, kwargs, opset: int, path: str) -> str | None:
    """Writes ``exporter``'s graph of ``model`` to ``path``; returns the workaround torch.onnx
    needed (None when the plain call worked)."""
    if exporter == "onnxport":
        import onnxport

        onnxport.export(model, args, f=path, kwargs=kwargs, opset_version=opset)
        return None
    import torch

    if type(model).__module__.startswith("transformers."):
        register_cache_pytrees(model)  # what a torch.onnx user must do for HF caches
    errors = []
    for workaround, model_state, options in torch_onnx_attempts(model):
        try:
            with model_state:
                torch.onnx.export(model, args, path, kwargs=kwargs, dynamo=True,
                                  opset_version=opset, verbose=False, **options)
            return workaround
        except Exception as error:  # noqa: BLE001 - the next workaround may work
            errors.append(f"{workaround or 'plain call'}: {error_summary(error)}")
    raise RuntimeError("; ".join(errors))


def torch_onnx_attempts(model):
    """The plain call, then the workarounds a torch.onnx user would try when it fails, as
    (workaround or None, context that puts the model in its state, export options)."""
    yield None, contextlib.nullcontext(), {}
    if getattr(getattr(model, "config", None), "_attn_implementation", None) == "sdpa":
        # torch 2.15 decomposes T5's SDPA into a transposed output that the next view cannot
        # take ("Cannot view a tensor with shape [2, 16, 4, 16] ... as (2, 16, 64)"), with or
        # without optimize; transformers' eager attention computes the same function.
        yield 'attn_implementation="eager"', attention_implementation(model, "eager"), {}
    yield "optimize=False", contextlib.nullcontext(), {"optimize": False}


@contextlib.contextmanager
def attention_implementation(model, implementation: str):
    """``model`` with ``implementation`` as its attention while the block runs (the model is
    shared with onnxport's exports, which keep the attention the model was built with)."""
    before = model.config._attn_implementation
    model.set_attn_implementation(implementation)
    try:
        yield
    finally:
        model.set_attn_implementation(before)


def check_outputs(session, feeds: dict, expected: list) -> None:
    """Raises unless ``session``'s outputs are eager's (all of them when as many, else the
    first: logits or the last hidden state), so that no workaround changes the function."""
    import numpy as np

    outputs = session.run(None, feeds)
    pairs = list(zip(outputs, expected)) if len(outputs) == len(expected) else \
        [(outputs[0], expected[0])]
    for index, (actual, wanted) in enumerate(pairs):
        if actual.shape != wanted.shape or not np.allclose(actual, wanted, rtol=1e-3, atol=1e-4):
            difference = np.abs(actual - wanted).max() if actual.shape == wanted.shape else None
            raise RuntimeError(f"output {index} differs from eager: shapes {actual.shape} and "
                               f"{wanted.shape}, max abs difference {difference}")


def eager_outputs(model, args, kwargs) -> list:
    import torch

    if type(model).__module__.startswith("transformers."):
        register_cache_pytrees(model)  # so that the cache's tensors are leaves
    with torch.no_grad():
        outputs = model(*args, **kwargs)
    return [leaf.numpy() for leaf in torch.utils._pytree.tree_leaves(outputs)
            if isinstance(leaf, torch.Tensor)]


def untrained_norm_weights_(model) -> None:
    """Give weights left at their all-ones initialization (norm scales) values near 1, as a
    trained checkpoint has: a Mul by ones is one that onnxslim drops and a real model keeps
    (and our graphs keep, for ONNX Runtime's RMSNorm fusion), so node counts would compare an
    artefact of random initialization."""
    import torch

    generator = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.is_floating_point() and parameter.numel() and bool((parameter == 1).all()):
                parameter.uniform_(0.8, 1.2, generator=generator)


def latencies(model_name: str, opsets: list[int], folder: str, seconds: float) -> dict:
    """{(exporter, opset): median seconds or an error string} for one model."""
    import onnxruntime as ort

    model, args, kwargs = _import_model_zoo().build(model_name)
    # (Transformers only: with random BatchNorm scales, ResNet-50's logits from torch.onnx's
    # graph leave the eager check's tolerance, 2.3e-4, and Conv+BN fold away either way.)
    if model_name in TRANSFORMERS:
        untrained_norm_weights_(model)
    expected = eager_outputs(model, args, kwargs)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    runners, results = {}, {}
    variants = EXPORTERS + tuple(f"{e}+onnxslim" for e in EXPORTERS if onnxslim_module())
    for opset in opsets:
        for exporter in variants:
            key = (exporter, opset)
            path = os.path.join(folder, f"{model_name}-{exporter}-{opset}.onnx")
            try:
                if exporter.endswith("+onnxslim"):
                    path = slimmed(path.replace("+onnxslim", ""))
                else:
                    workaround = export(exporter, model, args, kwargs, opset, path)
                    if workaround:
                        results[("workaround", exporter, opset)] = workaround
                results[("nodes", exporter, opset)] = node_count(path)
                session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
                feeds = ort_feeds(session, model, args, kwargs)
                check_outputs(session, feeds, expected)
                for _ in range(3):
                    start = time.perf_counter()
                    session.run(None, feeds)
                runners[key] = (session, feeds, time.perf_counter() - start)
            except Exception as error:  # noqa: BLE001 - the others still run
                results[key] = error_summary(error)
    round_seconds = sum(seconds for _, _, seconds in runners.values())
    rounds = max(20, int(seconds / max(round_seconds, 1e-6)))
    times = {key: [] for key in runners}
    order, shuffle = list(runners), random.Random(0).shuffle
    for _ in range(rounds):
        # A new order each round (seeded): no session always runs after the same one, whose
        # state of caches and memory would favour or slow it.
        shuffle(order)
        for key in order:
            session, feeds, _ = runners[key]
            start = time.perf_counter()
            session.run(None, feeds)
            times[key].append(time.perf_counter() - start)
    results.update({key: statistics.median(measured) for key, measured in times.items()})
    return results


def _ratio_cell(results: dict, mine_key, theirs_key) -> tuple[str, float | None]:
    mine, theirs = results.get(mine_key), results.get(theirs_key)
    if isinstance(mine, float) and isinstance(theirs, float):
        return f"{mine / theirs:6.2f}x ({mine * 1e3:6.2f} / {theirs * 1e3:6.2f})", mine / theirs
    error = mine if isinstance(mine, str) else theirs
    return f"error: {str(error)[:60]}", None


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
    slim = onnxslim_module() is not None
    if not slim:
        print("onnxslim is not installed: the comparisons after onnxslim are left out")
    # What onnxport's graph is compared with: torch.onnx's, and torch.onnx's after onnxslim.
    baselines = ["torch.onnx"] + (["torch.onnx+onnxslim"] if slim else [])
    ratios: dict[tuple[str, str, int], float] = {}
    header = "".join(f"{f'opset {o}: onnxport / {b} (ms)':>46s}" for b in baselines
                     for o in opsets)
    print(f"{'model':14s}{header}", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        for name in models:
            results = latencies(name, opsets, folder, options.seconds)
            cells = []
            for baseline in baselines:
                for opset in opsets:
                    cell, ratio = _ratio_cell(results, ("onnxport", opset), (baseline, opset))
                    cells.append(cell)
                    if ratio is not None:
                        ratios[(baseline, name, opset)] = ratio
            print(f"{name:14s}" + "".join(f"{cell:>46s}" for cell in cells), flush=True)
            counts = ", ".join(f"{exporter} {results[('nodes', exporter, opset)]}"
                               for opset in opsets for exporter in EXPORTERS
                               + (("onnxport+onnxslim", "torch.onnx+onnxslim") if slim else ())
                               if ("nodes", exporter, opset) in results)
            print(f"  nodes ({'/'.join(map(str, opsets))}): {counts}")
            for key in results:
                if key[0] == "workaround":
                    print(f"  {key[1]} opset {key[2]} exported with {results[key]}")
                elif key[0] != "nodes" and isinstance(results[key], str):
                    print(f"  {key[0]} opset {key[1]}: {results[key]}")
    for baseline in baselines:
        # The CNN/ViT family is every model run that is not a transformer (the torchvision
        # foundation models named in --models), not only the default three.
        others = [m for m in models if m not in TRANSFORMERS]
        for family, members in (("transformers", TRANSFORMERS), ("CNN/ViT", others)):
            line = []
            for opset in opsets:
                mean = geometric_mean([ratios[(baseline, m, opset)] for m in members
                                       if (baseline, m, opset) in ratios])
                line.append(f"opset {opset}: {mean:.2f}x" if mean else f"opset {opset}: -")
            print(f"geomean vs {baseline:20s} {family:12s} " + ", ".join(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
