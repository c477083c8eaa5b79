"""Runs one fuzz program: eager (float32 and a float64 cross-check), onnxport.export, ONNX Runtime
at the example sizes and at the second sizes of the dynamic axes; classifies the outcome.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import warnings

import torch

import onnxport
from onnxport.errors import (CaptureError, InvalidExportOptionsError, TranslationError,
                             UnsupportedOpsError)
from onnxport.fuzz.program import Program, evaluate

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
            actual = _run_session(session, program.make_inputs(second))
        except Exception as error:
            return Outcome(INVALID, f"ONNX Runtime failed at the {where}: {_short(str(error))}")
        problem = compare(actual, eager)
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


def compare(actual, expected, check_dtype: bool = True) -> str | None:
    """None when ONNX Runtime's outputs equal eager's; else what differs first."""
    if len(actual) != len(expected):
        return f"{len(actual)} outputs, eager has {len(expected)}"
    for i, (a, e) in enumerate(zip(actual, expected)):
        if a.shape != e.shape:
            return f"output {i}: shape {tuple(a.shape)}, eager {tuple(e.shape)}"
        if check_dtype and a.dtype != e.dtype:
            return f"output {i}: dtype {a.dtype}, eager {e.dtype}"
        rtol, atol = tolerances(e.dtype)
        try:
            torch.testing.assert_close(a.to(e.dtype), e, rtol=rtol, atol=atol, equal_nan=True,
                                       check_dtype=False)
        except AssertionError as error:
            return f"output {i}: {_short(str(error), 6)}"
    return None


def _session(exported):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 4
    return ort.InferenceSession(exported.model_proto.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def _run_session(session, inputs) -> list[torch.Tensor]:
    import numpy as np

    names = [i.name for i in session.get_inputs()]
    if len(names) != len(inputs):
        raise RuntimeError(f"the model takes {len(names)} inputs, the program has {len(inputs)}")
    feeds = {n: t.numpy() for n, t in zip(names, inputs)}
    return [torch.from_numpy(np.asarray(o)) for o in session.run(None, feeds)]


def _short(text: str, lines: int = 3) -> str:
    return os.linesep.join(text.strip().splitlines()[:lines])
