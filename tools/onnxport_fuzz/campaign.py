"""A fuzz campaign: many cases (optionally in worker processes), counted per outcome and per op,
failures matched against the expected table and the unexpected ones reduced to reproducers.
"""

from __future__ import annotations

import collections
import dataclasses
import multiprocessing
import os
from typing import Callable, Iterable

from onnxport_fuzz.expected import expected_for
from onnxport_fuzz.generator import generate
from onnxport_fuzz.program import Program
from onnxport_fuzz.runner import EAGER_FAILS, FAILURES, Outcome, run

REGENERATE = 5  # tries with another sub-seed when torch itself refuses the program


@dataclasses.dataclass
class CaseResult:
    index: int
    kind: str
    detail: str
    ops: list[str]
    expected: str | None  # the name of the expected-failure entry it matches
    program: Program

    @property
    def unexpected(self) -> bool:
        return self.kind in FAILURES and self.expected is None


def run_case(seed: int, index: int, opset: int) -> CaseResult:
    for attempt in range(REGENERATE):
        program = generate(seed, index if attempt == 0 else index + 1_000_003 * attempt)
        outcome = run(program, opset)
        if outcome.kind != EAGER_FAILS:
            break
    entry = expected_for(program) if outcome.kind in FAILURES else None
    return CaseResult(index, outcome.kind, outcome.detail, program.ops,
                      entry.name if entry else None, program)


def _worker(job: tuple[int, int, int]) -> CaseResult:
    return run_case(*job)


def run_cases(seed: int, indices: Iterable[int], opset: int, jobs: int = 1,
              on_result: Callable[[CaseResult], None] | None = None) -> list[CaseResult]:
    work = [(seed, i, opset) for i in indices]
    results = []
    if jobs <= 1:
        iterator = map(_worker, work)
        pool = None
    else:
        pool = multiprocessing.get_context("spawn").Pool(jobs, initializer=_quiet_worker)
        iterator = pool.imap(_worker, work, chunksize=4)
    try:
        for result in iterator:
            results.append(result)
            if on_result:
                on_result(result)
    finally:
        if pool is not None:
            pool.close()
            pool.join()
    return results


def _quiet_worker() -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch
    torch.set_num_threads(1)


def summarize(results: list[CaseResult]) -> tuple[collections.Counter, dict[str, collections.Counter]]:
    kinds = collections.Counter()
    per_op: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in results:
        label = r.kind if r.kind not in FAILURES else (
            f"{r.kind} (expected)" if r.expected else r.kind)
        kinds[label] += 1
        for name in set(r.ops):
            per_op[name]["cases"] += 1
            per_op[name][label] += 1
    return kinds, per_op


def reduce_and_write(result: CaseResult, seed: int, opset: int, out: str,
                     budget: int = 60) -> tuple[str, Program, Outcome]:
    from onnxport_fuzz.reducer import reduce, reproducer_source

    reduced = reduce(result.program, opset, result.kind, budget=budget)
    outcome = run(reduced, opset)
    if outcome.kind != result.kind:  # the budget ran out mid-way; keep the original
        reduced, outcome = result.program, Outcome(result.kind, result.detail)
    os.makedirs(out, exist_ok=True)
    name = f"{result.kind}-{'-'.join(dict.fromkeys(reduced.ops)) or 'input'}-opset{opset}-seed{seed}-case{result.index}.py"
    path = os.path.join(out, name)
    with open(path, "w") as f:
        f.write(reproducer_source(reduced, opset, outcome,
                                  f"Found by `PYTHONPATH=tools python -m onnxport_fuzz --seed {seed}` (case {result.index})."))
    return path, reduced, outcome
