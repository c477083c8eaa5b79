"""Compare ONNX Runtime's outputs with PyTorch eager outputs, output by output."""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import torch


@dataclasses.dataclass
class VerificationInfo:
    """How one output compares."""

    name: str
    max_abs_diff: float
    max_rel_diff: float
    shape_matches: bool
    dtype_matches: bool
    passed: bool
    expected_shape: tuple
    actual_shape: tuple


def compare_outputs(names: Sequence[str], expected: Sequence[torch.Tensor],
                    actual: Sequence[torch.Tensor], *, rtol: float = 1e-3,
                    atol: float = 1e-4) -> list[VerificationInfo]:
    results = []
    for name, e, a in zip(names, expected, actual):
        e = e.detach().cpu()
        shape_ok = tuple(e.shape) == tuple(a.shape)
        dtype_ok = e.dtype == a.dtype
        if shape_ok and e.numel():
            e64, a64 = e.to(torch.float64), a.to(torch.float64)
            diff = (e64 - a64).abs()
            both_inf = torch.isinf(e64) & torch.isinf(a64) & (torch.sign(e64) == torch.sign(a64))
            both_nan = torch.isnan(e64) & torch.isnan(a64)
            diff = torch.where(both_inf | both_nan, torch.zeros_like(diff), diff)
            max_abs = float(diff.max())
            max_rel = float((diff / e64.abs().clamp_min(1e-12)).max())
            passed = bool(((diff <= atol + rtol * e64.abs()) | both_inf | both_nan).all())
        else:
            max_abs = max_rel = 0.0 if shape_ok else float("inf")
            passed = shape_ok
        results.append(VerificationInfo(name, max_abs, max_rel, shape_ok, dtype_ok,
                                        passed and dtype_ok, tuple(e.shape), tuple(a.shape)))
    if len(expected) != len(actual):
        results.append(VerificationInfo("<output count>", float("inf"), float("inf"), False, False,
                                        False, (len(expected),), (len(actual),)))
    return results


def eager_outputs(model: Any, args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """Run the model in PyTorch and flatten its outputs as the exporter does."""
    from torch.export import ExportedProgram

    with torch.no_grad():
        if isinstance(model, ExportedProgram):
            result = model.module()(*args, **kwargs)
        else:
            result = model(*args, **kwargs)
    leaves = torch.utils._pytree.tree_leaves(result)
    return [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]


def verify_program(program, model: Any, args: tuple, kwargs: dict, *, rtol: float = 1e-3,
                   atol: float = 1e-4) -> list[VerificationInfo]:
    """Run ``program`` in ONNX Runtime and ``model`` in PyTorch on the same inputs; compare."""
    expected = eager_outputs(model, args, kwargs)
    actual = program(*args, **kwargs)
    return compare_outputs(program.output_names, expected, actual, rtol=rtol, atol=atol)


def format_report(results: Sequence[VerificationInfo]) -> str:
    lines = []
    for r in results:
        status = "ok" if r.passed else "MISMATCH"
        detail = f"max abs diff {r.max_abs_diff:.3g}, max rel diff {r.max_rel_diff:.3g}"
        if not r.shape_matches:
            detail = f"shape {r.actual_shape} != expected {r.expected_shape}"
        elif not r.dtype_matches:
            detail += " (dtype differs)"
        lines.append(f"  {r.name}: {status} ({detail})")
    return "\n".join(lines)
