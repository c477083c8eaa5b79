"""Runs the cases of one op for several exporters and opsets, and summarizes results: an op
passes when every testable sample in every counted dtype passes."""

from __future__ import annotations

from onnxport_conformance import runner, samples

# The worst outcome of a (op, dtype) names its status.
SEVERITY = {runner.PASS: 0, runner.CLEAR_ERROR: 1, runner.MISMATCH: 2, runner.CRASH: 3}


def run_op(op: str, exporters=("onnxport",), opsets=(18,), dtypes=samples.COUNTED_DTYPES,
           limit: int = samples.SAMPLES_PER_DTYPE) -> dict:
    """{exporter: {opset: {dtype: [[index, kind, detail], ...]}}} for the samples of ``op``."""
    result: dict = {e: {str(o): {} for o in opsets} for e in exporters}
    for dtype in dtypes:
        for case in samples.cases(op, dtype, limit):
            try:
                untestable = runner.eager_problem(case)
            except Exception as error:  # pragma: no cover - eager_problem catches
                untestable = str(error)
            for exporter in exporters:
                for opset in opsets:
                    outcome = (runner.Outcome(runner.UNTESTABLE, untestable) if untestable
                               else runner.run(case, exporter, opset))
                    result[exporter][str(opset)].setdefault(dtype, []).append(
                        [case.index, outcome.kind, outcome.detail])
    return result


def dtype_status(entries: list) -> tuple[str, str] | None:
    """(status, detail of the worst sample) of one (op, dtype), None when nothing is testable."""
    tested = [e for e in entries if e[1] != runner.UNTESTABLE]
    if not tested:
        return None
    worst = max(tested, key=lambda e: SEVERITY.get(e[1], 3))
    return worst[1], worst[2]


def op_status(by_dtype: dict, dtypes=samples.COUNTED_DTYPES) -> str | None:
    """'pass' when every testable (dtype, sample) passes, the worst failure otherwise; None
    when the op has no testable sample."""
    statuses = [dtype_status(by_dtype.get(d, [])) for d in dtypes]
    statuses = [s for s in statuses if s is not None]
    if not statuses:
        return None
    return max((s[0] for s in statuses), key=lambda k: SEVERITY.get(k, 3))


def summary(results: dict, exporter: str, opset: int,
            dtypes=samples.COUNTED_DTYPES) -> dict:
    """Op-level counts for one exporter at one opset, over ``dtypes``."""
    counts = {"testable": 0, **{k: 0 for k in SEVERITY}}
    passing = []
    for op, per_exporter in results.items():
        status = op_status(per_exporter.get(exporter, {}).get(str(opset), {}), dtypes)
        if status is None:
            continue
        counts["testable"] += 1
        counts[status] = counts.get(status, 0) + 1
        if status == runner.PASS:
            passing.append(op)
    counts["passing_ops"] = sorted(passing)
    return counts
