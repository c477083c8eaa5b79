"""Shrinks a failing program while it keeps failing the same way, and writes it as a standalone
reproducer (torch + onnxport, a few lines).
"""

from __future__ import annotations

import dataclasses
import math
import textwrap
from typing import Callable

import torch

from onnxport_fuzz.program import Program, referenced, rename
from onnxport_fuzz.runner import Outcome, run, tolerances


def reduce(program: Program, opset: int, kind: str, *, budget: int = 80) -> Program:
    """The smallest program found (within ``budget`` runs) whose outcome is still ``kind``."""
    calls = 0

    def fails(candidate: Program) -> bool:
        nonlocal calls
        if calls >= budget:
            return False
        calls += 1
        return run(candidate, opset).kind == kind

    best = prune(program)
    # One output is enough.
    if len(best.outputs) > 1:
        for out in best.outputs:
            candidate = prune(dataclasses.replace(best.copy(), outputs=[out]))
            if fails(candidate):
                best = candidate
                break
    # Drop ops: route each op's readers to one of its operands instead.
    changed = True
    while changed and calls < budget:
        changed = False
        for line in reversed(best.lines):
            for operand in dict.fromkeys(r for r in referenced(line.expr) if r[0] in "xv"):
                candidate = prune(bypass(best, line.var, operand))
                if len(candidate.lines) < len(best.lines) and fails(candidate):
                    best, changed = candidate, True
                    break
            if changed:
                break
    for step in (_static, _plain_fill, _shrink_dims):
        best = step(best, fails)
    return best


def prune(program: Program) -> Program:
    """Only the lines, inputs and weights the outputs need."""
    program = program.copy()
    needed = set(program.outputs)
    kept = []
    for line in reversed(program.lines):
        if line.var in needed:
            kept.append(line)
            needed.update(referenced(line.expr))
    program.lines = kept[::-1]
    program.inputs = [i for i in program.inputs if i.name in needed] or program.inputs[:1]
    program.params = [p for p in program.params if p.name in needed]
    return program


def bypass(program: Program, var: str, operand: str) -> Program:
    program = program.copy()
    program.lines = [line for line in program.lines if line.var != var]
    for line in program.lines:
        line.expr = rename(line.expr, var, operand)
    program.outputs = [operand if o == var else o for o in program.outputs]
    program.outputs = list(dict.fromkeys(program.outputs))
    return program


def _static(program: Program, fails: Callable) -> Program:
    if program.dynamic_symbols():
        candidate = dataclasses.replace(program.copy(), dynamic_mode="static")
        if fails(candidate):
            return candidate
    return program


def _plain_fill(program: Program, fails: Callable) -> Program:
    for k, spec in enumerate(program.inputs):
        if spec.fill == "special":
            candidate = program.copy()
            candidate.inputs[k].fill = "normal"
            if fails(candidate):
                program = candidate
    return program


def _shrink_dims(program: Program, fails: Callable) -> Program:
    for symbol, (first, second) in list(program.symbols.items()):
        for smaller in (2, 3):
            if smaller < first:
                candidate = program.copy()
                candidate.symbols[symbol] = (smaller, second if second != smaller else smaller + 1)
                if fails(candidate):
                    program = candidate
                    break
    for k in range(len(program.inputs)):
        for axis, size in enumerate(program.inputs[k].dims):
            if isinstance(size, int) and size > 2:
                candidate = program.copy()
                dims = list(candidate.inputs[k].dims)
                dims[axis] = 2
                candidate.inputs[k].dims = tuple(dims)
                if fails(candidate):
                    program = candidate
    return program


# -- the reproducer ------------------------------------------------------------------------------
def reproducer_source(program: Program, opset: int, outcome: Outcome, title: str = "") -> str:
    """A standalone script that exports the program and compares ONNX Runtime with eager."""
    buffers = "\n".join(
        f"        self.register_buffer({p.name!r}, {_literal(t)})"
        for p, t in zip(program.params, program.make_params().values())) or "        pass"
    forward = textwrap.indent(program.forward_source(), "    ")
    runs = [program.make_inputs(False)]
    if program.dynamic_symbols():
        runs.append(program.make_inputs(True))
    inputs = "\n".join(f"    ({', '.join(_literal(t) for t in args)}{',' if len(args) == 1 else ''}),"
                       for args in runs)
    options = _options_source(program)
    rtol, atol = tolerances(torch.float32)
    detail = textwrap.indent(outcome.detail.strip(), "    ")
    return f'''"""onnxport fuzz reproducer: {outcome.kind} at opset {opset}. {title}
ops: {", ".join(program.ops)}; dynamic: {program.dynamic_mode}
{detail}
"""
import math

import torch

import onnxport

F = torch.nn.functional
nan, inf = math.nan, math.inf


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
{buffers}

{forward}

model = Model().eval()
runs = [  # the example inputs, then other sizes for the dynamic axes
{inputs}
]
program = onnxport.export(model, runs[0], opset_version={opset}{options})
for args in runs:
    expected = model(*args)
    for actual, wanted in zip(program(*args), expected):
        tolerance = dict(rtol=1e-2, atol=1e-2) if wanted.dtype == torch.float16 else dict(rtol={rtol}, atol={atol})
        torch.testing.assert_close(actual, wanted, equal_nan=True, **tolerance)
print("ONNX Runtime matches eager")
'''


def _options_source(program: Program) -> str:
    if not program.dynamic_symbols():
        return ""
    if program.dynamic_mode == "axes":
        options = program.dynamic_options()
        return f",\n    input_names={options['input_names']!r}, dynamic_axes={options['dynamic_axes']!r}"
    if program.dynamic_mode == "dim":
        dim = {s: f"torch.export.Dim({s!r}, min=2, max=4096)" for s in program.dynamic_symbols()}
    else:
        dim = {s: "torch.export.Dim.DYNAMIC" for s in program.dynamic_symbols()}
    shapes = ", ".join(
        f"{i.name!r}: " + ("{" + ", ".join(f"{a}: {dim[d]}" for a, d in enumerate(i.dims)
                                           if isinstance(d, str)) + "}"
                           if any(isinstance(d, str) for d in i.dims) else "None")
        for i in program.inputs)
    return f",\n    dynamic_shapes={{{shapes}}}"


def _literal(tensor: torch.Tensor) -> str:
    dtype = str(tensor.dtype)
    values = tensor.tolist()
    # repr of a list prints nan and inf as names the reproducer defines.
    text = repr(values) if tensor.dim() else _scalar(values)
    return f"torch.tensor({text}, dtype={dtype})"


def _scalar(value) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return repr(value)

