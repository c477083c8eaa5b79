"""A fuzz program: a few input tensors, weights and a list of op applications written as Python
expressions, so the same text runs in eager, is exported, is shrunk, and is printed as a reproducer.
"""

from __future__ import annotations

import dataclasses
import math
import re
import warnings
from typing import Any

import torch

DTYPES = {"float32": torch.float32, "float16": torch.float16, "int64": torch.int64,
          "bool": torch.bool, "float64": torch.float64}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


@dataclasses.dataclass
class InputSpec:
    """An input tensor: dims are ints (static) or symbol names (dynamic, sized per run)."""
    name: str
    dims: tuple
    dtype: str
    fill: str  # normal | special (nan, inf, +-0 sprinkled in) | positive | int | bool
    seed: int


@dataclasses.dataclass
class Param:
    """A weight of the module (static shape), e.g. a conv kernel or a norm's scale."""
    name: str
    shape: tuple
    dtype: str
    fill: str  # normal | positive
    seed: int


@dataclasses.dataclass
class Line:
    var: str
    op: str
    expr: str


@dataclasses.dataclass
class Program:
    inputs: list[InputSpec]
    params: list[Param]
    lines: list[Line]
    outputs: list[str]
    symbols: dict[str, tuple[int, int]]  # symbol -> (example size, second size)
    dynamic_mode: str = "static"  # static | dim (named Dims) | dynamic (Dim.DYNAMIC) | axes

    def copy(self) -> "Program":
        return Program([dataclasses.replace(i) for i in self.inputs],
                       [dataclasses.replace(p) for p in self.params],
                       [dataclasses.replace(line) for line in self.lines], list(self.outputs),
                       dict(self.symbols), self.dynamic_mode)

    @property
    def ops(self) -> list[str]:
        return [line.op for line in self.lines]

    def dynamic_symbols(self) -> list[str]:
        used = {d for i in self.inputs for d in i.dims if isinstance(d, str)}
        return [s for s in self.symbols if s in used] if self.dynamic_mode != "static" else []

    def forward_source(self) -> str:
        names = ", ".join(["self"] + [i.name for i in self.inputs])
        body = [f"    {line.var} = {line.expr}" for line in self.lines]
        returns = ", ".join(self.outputs) + ("," if len(self.outputs) == 1 else "")
        return "\n".join([f"def forward({names}):", *body, f"    return ({returns})"]) + "\n"

    # -- tensors ---------------------------------------------------------------------------
    def shape_of(self, spec: InputSpec, second: bool) -> tuple[int, ...]:
        return tuple(self.symbols[d][1 if second else 0] if isinstance(d, str) else d
                     for d in spec.dims)

    def make_inputs(self, second: bool = False) -> tuple[torch.Tensor, ...]:
        return tuple(make_tensor(self.shape_of(i, second), i.dtype, i.fill,
                                 i.seed + (7919 if second else 0)) for i in self.inputs)

    def make_params(self) -> dict[str, torch.Tensor]:
        return {p.name: make_tensor(p.shape, p.dtype, p.fill, p.seed) for p in self.params}

    # -- running -----------------------------------------------------------------------------
    def module(self, float64: bool = False) -> torch.nn.Module:
        namespace = {"torch": torch, "F": torch.nn.functional, "math": math}
        exec(compile(self.forward_source(), "<fuzz program>", "exec"), namespace)
        params = self.make_params()

        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                for name, tensor in params.items():
                    if float64 and tensor.is_floating_point():
                        tensor = tensor.double()
                    self.register_buffer(name, tensor)

        Model.forward = namespace["forward"]
        return Model().eval()

    def dynamic_options(self) -> dict[str, Any]:
        """The export keywords that make the symbol dims dynamic, in the program's mode."""
        if not self.dynamic_symbols():
            return {}
        if self.dynamic_mode == "axes":
            return {"input_names": [i.name for i in self.inputs],
                    "dynamic_axes": {i.name: {a: d for a, d in enumerate(i.dims)
                                              if isinstance(d, str)}
                                     for i in self.inputs if any(isinstance(d, str) for d in i.dims)}}
        if self.dynamic_mode == "dim":
            dims = {s: torch.export.Dim(s, min=2, max=4096) for s in self.dynamic_symbols()}
        else:
            dims = {s: torch.export.Dim.DYNAMIC for s in self.dynamic_symbols()}
        return {"dynamic_shapes": {i.name: ({a: dims[d] for a, d in enumerate(i.dims)
                                             if isinstance(d, str)} or None)
                                   for i in self.inputs}}


def make_tensor(shape: tuple, dtype: str, fill: str, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    n = math.prod(shape)
    if fill == "bool":
        return torch.rand(shape, generator=generator) < 0.5
    if fill == "int" or dtype == "int64":
        return torch.randint(-5, 6, shape, generator=generator).to(DTYPES[dtype])
    if fill == "positive":
        values = torch.rand(shape, generator=generator) * 2 + 0.1
    else:
        values = torch.randn(shape, generator=generator)
    if fill == "special" and n:
        specials = torch.tensor([math.nan, math.inf, -math.inf, 0.0, -0.0])
        count = max(1, n // 6)
        where = torch.randint(0, n, (count,), generator=generator)
        which = torch.randint(0, len(specials), (count,), generator=generator)
        values = values.flatten()
        values[where] = specials[which]
        values = values.reshape(shape)
    return values.to(DTYPES[dtype])


def referenced(expr: str) -> list[str]:
    """Variables (inputs x*, values v*) and weights (self.p*) an expression reads."""
    return re.findall(r"(?<![\w.])([xv]\d+)\b", expr) + re.findall(r"self\.(p\d+)", expr)


def rename(expr: str, old: str, new: str) -> str:
    return re.sub(rf"(?<![\w.]){re.escape(old)}\b", new, expr)


def evaluate(program: Program, second: bool = False, float64: bool = False) -> list[torch.Tensor]:
    """Eager outputs of the program (at the second sizes when ``second``)."""
    inputs = program.make_inputs(second)
    if float64:
        inputs = tuple(t.double() if t.is_floating_point() else t for t in inputs)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. var() with no degrees of freedom: NaN is fine
        return list(program.module(float64)(*inputs))

