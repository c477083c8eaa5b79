"""Random programs, deterministic per (seed, case index): inputs of random shapes and dtypes
(some axes dynamic), then ops from the pool, each checked in eager at both sizes as it is added.
"""

from __future__ import annotations

import math
import random
import types
import warnings

import torch

from onnxport_fuzz.ops import OPS, Context, Value
from onnxport_fuzz.program import (DTYPE_NAMES, InputSpec, Line, Param, Program, make_tensor,
                                   referenced)

ALLOWED_DTYPES = (torch.float32, torch.float16, torch.int64, torch.bool)
MAX_ELEMENTS = 4096
DYNAMIC_MODES = ["static", "dim", "dynamic", "axes"]
VISION_OPS = {"conv1d", "conv2d", "conv_transpose2d", "max_pool2d", "avg_pool2d", "max_pool1d",
              "adaptive_avg_pool2d", "batch_norm", "group_norm", "instance_norm", "interpolate"}


def generate(seed: int, index: int, *, max_ops: int = 6) -> Program:
    rng = random.Random(f"onnxport-fuzz:{seed}:{index}")
    mode = rng.choices(DYNAMIC_MODES, [0.3, 0.25, 0.25, 0.2])[0]
    symbols = {}
    for s in ("s0", "s1"):
        first = rng.randint(2, 5)
        symbols[s] = (first, rng.choice([n for n in range(2, 8) if n != first]))
    # One program in five is image-like (N, C, H, W floats, the pools' and convs' input),
    # which random shapes reach too rarely; its sizes leave the kernels room.
    vision = rng.random() < 0.2
    if vision:
        for s in ("s0", "s1"):
            first = rng.randint(4, 7)
            symbols[s] = (first, rng.choice([n for n in range(4, 10) if n != first]))
    program = Program([], [], [], [], symbols, mode)
    _add_inputs(rng, program, vision)
    values = [Value(i.name, ex, sec) for i, ex, sec in
              zip(program.inputs, program.make_inputs(False), program.make_inputs(True))]
    names = list(OPS)
    weights = [w * (6 if vision and name in VISION_OPS else 1) for name, (_, w) in OPS.items()]
    n_ops = rng.randint(1, max_ops)
    attempts = 0
    while len(program.lines) < n_ops and attempts < 40:
        attempts += 1
        name = rng.choices(names, weights)[0]
        pending: list[Param] = []

        def add_param(shape, dtype, fill="normal"):
            param = Param(f"p{len(program.params) + len(pending)}", tuple(shape),
                          DTYPE_NAMES[dtype], fill, rng.randrange(2**31))
            pending.append(param)
            return f"self.{param.name}"

        try:
            expr = OPS[name][0](Context(rng, values, add_param))
        except (IndexError, ValueError):  # a maker found nothing that fits
            expr = None
        if expr is None:
            continue
        params = {p.name: make_tensor(p.shape, p.dtype, p.fill, p.seed)
                  for p in program.params + pending}
        result = [_try(expr, values, params, second) for second in (False, True)]
        if not all(_acceptable(r) for r in result):
            continue
        if result[0].dim() != result[1].dim():
            continue
        var = f"v{len(program.lines)}"
        program.params.extend(pending)
        program.lines.append(Line(var, name, expr))
        values.append(Value(var, result[0], result[1]))
    used = {ref for line in program.lines for ref in referenced(line.expr)}
    program.outputs = [line.var for line in program.lines if line.var not in used]
    if not program.outputs:
        program.outputs = [program.inputs[0].name]
    return program


def _add_inputs(rng: random.Random, program: Program, vision: bool = False) -> None:
    dynamic = program.dynamic_mode != "static"
    rank = 4 if vision else rng.choices([1, 2, 3, 4], [0.15, 0.3, 0.3, 0.25])[0]
    base = []
    for axis in range(rank):
        if dynamic and rng.random() < 0.4 and not (vision and axis == 1):
            base.append(rng.choice(["s0", "s1"]))
        elif vision:
            base.append([rng.choice([1, 2]), rng.choice([1, 2, 3, 4]),
                         rng.randint(4, 9), rng.randint(4, 9)][axis])
        else:
            base.append(rng.choice([1, 2, 3, 4, 5, 6, 8]) if axis else rng.choice([1, 2, 3]))
    if dynamic and not any(isinstance(d, str) for d in base):
        base[rng.randrange(rank)] = "s0"
    for k in range(rng.choices([1, 2, 3], [0.4, 0.4, 0.2])[0]):
        dims = list(base)
        roll = rng.random()
        if k and roll < 0.3:  # broadcast: some axes of size 1
            dims = [1 if rng.random() < 0.4 else d for d in dims]
        elif k and roll < 0.45 and rank > 1:  # broadcast: a trailing suffix
            dims = dims[rng.randrange(1, rank):]
        dtype = ("float32" if vision and not k else
                 rng.choices(["float32", "float16", "int64", "bool"], [0.62, 0.13, 0.15, 0.1])[0])
        if dtype == "bool":
            fill = "bool"
        elif dtype == "int64":
            fill = "int"
        else:
            fill = rng.choices(["normal", "special", "positive"], [0.6, 0.3, 0.1])[0]
        program.inputs.append(InputSpec(f"x{k}", tuple(dims), dtype, fill, rng.randrange(2**31)))


def _try(expr: str, values: list[Value], params: dict, second: bool):
    env = {v.name: (v.sec if second else v.ex) for v in values}
    scope = {"torch": torch, "F": torch.nn.functional, "math": math,
             "self": types.SimpleNamespace(**params)}
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return eval(expr, scope, env)
    except Exception:  # torch refused: the proposal is dropped
        return None


def _acceptable(result) -> bool:
    return (isinstance(result, torch.Tensor) and result.dtype in ALLOWED_DTYPES
            and 0 < result.numel() <= MAX_ELEMENTS and result.dim() <= 5)
