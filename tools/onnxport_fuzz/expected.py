"""Known, not yet fixed failures: pattern -> reason, each with a witness program that shows it.

A fuzz failure matching a pattern is counted as expected. The witnesses are run by the tests
with strict-xfail semantics: when a witness passes, its entry must leave the table.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from typing import Callable

import torch

from onnxport_fuzz.program import InputSpec, Line, Program, evaluate


@dataclasses.dataclass
class ExpectedFailure:
    name: str
    reason: str
    matches: Callable[[Program], bool]
    # A program that fails today (None when none was found: then nothing checks the entry).
    witness: Program | None
    witness_opsets: tuple[int, ...] = (17, 18, 23)


def _text(program: Program) -> str:
    return "\n".join(line.expr for line in program.lines)


def _uses(pattern: str) -> Callable[[Program], bool]:
    return lambda program: re.search(pattern, _text(program)) is not None


def _operands_of(program: Program, call: str) -> list[list[torch.Tensor]]:
    """The eager tensor operands of each application of ``call`` (e.g. "F.max_pool2d") in the
    program, at the example sizes and, when it has dynamic axes, at the second sizes."""
    found = []
    for position, line in enumerate(program.lines):
        try:
            tree = ast.parse(line.expr, mode="eval")
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and ast.unparse(node.func) == call):
                continue
            head = program.copy()
            head.lines = head.lines[:position] + [
                Line(f"operand{k}", "operand", ast.unparse(arg)) for k, arg in enumerate(node.args)]
            head.outputs = [f"operand{k}" for k in range(len(node.args))]
            for second in ([False, True] if program.dynamic_symbols() else [False]):
                try:
                    found.append([t for t in evaluate(head, second=second)
                                  if isinstance(t, torch.Tensor)])
                except Exception:  # an operand the probe cannot rebuild: not this pattern
                    continue
    return found


def _reaches(calls: tuple[str, ...], holds: Callable[[torch.Tensor], bool],
             operands: slice = slice(None)) -> Callable[[Program], bool]:
    """Whether an operand of one of ``calls`` holds such values in eager: a NaN made inside the
    graph (sqrt or log of a negative, 0 / 0, inf - inf) counts as much as one in an input."""
    def matches(program: Program) -> bool:
        if not any(call + "(" in _text(program) for call in calls):
            return False
        return any(holds(t) for call in calls for tensors in _operands_of(program, call)
                   for t in tensors[operands] if t.is_floating_point())
    return matches


def _has_nan(t: torch.Tensor) -> bool:
    return bool(t.isnan().any())


def _float16_near_tie(operands: list[torch.Tensor]) -> bool:
    """Two float16 operands of a comparison that are equal or a rounding apart somewhere."""
    if len(operands) != 2 or torch.float16 not in (operands[0].dtype, operands[1].dtype):
        return False
    a, b = torch.broadcast_tensors(*(t.float() for t in operands))
    return bool(torch.isclose(a, b, rtol=2e-3, atol=0.0).any())


_COMPARISONS = tuple(f"torch.{name}" for name in ("eq", "ne", "lt", "le", "gt", "ge"))


def _float16_near_whole_quotient(operands: list[torch.Tensor]) -> bool:
    """float16 operands of a rounding division whose quotient is a rounding from a whole
    number somewhere (where floor and trunc jump)."""
    if len(operands) != 2 or torch.float16 not in (operands[0].dtype, operands[1].dtype):
        return False
    quotient = operands[0].float() / operands[1].float()
    return bool(torch.isclose(quotient, quotient.round(), rtol=2e-3, atol=1e-3).any())


def _float16_near_ties(program: Program) -> bool:
    text = _text(program)
    if any(call + "(" in text for call in _COMPARISONS) and any(
            _float16_near_tie(operands) for call in _COMPARISONS
            for operands in _operands_of(program, call)):
        return True
    return "rounding_mode=" in text and any(
        _float16_near_whole_quotient(operands) for operands in _operands_of(program, "torch.div"))


def _has_negative_zero(t: torch.Tensor) -> bool:
    return bool(((t == 0) & torch.signbit(t)).any())


def _has_inf(t: torch.Tensor) -> bool:
    return bool(t.isinf().any())


def _has_nan_or_inf(t: torch.Tensor) -> bool:
    return not bool(t.isfinite().all())


def _witness(lines: list[str], inputs: list[tuple], symbols=None, mode="static",
             outputs: list[str] | None = None) -> Program:
    specs = [InputSpec(f"x{k}", dims, dtype, fill, 1234 + k)
             for k, (dims, dtype, fill) in enumerate(inputs)]
    body = [Line(f"v{k}", "witness", expr) for k, expr in enumerate(lines)]
    return Program(specs, [], body, outputs or [body[-1].var], symbols or {}, mode)


TABLE: list[ExpectedFailure] = [
    ExpectedFailure(
        # Not onnxport's: torch's fused CPU attention kernel returns numbers where a NaN or an
        # infinity in the query, key or value makes the math NaN (ONNX Runtime's Softmax
        # propagates it). Matched when such a value reaches the attention, from an input or
        # made in the graph.
        "sdpa-with-nan-inputs", "torch's fused attention kernel on NaN or inf (eager is the "
        "odd one)",
        _reaches(("F.scaled_dot_product_attention",), _has_nan_or_inf, slice(0, 3)),
        _witness(["F.scaled_dot_product_attention(x0, x0, x0)"],
                 [((2, 3, 4), "float32", "special")])),
    ExpectedFailure(
        # torch's max pools propagate NaN; ONNX Runtime's MaxPool skips it (as its ReduceMax).
        # Matched when a NaN reaches the pool in eager, from an input or made in the graph.
        "max-pool-with-nan", "found by the fuzzer (issue 6 item 2), not fixed: propagating NaN "
        "costs a second MaxPool (of IsNaN) per pool in every CNN, for NaN inputs only",
        _reaches(("F.max_pool1d", "F.max_pool2d"), _has_nan, slice(0, 1)),
        _witness(["F.max_pool2d(x0, 2, stride=1)"], [((1, 2, 4, 5), "float32", "special")])),
    ExpectedFailure(
        # Not onnxport's: ONNX Runtime's CPU runs float16 ops that have no float16 kernel
        # (ReduceLogSumExp, CumSum, Greater, Mod, ...) in float32 between Casts it inserts,
        # and then drops a float32 -> float16 -> float32 round trip between two of them. An op
        # that jumps can then see one operand unrounded and the other rounded:
        # Greater(Gather(lse), lse) is True when the Gather is also an output, and x // y is 0
        # where eager's rounded x and y are equal. The graph is right; matched when a
        # comparison's float16 operands are a rounding apart in eager, or a rounding
        # division's quotient is a rounding from a whole number.
        "float16-jump-at-near-ties", "ONNX Runtime computes float16 in float32 and skips "
        "a rounding to float16 (eager is right, the model is right)",
        _float16_near_ties,
        _witness(["torch.logsumexp(x0, 2, keepdim=False)",
                  "torch.index_select(v0, 0, torch.tensor([0]))", "torch.gt(v1, v0)"],
                 [((1, 8, 2), "float16", "normal")], outputs=["v2", "v1"]),
        # ONNX Runtime has a float16 ReduceLogSumExp for opset 18 only.
        witness_opsets=(17, 23)),
    ExpectedFailure(
        # torch's cumsum starts from the first element, so a prefix of -0.0s sums to -0.0;
        # ONNX's CumSum starts from +0.0 and gives +0.0. Only a division by that zero (or
        # atan2, copysign) tells them apart. Getting the sign exact costs a second CumSum
        # (of an is--0.0 indicator) per cumsum, for this corner only.
        "cumsum-of-negative-zeros", "found by the fuzzer (issue 6), not fixed: the exact sign "
        "of a zero sum costs a second CumSum per cumsum",
        _reaches(("torch.cumsum",), _has_negative_zero, slice(0, 1)),
        _witness(["torch.reciprocal(torch.cumsum(torch.neg(torch.zeros_like(x0)), 0))"],
                 [((3,), "float32", "normal")])),
    ExpectedFailure(
        # Bilinear/bicubic upsampling of inf: ONNX Runtime's Resize gives NaN (0 * inf from the
        # zero-weight neighbour) where torch keeps inf.
        "interpolate-of-infinities", "found by the fuzzer (issue 6 item 2), not fixed yet",
        lambda p: (_uses(r"F\.interpolate\(.*mode='bi")(p)
                   and _reaches(("F.interpolate",), _has_inf, slice(0, 1))(p)),
        _witness(["F.interpolate(x0.masked_fill(x0 > 0.8, float('inf')), scale_factor=2, "
                  "mode='bilinear', align_corners=True)"], [((1, 2, 3, 3), "float32", "normal")])),
]
# Complex tensors are refused (export() and translation say so); the generator makes none.


def expected_for(program: Program) -> ExpectedFailure | None:
    for entry in TABLE:
        if entry.matches(program):
            return entry
    return None
