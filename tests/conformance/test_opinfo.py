"""The OpInfo conformance suite in CI: a fixed sample of op_db's ops, every counted dtype, at
opset 18, with strict expected-failure semantics (an unlisted failure fails, and so does a
listed (op, dtype) that passes: its line must leave the table).

ONNXPORT_CONFORMANCE=all runs every op (slow: benchmarks/op_conformance.py is the tool for it).
"""

from __future__ import annotations

import os

import pytest

from onnxport_conformance import results, runner, samples
from onnxport_conformance.expected import EXPECTED_FAILURES

OPSET = 18
# Every STRIDE-th op in name order: deterministic, spread over the alphabet (so over op
# families), about 40 ops, ~40 s of CPU.
STRIDE = 17


def _ops() -> list[str]:
    ops = sorted(samples.op_infos())
    return ops if os.environ.get("ONNXPORT_CONFORMANCE") == "all" else ops[::STRIDE]


@pytest.mark.parametrize("op", _ops())
def test_op_matches_eager_or_is_expected(op):
    by_dtype = results.run_op(op, ("onnxport",), (OPSET,))["onnxport"][str(OPSET)]
    problems = []
    for dtype in samples.COUNTED_DTYPES:
        status = results.dtype_status(by_dtype.get(dtype, []))
        expected = EXPECTED_FAILURES.get((op, dtype))
        if status is None:
            if expected is not None:
                problems.append(f"{dtype}: listed as expected failure but nothing is testable")
            continue
        kind, detail = status
        if kind == runner.PASS and expected is not None:
            problems.append(f"{dtype}: passes now; remove its line from the expected failures "
                            f"({expected})")
        elif kind != runner.PASS and expected is None:
            problems.append(f"{dtype}: {kind}: {detail}")
    assert not problems, f"{op}:\n" + "\n".join(problems)


def test_expected_failures_name_real_ops_and_dtypes():
    ops = samples.op_infos()
    unknown = [key for key in EXPECTED_FAILURES
               if key[0] not in ops or key[1] not in samples.COUNTED_DTYPES]
    assert not unknown


def test_index_outputs_are_compared_by_the_values_they_pick():
    import torch

    # Ties: indices 0 and 1 both point at the maximum 5; a wrong index (2) must still fail.
    case = next(samples.cases("argmax", "float32"))
    case.inputs = (torch.tensor([5.0, 5.0, 1.0]),)
    case.tie_dim = lambda: None
    eager = (torch.tensor(0),)
    assert runner.compare(case, [torch.tensor(1)], eager) is None
    assert runner.compare(case, [torch.tensor(2)], eager) is not None


def test_random_ops_are_compared_on_shape_and_dtype():
    import torch

    case = next(samples.cases("nn.functional.dropout", "float32"))
    assert case.random
    out = torch.ones(3)
    assert runner.compare(case, [torch.zeros(3)], (out,)) is None
    assert runner.compare(case, [torch.zeros(4)], (out,)) is not None
    assert runner.compare(case, [torch.zeros(3, dtype=torch.float64)], (out,)) is not None


def test_float16_outputs_may_be_closer_to_float64_than_eager_but_not_farther():
    import torch

    # A sum of 2048 + 1 + 1 + ...: float16 eager rounds each partial sum back to 2048, the
    # float64 value is 2048 + n; an output nearer to it than eager passes, a farther one not.
    x = torch.tensor([2048.0] + [1.0] * 16, dtype=torch.float16)
    case = samples.Case("cumsum", "float16", 0, _accumulate_in_float16(), (x,))
    eager = (torch.tensor([2048.0], dtype=torch.float16),)
    exact = torch.tensor([2064.0], dtype=torch.float16)
    assert runner.compare(case, [exact], eager) is None
    assert runner.compare(case, [torch.tensor([2032.0], dtype=torch.float16)], eager) is not None


def _accumulate_in_float16():
    import torch

    class Accumulate(torch.nn.Module):
        def forward(self, x):  # float16 partial sums, rounded at each step as a kernel might
            total = x[:1].clone()
            for value in x[1:]:
                total = total + value
            return total

    return Accumulate()
