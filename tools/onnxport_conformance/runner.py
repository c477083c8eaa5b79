"""Runs one conformance case: eager, an exporter, ONNX Runtime; classifies the result as pass,
clear-error, mismatch or crash (untestable when eager itself gives nothing to compare)."""

from __future__ import annotations

import dataclasses
import logging
import os
import warnings

import numpy as np
import torch

from onnxport_conformance.samples import Case

PASS, CLEAR_ERROR, MISMATCH, CRASH, UNTESTABLE = (
    "pass", "clear-error", "mismatch", "crash", "untestable")
EXPORTERS = ("onnxport", "torch.onnx")


@dataclasses.dataclass
class Outcome:
    kind: str
    detail: str = ""


def tolerances(dtype: torch.dtype) -> tuple[float, float]:
    # float16: torch's own OpInfo comparisons (rtol 1e-3 is one float16 ulp at 1; atol 1e-3
    # for results near zero), since ONNX Runtime's CPU computes float16 ops in float32 and
    # rounds once, as torch's CPU kernels do. bfloat16 keeps ~2 decimal digits.
    if dtype == torch.float16:
        return 1e-3, 1e-3
    return (1e-2, 1e-2) if dtype == torch.bfloat16 else (1e-3, 1e-4)


def eager(case: Case) -> tuple[torch.Tensor, ...]:
    with torch.no_grad():
        return case.module(*(t.clone() for t in case.inputs))


def export(case: Case, exporter: str, opset: int):
    """The ModelProto of ``case`` exported by ``exporter``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inputs = tuple(t.clone() for t in case.inputs)
        if exporter == "onnxport":
            import onnxport

            return onnxport.export(case.module, inputs, opset_version=opset).model_proto
        # The competitor, measured on the same samples; never used by the product.
        program = torch.onnx.export(case.module, inputs, dynamo=True, opset_version=opset,
                                    verbose=False, report=False)
        return program.model_proto


def eager_problem(case: Case) -> str | None:
    """Why eager gives nothing to compare with (it fails, or no real dense tensor comes out);
    None when the case is testable."""
    try:
        expected = eager(case)
    except Exception as error:
        return f"eager: {type(error).__name__}: {_short(error)}"
    if not expected or any(not _usable(t) for t in expected):
        return "no real dense tensor output"
    return None


def run(case: Case, exporter: str = "onnxport", opset: int = 18) -> Outcome:
    logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
    logging.getLogger("torch.onnx").setLevel(logging.CRITICAL)
    problem = eager_problem(case)
    if problem is not None:
        return Outcome(UNTESTABLE, problem)
    expected = eager(case)
    if not case.random and _varies_with_seed(case, expected):
        case.random_at_run_time = True
    try:
        model = export(case, exporter, opset)
    except Exception as error:
        return Outcome(CLEAR_ERROR if _clear(error) else CRASH,
                       f"export: {type(error).__name__}: {_short(error)}")
    try:
        actual = _run_ort(model, case.inputs)
    except Exception as error:
        return Outcome(CRASH, f"onnxruntime: {type(error).__name__}: {_short(error)}")
    problem = compare(case, actual, expected)
    return Outcome(PASS) if problem is None else Outcome(MISMATCH, problem)


def _varies_with_seed(case: Case, expected) -> bool:
    """Whether the op draws random numbers (SDPA with dropout_p > 0, say): two eager calls
    in a row differ (the generator has moved on)."""
    other = eager(case)
    return any(not torch.equal(a, b) and not (a.is_floating_point() and torch.equal(
        a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num()))
        for a, b in zip(expected, other))


def _clear(error: Exception) -> bool:
    from onnxport.errors import CaptureError, TranslationError

    # An error of onnxport's own that names what it could not do; torch.onnx's counterpart.
    return isinstance(error, (TranslationError, CaptureError)) or type(error).__name__ in (
        "UnsupportedOperatorError", "TorchExportError", "ConversionError")


def _usable(tensor) -> bool:
    return (isinstance(tensor, torch.Tensor) and not tensor.is_complex()
            and tensor.layout == torch.strided and tensor.dtype != torch.bfloat16)


def compare(case: Case, actual, expected) -> str | None:
    """None when ONNX Runtime's outputs are eager's (random ops: same shapes and dtypes; index
    outputs of ops that pick elements: pointing at equal values)."""
    if len(actual) != len(expected):
        return f"{len(actual)} outputs, eager has {len(expected)}"
    for i, (a, e) in enumerate(zip(actual, expected)):
        if a.shape != e.shape:
            return f"output {i}: shape {tuple(a.shape)}, eager {tuple(e.shape)}"
        if a.dtype != e.dtype:
            return f"output {i}: dtype {a.dtype}, eager {e.dtype}"
        if case.random:
            continue
        rtol, atol = tolerances(e.dtype)
        try:
            torch.testing.assert_close(a, e, rtol=rtol, atol=atol, equal_nan=True)
        except AssertionError as error:
            if case.tie_dim is not None and e.dtype == torch.int64 and _same_values(case, a, e):
                continue
            if e.dtype == torch.float16 and _as_accurate_as_eager(case, i, a, e, rtol, atol):
                continue
            return f"output {i}: {_short(error, 4)}"
    return None


def _as_accurate_as_eager(case: Case, i: int, actual, expected, rtol, atol) -> bool:
    """Whether a float16 output is as close to the op computed in float64 as eager's float16
    result is (within the float16 tolerance). torch's float16 kernels round their partial
    sums and intermediates at other places than ONNX Runtime's: on OpInfo's samples eager
    itself is then several ulps off (addbmm, conv_transpose, losses), or inf where the value
    is finite (soft_margin_loss), so a bare comparison with eager measures torch's rounding."""
    try:
        with torch.no_grad():
            reference = case.module(*(t.double() if t.is_floating_point() else t.clone()
                                      for t in case.inputs))
        reference = reference if isinstance(reference, (tuple, list)) else (reference,)
        exact = reference[i].double()
    except Exception:
        return False
    if exact.shape != expected.shape:
        return False
    a, e = actual.double(), expected.double()
    nan = exact.isnan()
    if not torch.equal(a.isnan() & ~nan, e.isnan() & ~nan):
        return False  # a NaN where eager has a number (or the reverse) is not rounding
    ours, eager = (a - exact).abs(), (e - exact).abs()
    allowed = eager.nan_to_num(nan=0.0) + atol + rtol * exact.abs()
    return bool(((ours <= allowed) | nan | a.isnan()).all())


def _same_values(case: Case, actual: torch.Tensor, expected: torch.Tensor) -> bool:
    """Whether two index outputs pick equal values of the op's first input (ties)."""
    source = case.inputs[0]
    try:
        dim = case.tie_dim()
        if dim is None or source.dim() == 0:
            picked = [source.reshape(-1)[i.reshape(-1)] for i in (actual, expected)]
        else:
            def pick(index):
                if index.dim() < source.dim():
                    index = index.unsqueeze(dim)
                return torch.take_along_dim(source, index, dim)
            picked = [pick(actual), pick(expected)]
        return bool(torch.equal(picked[0], picked[1]) or torch.allclose(
            picked[0].double(), picked[1].double(), equal_nan=True))
    except Exception:
        return False


def _run_ort(model, inputs) -> list[torch.Tensor]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 4
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    by_name = {f"x{i}": t for i, t in enumerate(inputs)}
    names = [i.name for i in session.get_inputs()]
    if all(n in by_name for n in names):
        feeds = {n: by_name[n] for n in names}
    elif len(names) == len(inputs):
        feeds = dict(zip(names, inputs))
    else:
        raise RuntimeError(f"model inputs {names} do not match the sample's {len(inputs)}")
    feeds = {n: t.contiguous().numpy() for n, t in feeds.items()}
    # ONNX Runtime gives uint64 as numpy's ulonglong, which torch.from_numpy refuses.
    return [torch.from_numpy(np.asarray(o).copy().view(np.uint64) if np.asarray(o).dtype.char == "Q"
                             else np.asarray(o).copy()) for o in session.run(None, feeds)]


def _short(error, lines: int = 2) -> str:
    return os.linesep.join(str(error).strip().splitlines()[:lines])[:400]
