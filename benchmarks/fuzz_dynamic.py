"""Differential fuzzing of dynamic shapes: random chains of shape and size ops over an input
whose every axis is dynamic, exported on both paths (default and dynamo=False), run in ONNX
Runtime at the example's sizes and at three others, and compared with eager PyTorch.

A MISMATCH (ONNX Runtime returns other shapes or values than eager, without an error) is a
silent wrong answer, the worst outcome: the suite's fixed sample must have none. DECLARED: the
values are right at every size, but the file's declared output shape (its static sizes, or its
rank: a squeeze of a dynamic axis that drops it only where it is 1) does not hold at one. A FAIL (the
export refuses, or the model fails at run time at a size where the example's graph cannot
hold) is loud and listed for review. ``--small`` draws example sizes of 1 to 3 (a batch of 1
with dynamic_axes is how the documents export), where torch takes a size of 1 as a case of its
own; the default draws 3 to 5. ``--scripted`` exports each program compiled by torch.jit.script
from its source instead (the scripted graph's sizes and branches, not a trace's).

    python benchmarks/fuzz_dynamic.py --seeds 0:300
    python benchmarks/fuzz_dynamic.py --seeds 1000:1300 --small
    python benchmarks/fuzz_dynamic.py --seeds 0:300 --more-ops --scripted
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import inspect
import io
import os
import random
import sys
import tempfile
import warnings
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

# Each op: (name, rank change, the drawn arguments' makers, the op). An op takes the tensor
# and the drawn arguments (an axis, a count); its result's rank is the input's plus the change.
Axis = "axis"  # an axis of the input, drawn
Place = "place"  # a place for a new axis (0 to rank), drawn
Count = "count"  # 2 or 3, drawn
OPS: list[tuple[str, int, tuple[str, ...], Callable]] = [
    ("transpose", 0, (Axis, Axis), lambda x, a, b: x.transpose(a, b)),
    ("narrow from 1", 0, (Axis,), lambda x, a: x.narrow(a, 1, x.size(a) - 1)),
    ("every other", 0, (Axis,), lambda x, a: x[(slice(None),) * a + (slice(None, None, 2),)]),
    ("all but the last", 0, (Axis,), lambda x, a: x[(slice(None),) * a + (slice(None, -1),)]),
    ("chunk, first", 0, (Axis, Count), lambda x, a, c: x.chunk(c, a)[0]),
    ("chunk, last", 0, (Axis, Count), lambda x, a, c: x.chunk(c, a)[-1]),
    ("split by 2, first", 0, (Axis,), lambda x, a: x.split(2, a)[0]),
    ("cat", 0, (Axis,), lambda x, a: torch.cat([x, x * 2], a)),
    ("sum kept", 0, (Axis,), lambda x, a: x.sum(a, keepdim=True) + x),
    ("cumsum", 0, (Axis,), lambda x, a: x.cumsum(a)),
    ("flip", 0, (Axis,), lambda x, a: x.flip(a)),
    ("roll", 0, (Axis,), lambda x, a: x.roll(1, a)),
    ("softmax", 0, (Axis,), lambda x, a: x.softmax(a)),
    ("times a size", 0, (Axis,), lambda x, a: x * x.size(a)),
    ("over numel", 0, (), lambda x: x / x.numel()),
    ("plus arange", 0, (), lambda x: x + torch.arange(x.size(-1), dtype=x.dtype)),
    ("plus new tensors", 0, (), lambda x: x + x.new_zeros(x.shape) + torch.ones_like(x)),
    ("minus max kept", 0, (Axis,), lambda x, a: x - x.max(a, keepdim=True)[0]),
    ("pad", 0, (), lambda x: F.pad(x, (1, 2))),
    ("index_select every other", 0, (Axis,),
     lambda x, a: x.index_select(a, torch.arange(0, x.size(a), 2))),
    ("first expanded", 0, (Axis,), lambda x, a: x.narrow(a, 0, 1).expand(x.shape) + x),
    ("repeat", 0, (Axis,), lambda x, a: x.repeat(*[2 if i == a else 1 for i in range(x.dim())])),
    ("repeat_interleave", 0, (Axis,), lambda x, a: x.repeat_interleave(2, a)),
    ("tril", 0, (), lambda x: x.tril()),
    ("where above mean", 0, (), lambda x: torch.where(x > x.mean(), x, -x)),
    ("plus topk 1", 0, (Axis,), lambda x, a: x.topk(1, a)[0] + x),
    ("sort", 0, (Axis,), lambda x, a: x.sort(a)[0]),
    ("flatten first two", -1, (), lambda x: x.flatten(0, 1)),
    ("reshape to size 0 by rest", None, (), lambda x: x.reshape(x.size(0), -1)),
    ("sum", -1, (Axis,), lambda x, a: x.sum(a)),
    ("select last", -1, (Axis,), lambda x, a: x.select(a, -1)),
    ("mean", -1, (Axis,), lambda x, a: x.mean(a)),
    ("squeeze", None, (Axis,), lambda x, a: x.squeeze(a)),
    ("times its transpose", 0, (), lambda x: x @ x.transpose(-1, -2)),
    ("unsqueeze", 1, (Place,), lambda x, p: x.unsqueeze(p)),
    ("stack", 1, (Place,), lambda x, p: torch.stack([x, x + 1], p)),
]


def _along(x: torch.Tensor, axis: int, vector: torch.Tensor) -> torch.Tensor:
    """``vector`` (one value per position of ``axis``) shaped to broadcast along ``axis``."""
    return vector.view([-1 if i == axis else 1 for i in range(x.dim())])


# A second family (``--more-ops``): sizes read into arithmetic, counts of pieces, gathers and
# masks built from sizes. A family of its own, so that the seeds of the first keep their
# programs (the suite's fixed sample among them).
MORE_OPS: list[tuple[str, int, tuple[str, ...], Callable]] = [
    ("narrow to another axis's size", 0, (Axis, Axis),
     lambda x, a, b: x.narrow(a, 0, min(x.size(a), x.size(b)))),
    ("reversed by index_select", 0, (Axis,),
     lambda x, a: x.index_select(a, torch.arange(x.size(a) - 1, -1, -1))),
    ("masked at even positions", 0, (Axis,),
     lambda x, a: x.masked_fill(_along(x, a, torch.arange(x.size(a)) % 2 == 0), 0.0)),
    ("diff", 0, (Axis,), lambda x, a: torch.diff(x, dim=a)),
    ("gather at argmax", -1, (Axis,),
     lambda x, a: x.gather(a, x.argmax(a, keepdim=True)).squeeze(a)),
    ("cummax", 0, (Axis,), lambda x, a: x.cummax(a)[0]),
    ("one zero row more", 0, (Axis,), lambda x, a: torch.cat(
        [x, x.new_zeros([1 if i == a else n for i, n in enumerate(x.shape)])], a)),
    ("split 1 and the rest, rest", 0, (Axis,),
     lambda x, a: x.split([1, x.size(a) - 1], a)[1]),
    ("unbind, stacked reversed", 0, (Axis,),
     lambda x, a: torch.stack(x.unbind(a)[::-1], a)),
    ("tensor_split 2, second", 0, (Axis,), lambda x, a: x.tensor_split(2, a)[1]),
    ("flatten last two", -1, (), lambda x: x.flatten(-2)),
    ("permute reversed", 0, (), lambda x: x.permute(*range(x.dim() - 1, -1, -1))),
    ("plus arange of numel", 0, (),
     lambda x: x + torch.arange(x.numel(), dtype=x.dtype).view(x.shape)),
    ("times ones square", 0, (), lambda x: x @ torch.ones(x.size(-1), x.size(-1))),
    ("roll by half", 0, (Axis,), lambda x, a: x.roll(x.size(a) // 2, a)),
    ("repeat by its size", 0, (Axis,),
     lambda x, a: x.repeat(*[x.size(a) if i == a else 1 for i in range(x.dim())])),
    ("unflatten 1 and rest", 1, (Axis,), lambda x, a: x.unflatten(a, (1, -1))),
    ("expand a new axis of 2", 1, (Place,),
     lambda x, p: x.unsqueeze(p).expand(*x.shape[:p], 2, *x.shape[p:])),
    ("reshape to rest by last", None, (),
     lambda x: x.reshape(-1, x.size(-1))),
    ("view as its size", 0, (), lambda x: x.reshape(-1).view(x.shape)),
    ("scaled by its last index", 0, (Axis,),
     lambda x, a: x * _along(x, a, torch.arange(x.size(a), dtype=x.dtype) / x.size(a))),
    ("chunk 3, middle", 0, (Axis,), lambda x, a: x.chunk(3, a)[1]),
    ("upper triangle zeroed", 0, (), lambda x: x.masked_fill(
        torch.ones(x.size(-2), x.size(-1), dtype=torch.bool).triu(1), 0.0)),
    ("padded by its size", 0, (), lambda x: F.pad(x, (0, x.size(-1)))),
    ("plus new_full of its size", 0, (), lambda x: x + x.new_full((x.size(-1),), 2.0)),
    ("sorted by argsort", 0, (Axis,), lambda x, a: x.gather(a, x.argsort(a))),
    ("cumprod", 0, (Axis,), lambda x, a: x.sigmoid().cumprod(a)),
    ("minus logsumexp kept", 0, (Axis,), lambda x, a: x - x.logsumexp(a, keepdim=True)),
    ("plus var kept", 0, (Axis,), lambda x, a: x + x.var(a, keepdim=True, unbiased=False)),
    ("nearest upsampled", 0, (), lambda x: F.interpolate(
        x.unsqueeze(0), scale_factor=2.0, mode="nearest").squeeze(0)),
    ("max pooled by 2, ceil", 0, (), lambda x: F.max_pool1d(
        x.reshape(1, -1, x.size(-1)), 2, ceil_mode=True).reshape(*x.shape[:-1], -1)),
    ("one at argmax", 0, (Axis,), lambda x, a: x.scatter(a, x.argmax(a, keepdim=True), 1.0)),
    ("every other row zeroed", 0, (),
     lambda x: x.index_put((torch.arange(0, x.size(0), 2),), torch.tensor(0.0))),
]
MIN_RANK, MAX_RANK = 1, 4


def _draw(seed: int, small: bool, more: bool) -> tuple[tuple[int, ...], list[str], list]:
    """The example's shape, the steps' descriptions and the steps (name, op, drawn arguments)
    of ``seed``'s program (``more``: drawn from both op families)."""
    ops = OPS + MORE_OPS if more else OPS
    draw = random.Random(seed)
    rank = draw.choice([2, 3])
    shape = tuple(draw.choice([1, 2, 3] if small else [3, 4, 5]) for _ in range(rank))
    steps, calls = [], []
    for _ in range(draw.randint(2, 5)):
        if rank < MIN_RANK:
            break
        name, change, makers, op = draw.choice([
            o for o in ops if o[1] is None or MIN_RANK <= rank + o[1] <= MAX_RANK])
        if name in ("transpose", "times its transpose") and rank < 2:
            continue
        drawn = [draw.randrange(rank) if m == Axis else draw.randrange(rank + 1) if m == Place
                 else draw.choice([2, 3]) for m in makers]
        steps.append(f"{name}{tuple(drawn) if drawn else ''}")
        calls.append((name, op, drawn))
        rank = 2 if name.startswith("reshape") else rank - (name == "squeeze") \
            if change is None else rank + change
    return shape, steps, calls


def program(seed: int, small: bool, more: bool = False
            ) -> tuple[tuple[int, ...], list[str], Callable]:
    """The example's shape, the steps' descriptions and the model function of ``seed``
    (``more``: drawn from both op families)."""
    shape, steps, calls = _draw(seed, small, more)

    def model(x):
        for _, op, drawn in calls:
            x = op(x, *drawn)
        return x

    return shape, steps, model


# ``--scripted``: the same programs written out as TorchScript source and compiled with
# torch.jit.script, so that the export reads the scripted graph (sizes as ints of the run,
# prim::If and aten::size in the graph) instead of a trace. Each op's body is its lambda's
# source; these are the ops whose Python form TorchScript does not compile (star arguments,
# tuples of slices), written for it, given the drawn arguments.
SCRIPTED_FORMS: dict[str, Callable[..., str]] = {
    "every other": lambda a: f"x[{':, ' * a}::2]",
    "all but the last": lambda a: f"x[{':, ' * a}:-1]",
    "repeat": lambda a: f"x.repeat([2 if i == {a} else 1 for i in range(x.dim())])",
    "repeat by its size":
        lambda a: f"x.repeat([x.size({a}) if i == {a} else 1 for i in range(x.dim())])",
    "permute reversed": lambda: "x.permute([x.dim() - 1 - i for i in range(x.dim())])",
    "expand a new axis of 2":
        lambda p: f"x.unsqueeze({p}).expand(x.shape[:{p}] + [2] + x.shape[{p}:])",
    "max pooled by 2, ceil": lambda: "F.max_pool1d(x.reshape(1, -1, x.size(-1)), 2, "
                                     "ceil_mode=True).reshape(x.shape[:-1] + [-1])",
    "one zero row more": lambda a: f"torch.cat([x, x.new_zeros([1 if i == {a} else x.size(i) "
                                   f"for i in range(x.dim())])], {a})",
    "padded by its size": lambda: "F.pad(x, [0, x.size(-1)])",
    "unbind, stacked reversed": lambda a: f"torch.stack(x.unbind({a})[::-1], {a})",
}


def _lambda_bodies() -> dict[str, tuple[list[str], str]]:
    """Each op's argument names (after x) and its lambda's body, read from this file."""
    import ast

    bodies = {}
    with open(__file__, encoding="utf-8") as source:
        tree = ast.parse(source.read())
    for statement in tree.body:
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.value, ast.List):
            for entry in statement.value.elts:
                if isinstance(entry, ast.Tuple) and isinstance(entry.elts[-1], ast.Lambda):
                    function = entry.elts[-1]
                    bodies[entry.elts[0].value] = ([a.arg for a in function.args.args[1:]],
                                                   ast.unparse(function.body))
    return bodies


def scripted(seed: int, small: bool, more: bool, folder: str) -> torch.jit.ScriptModule:
    """``seed``'s program as a scripted module, its source written to ``folder`` (TorchScript
    reads a function's source from its file). Raises where TorchScript cannot compile it."""
    _, _, calls = _draw(seed, small, more)
    bodies = _lambda_bodies()
    lines = ["import torch", "import torch.nn.functional as F", "", "",
             inspect.getsource(_along), ""]
    for index, (name, _, drawn) in enumerate(calls):
        if name in SCRIPTED_FORMS:
            body, names = SCRIPTED_FORMS[name](*drawn), []
        else:
            names, body = bodies[name]
        lines.append(f"def step_{index}(x: torch.Tensor) -> torch.Tensor:")
        lines += [f"    {argument} = {value}" for argument, value in zip(names, drawn)]
        lines += [f"    return {body}", "", ""]
    lines += ["class Model(torch.nn.Module):", "    def forward(self, x):"]
    lines += [f"        x = step_{index}(x)" for index in range(len(calls))]
    lines += ["        return x", ""]
    path = os.path.join(folder, f"fuzz_scripted_{seed}.py")
    with open(path, "w", encoding="utf-8") as out:
        out.write("\n".join(lines))
    spec = importlib.util.spec_from_file_location(f"fuzz_scripted_{seed}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return torch.jit.script(module.Model())


class _Model(torch.nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, x):
        return self.function(x)


def check(seed: int, small: bool = False, paths=(None, False), more: bool = False,
          script_folder: str | None = None, device: str = "cpu", opset: int | None = None
          ) -> dict | None:
    """Each path's verdict on ``seed``'s program ("ok", "MISMATCH ...", "FAIL ..."), or None
    when the program does not run in eager at the sizes drawn (not a test). With
    ``script_folder``, the program is exported scripted (its source written there), or None
    where TorchScript does not compile it or its scripted form computes otherwise in eager.
    ``device``: the model runs and is exported there (``model.cuda()``), ONNX Runtime on the
    CPU. ``opset``: the export's (the default's when None)."""
    shape, steps, function = program(seed, small, more)
    draw = random.Random(seed + 1)
    example = torch.randn(shape).to(device)
    others = [torch.randn([draw.randint(2, 7) for _ in shape]).to(device) for _ in range(3)]
    model = exported = _Model(function)
    try:  # (a mean over an empty axis is NaN: so is the export's, and NaNs compare equal)
        with torch.no_grad():
            for x in (example, *others):
                model(x)
            if script_folder is not None:
                exported = scripted(seed, small, more, script_folder).to(device)
                for x in (example, *others):
                    torch.testing.assert_close(exported(x), model(x), equal_nan=True)
    except Exception:  # noqa: BLE001 - a program torch itself refuses at some size
        return None
    verdicts = {}
    for dynamo in paths:
        verdicts[dynamo] = _verdict(model, example, others, dynamo, exported, opset)
    return {"seed": seed, "shape": shape, "steps": steps, "verdicts": verdicts}


def _verdict(model, example, others, dynamo, exported=None, opset=None) -> str:
    """``exported`` (the model, or its scripted form) exported and run in ONNX Runtime,
    compared with ``model`` in eager."""
    import onnxruntime as ort

    import onnxport

    axes = {"x": {axis: f"d{axis}" for axis in range(example.dim())}}
    try:
        buffer = io.BytesIO()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            onnxport.export(exported if exported is not None else model, (example,), buffer,
                            input_names=["x"], dynamic_axes=axes, dynamo=dynamo,
                            opset_version=opset)
        options = ort.SessionOptions()
        options.log_severity_level = 3
        session = ort.InferenceSession(buffer.getvalue(), options,
                                       providers=["CPUExecutionProvider"])
    except Exception as error:  # noqa: BLE001 - a refused export is a verdict
        return f"FAIL export: {type(error).__name__}: {_first_line(error)}"
    declared, misdeclared = session.get_outputs()[0].shape, None
    for x in (example, *others):
        with torch.no_grad():
            expected = model(x).cpu().numpy()
        try:
            actual = session.run(None, {"x": x.cpu().numpy()})[0]
        except Exception as error:  # noqa: BLE001 - a loud failure at run time
            return f"FAIL at {tuple(x.shape)}: {_first_line(error)}"
        if actual.shape != expected.shape:
            return f"MISMATCH at {tuple(x.shape)}: shape {actual.shape}, eager {expected.shape}"
        if not np.allclose(actual, expected, rtol=1e-3, atol=1e-4, equal_nan=True):
            return f"MISMATCH at {tuple(x.shape)}: values"
        if misdeclared is None and (len(declared) != actual.ndim or any(
                isinstance(d, int) and d != n for d, n in zip(declared, actual.shape))):
            misdeclared = f"DECLARED at {tuple(x.shape)}: shape {declared}, got {actual.shape}"
    return misdeclared or "ok"


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [""])[0][:160]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0:200", help="first:end (end excluded)")
    parser.add_argument("--small", action="store_true", help="example sizes of 1 to 3")
    parser.add_argument("--more-ops", action="store_true",
                        help="draw from the second op family too (MORE_OPS)")
    parser.add_argument("--scripted", action="store_true",
                        help="export the programs scripted (torch.jit.script) instead")
    parser.add_argument("--opset", type=int, default=None, help="the export's opset")
    parser.add_argument("--device", default="cpu",
                        help="where the model runs and is exported from (cuda: a GPU box)")
    options = parser.parse_args()
    first, end = (int(v) for v in options.seeds.split(":"))
    counts = collections.Counter()
    folder = tempfile.TemporaryDirectory() if options.scripted else None
    for seed in range(first, end):
        result = check(seed, options.small, more=options.more_ops,
                       script_folder=folder.name if folder else None, device=options.device,
                       opset=options.opset)
        if result is None:
            continue
        for path, verdict in result["verdicts"].items():
            label = "default" if path is None else "dynamo=False"
            counts[(label, verdict.split(" ")[0])] += 1
            if verdict != "ok":
                print(f"{seed} {result['shape']} {' -> '.join(result['steps'])} | {label}: "
                      f"{verdict}")
    print(dict(sorted(counts.items())))
    return 1 if any(kind == "MISMATCH" for _, kind in counts) else 0


if __name__ == "__main__":
    sys.exit(main())
