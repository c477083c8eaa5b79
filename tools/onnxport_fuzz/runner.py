"""Runs one fuzz program: eager (float32 and a float64 cross-check), onnxport.export, ONNX Runtime
at the example sizes and at the second sizes of the dynamic axes; classifies the outcome.
"""

from __future__ import annotations

import ast
import dataclasses
import logging
import os
import warnings
from typing import Callable

import torch

import onnxport
from onnxport.errors import (CaptureError, InvalidExportOptionsError, TranslationError,
                             UnsupportedOpsError)
from onnxport_fuzz.program import Line, Program, evaluate

PASS, MISMATCH, INVALID, CLEAR_ERROR, CRASH, EAGER_FAILS = (
    "pass", "mismatch", "invalid-model", "clear-error", "crash", "eager-fails")
# Not counted: the generator made something torch.export itself will not keep dynamic, or
# whose float32 result is not trustworthy (float32 and float64 eager disagree).
SKIPPED, ILL_CONDITIONED = "skipped", "ill-conditioned"
FAILURES = (MISMATCH, INVALID, CRASH)
OWN_ERRORS = (UnsupportedOpsError, TranslationError, CaptureError, InvalidExportOptionsError)


@dataclasses.dataclass
class Outcome:
    kind: str
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.kind in FAILURES


def tolerances(dtype: torch.dtype) -> tuple[float, float]:
    # float16 keeps ~3 decimal digits and ONNX Runtime may accumulate in float16 where
    # torch accumulates in float32.
    return (1e-2, 1e-2) if dtype == torch.float16 else (1e-3, 1e-4)


def run(program: Program, opset: int = 18) -> Outcome:
    # torch logs a traceback for every meta kernel that fails under fake tensors; the error
    # that reaches export() says the same in one line.
    logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
    try:
        expected = evaluate(program)
        expected_second = evaluate(program, second=True) if program.dynamic_symbols() else None
    except Exception as error:
        return Outcome(EAGER_FAILS, f"{type(error).__name__}: {error}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exported = onnxport.export(program.module(), program.make_inputs(False),
                                       opset_version=opset, **program.dynamic_options())
    except OWN_ERRORS as error:
        text = str(error)
        if isinstance(error, CaptureError) and ("Constraints violated" in text
                                                or "specializ" in text.lower()):
            return Outcome(SKIPPED, _short(text))
        return Outcome(CLEAR_ERROR, f"{type(error).__name__}: {_short(text)}")
    except Exception as error:
        return Outcome(CRASH, f"{type(error).__name__}: {_short(str(error))}")
    try:
        session = _session(exported)
    except Exception as error:
        return Outcome(INVALID, f"ONNX Runtime refused the model: {_short(str(error))}")
    runs = [(False, expected)]
    if expected_second is not None and _within_guards(exported, program):
        runs.append((True, expected_second))
    for second, eager in runs:
        where = "second sizes" if second else "example sizes"
        try:
            actual = _run_session(session, exported.input_tensors(
                tuple(program.make_inputs(second)), {}))
        except Exception as error:
            return Outcome(INVALID, f"ONNX Runtime failed at the {where}: {_short(str(error))}")
        problem = compare(actual, eager, gatherers=_index_gatherers(program, second))
        if problem is None:
            continue
        # The float64 cross-check: when float32 eager is itself off, the case says nothing.
        try:
            reference = evaluate(program, second=second, float64=True)
            off = compare([r.to(e.dtype) for r, e in zip(reference, eager)], eager,
                          check_dtype=False)
        except Exception:
            off = None
        if off is not None:
            return Outcome(ILL_CONDITIONED, f"at the {where}: {problem}; float64 eager: {off}")
        return Outcome(MISMATCH, f"at the {where}: {problem}")
    return Outcome(PASS)


def _within_guards(exported, program: Program) -> bool:
    """Whether the second sizes satisfy the ranges torch.export settled on: a Dim.DYNAMIC axis
    may come back valid for 2..3 only (torch.chunk's count of pieces depends on the size),
    and the exported graph is then only claimed for those sizes."""
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exported.exported_program.module()(*program.make_inputs(True))
        return True
    except Exception:
        return False


def compare(actual, expected, check_dtype: bool = True,
            gatherers: dict[int, Callable] | None = None) -> str | None:
    """None when ONNX Runtime's outputs equal eager's; else what differs first.

    ``gatherers`` maps an output that holds indices into a value of the program (argmax,
    max(dim)[1], topk's indices, ...) to a function giving that value's elements at given
    indices: such an output matches when it points at the same values as eager's, so that
    ties (and float32 near-ties within the tolerance) may be broken either way.
    """
    gatherers = gatherers or {}
    if len(actual) != len(expected):
        return f"{len(actual)} outputs, eager has {len(expected)}"
    for i, (a, e) in enumerate(zip(actual, expected)):
        if a.shape != e.shape:
            return f"output {i}: shape {tuple(a.shape)}, eager {tuple(e.shape)}"
        if check_dtype and a.dtype != e.dtype:
            return f"output {i}: dtype {a.dtype}, eager {e.dtype}"
        if i in gatherers and a.dtype == e.dtype == torch.int64 and not torch.equal(a, e):
            try:
                at_actual, at_expected = gatherers[i](a), gatherers[i](e)
            except (IndexError, RuntimeError) as error:  # an index out of range
                return f"output {i} (indices): {_short(str(error), 1)}"
            rtol, atol = tolerances(at_expected.dtype)
            try:
                torch.testing.assert_close(at_actual, at_expected, rtol=rtol, atol=atol,
                                           equal_nan=True)
            except AssertionError as error:
                return f"output {i} (indices; the values they point at differ): {_short(str(error), 6)}"
            continue
        rtol, atol = tolerances(e.dtype)
        try:
            torch.testing.assert_close(a.to(e.dtype), e, rtol=rtol, atol=atol, equal_nan=True,
                                       check_dtype=False)
        except AssertionError as error:
            return f"output {i}: {_short(str(error), 6)}"
    return None


def _index_gatherers(program: Program, second: bool) -> dict[int, Callable]:
    """For each output that is the indices of a reduction or sort over a value of the program,
    a function from indices to that value's (float32 eager) elements at them. Other integer
    outputs are compared exactly."""
    gatherers = {}
    lines = {line.var: line.expr for line in program.lines}
    for position, var in enumerate(program.outputs):
        spec = _index_spec(lines.get(var, ""))
        if spec is None:
            continue
        source, dim, keepdim = spec
        gatherers[position] = _gatherer(program, source, dim, keepdim, second)
    return gatherers


def _gatherer(program: Program, source: str, dim, keepdim: bool, second: bool) -> Callable:
    values = []

    def gather(indices: torch.Tensor) -> torch.Tensor:
        if not values:  # eager is run again only when the indices differ
            head = program.copy()
            head.lines.append(Line("index_source", "index source", source))
            head.outputs = ["index_source"]
            values.append(evaluate(head, second=second)[0])
        value = values[0]
        if dim is None:
            return value.flatten()[indices]
        return value.gather(dim, indices if keepdim else indices.unsqueeze(dim))
    return gather


_INDEX_OPS = {"argmax": False, "argmin": False, "max": True, "min": True, "topk": True,
              "sort": True}  # op -> whether its indices are element [1] of its result


def _index_spec(expr: str) -> tuple[str, int | None, bool] | None:
    """(source expression, dim or None for all, keepdim) when ``expr`` is an index output such as
    ``torch.argmax(v0, 1, keepdim=False)`` or ``torch.topk(v2, 2, dim=-1)[1]``."""
    try:
        node = ast.parse(expr, mode="eval").body
        picked = isinstance(node, ast.Subscript)
        if picked:
            if ast.literal_eval(node.slice) != 1:
                return None
            node = node.value
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "torch"
                and _INDEX_OPS.get(node.func.attr) == picked
                and node.args):
            return None
        name, source = node.func.attr, ast.unparse(node.args[0])
        positional = [ast.literal_eval(a) for a in node.args[1:]]
        keywords = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
    except (SyntaxError, ValueError):
        return None
    if name == "topk":
        return source, keywords.get("dim", positional[1] if len(positional) > 1 else -1), True
    if name == "sort":
        return source, keywords.get("dim", positional[0] if positional else -1), True
    dim = keywords.get("dim", positional[0] if positional else None)
    if dim is None and name in ("max", "min"):
        return None
    return source, dim, bool(keywords.get("keepdim", positional[1] if len(positional) > 1 else False))


def _session(exported):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 4
    return ort.InferenceSession(exported.model_proto.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def _run_session(session, inputs) -> list[torch.Tensor]:
    """The session run on ``inputs``, the tensors it takes (``ONNXProgram.input_tensors``: an
    input the graph does not read is none)."""
    import numpy as np

    names = [i.name for i in session.get_inputs()]
    if len(names) != len(inputs):
        raise RuntimeError(f"the model takes {len(names)} inputs, the program has {len(inputs)}")
    feeds = {n: t.numpy() for n, t in zip(names, inputs)}
    return [torch.from_numpy(np.asarray(o)) for o in session.run(None, feeds)]


def _short(text: str, lines: int = 3) -> str:
    return os.linesep.join(text.strip().splitlines()[:lines])
