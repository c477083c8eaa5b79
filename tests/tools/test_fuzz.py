"""The differential fuzzer in CI: a fixed set of random programs must match eager (or fail in a
way the expected-failures table names), and every entry of that table must still fail."""

from __future__ import annotations

import functools
import os
import runpy
import subprocess
import sys

import pytest
import torch

from onnxport_fuzz.campaign import run_case
from onnxport_fuzz.expected import TABLE
from onnxport_fuzz.generator import generate
from onnxport_fuzz.program import InputSpec, Line, Program
from onnxport_fuzz.reducer import reduce, reproducer_source
from onnxport_fuzz.runner import FAILURES, MISMATCH, PASS, Outcome, run

SEED = 0
# Cases per opset, in chunks so that a failure names a small range; the three opsets of the
# issue each get their own slice of the seed's cases.
CHUNK = 50
CHUNKS = {17: [0, 1], 18: [2, 3], 23: [4, 5]}


@pytest.mark.parametrize("opset,chunk", [(o, c) for o, cs in CHUNKS.items() for c in cs])
def test_fuzz_cases_match_eager_or_are_expected(opset, chunk):
    unexpected = []
    for index in range(chunk * CHUNK, (chunk + 1) * CHUNK):
        result = run_case(SEED, index, opset)
        if result.unexpected:
            unexpected.append(f"case {index} ({result.kind}): {result.ops}\n{result.detail}\n"
                              f"{result.program.forward_source()}")
    assert not unexpected, (
        f"{len(unexpected)} unexpected failure(s); reproduce and reduce with `python -m "
        f"onnxport_fuzz --seed {SEED} --start <case> --cases 1 --opset {opset}`:\n"
        + "\n".join(unexpected))


@pytest.mark.parametrize("entry", [e for e in TABLE if e.witness is not None],
                         ids=lambda e: e.name)
def test_expected_failures_still_fail(entry):
    """Strict xfail: a witness that passes means the bug is fixed and its entry must go."""
    for opset in entry.witness_opsets:
        outcome = run(entry.witness, opset)
        assert outcome.kind != PASS, (
            f"{entry.name} now passes at opset {opset}: remove it from "
            "tools/onnxport_fuzz/expected.py (the table only shrinks)")
        assert entry.matches(entry.witness), f"{entry.name}'s pattern does not match its witness"


def test_generation_is_deterministic_per_seed_and_index():
    a, b = generate(7, 11), generate(7, 11)
    assert a.forward_source() == b.forward_source() and a.inputs == b.inputs
    assert all(torch.equal(x, y) for x, y in zip(a.make_inputs(), b.make_inputs()))
    assert generate(7, 12).forward_source() != a.forward_source() or generate(8, 11).inputs != a.inputs


def test_the_pool_has_the_ops_of_the_issue():
    from onnxport_fuzz.ops import OPS

    assert len(OPS) >= 60
    sources = "\n".join(generate(0, i).forward_source() for i in range(300))
    for name in ("torch.roll", "F.interpolate", "scaled_dot_product_attention", "torch.cumsum",
                 "torch.gather", "torch.scatter", "torch.index_select", "F.rms_norm",
                 "F.group_norm", "F.instance_norm", "F.batch_norm", "F.layer_norm",
                 "ceil_mode=True", "torch.where", "torch.split", "torch.chunk", "torch.stack",
                 "F.log_softmax", "torch.var", "torch.std", "torch.argmax", "torch.prod"):
        assert name in sources, f"{name} never generated in 300 cases"


def _program(expr: str, dims=(3, 4), dtype="float32", mode="static", symbols=None) -> Program:
    return Program([InputSpec("x0", dims, dtype, "normal", 5)], [],
                   [Line("v0", "test", expr)], ["v0"], symbols or {}, mode)


def test_a_wrong_translation_is_a_mismatch(monkeypatch):
    """The runner really compares: a translation made wrong on purpose is caught."""
    from onnxport.translate import default_registry
    from onnxport.translate.registry import Translation

    assert run(_program("torch.neg(x0)"), 18).kind == PASS
    registry = default_registry()
    wrong = Translation("aten::neg", lambda g, self: g.op("Identity", self), 1)
    monkeypatch.setitem(registry._translations, "aten::neg", [wrong])
    assert run(_program("torch.neg(x0)"), 18).kind == MISMATCH


def test_index_outputs_are_compared_by_the_values_they_point_at(monkeypatch):
    """atan2(x, x) is pi/4 everywhere in eager; ONNX Runtime's Atan differs by 1 ulp between
    its vector lanes and its scalar tail, so its argmax picks another of the tied elements.
    That is not a wrong model; an argmax that points at a smaller value is."""
    from onnxport.translate import default_registry
    from onnxport.translate.registry import Translation

    ties = _program("torch.max(torch.atan2(x0, x0), -2, keepdim=True)[1]", dims=(3, 2))
    ties.inputs[0].fill = "positive"
    assert run(ties, 18).kind == PASS
    for expr in ("torch.argmax(x0, 1, keepdim=False)", "torch.topk(x0, 2, dim=-1)[1]",
                 "torch.argmax(x0)", "torch.max(x0, 0, keepdim=True)[1]"):
        assert run(_program(expr), 18).kind == PASS, expr
    registry = default_registry()

    def negated(g, self, *args, original, **kwargs):
        flipped = g.op("Neg", self)
        flipped.shape, flipped.dtype = self.shape, self.dtype
        return original(g, flipped, *args, **kwargs)

    for target in ("aten::argmax", "aten::max"):  # made to pick the smallest on purpose
        wrong = [Translation(target, functools.partial(negated, original=t.function),
                             t.since_opset) for t in registry._translations[target]]
        monkeypatch.setitem(registry._translations, target, wrong)
    for expr in ("torch.argmax(x0, 1, keepdim=False)", "torch.argmax(x0)",
                 "torch.max(x0, 0, keepdim=True)[1]"):
        outcome = run(_program(expr), 18)
        assert outcome.kind == MISMATCH and "values they point at" in outcome.detail, expr


def test_reducer_shrinks_a_failure_and_writes_a_runnable_reproducer(tmp_path, capsys):
    # A known failure that is not fixed (the table's entries leave it once fixed).
    entry = next(e for e in TABLE if e.name == "max-pool-with-nan")
    witness = entry.witness.copy()
    # Noise around the failing op, which the reducer must drop.
    witness.lines = [Line("v0", "relu", "F.relu(x0)"),
                     Line("v1", "max_pool", "F.max_pool2d(v0, 2, stride=1)"),
                     Line("v2", "neg", "torch.neg(x0)"), Line("v3", "add", "torch.add(v1, 1.0)")]
    witness.outputs = ["v2", "v3"]
    kind = run(witness, 18).kind
    assert kind in FAILURES
    reduced = reduce(witness, 18, kind)
    assert [line.op for line in reduced.lines] == ["max_pool"] and len(reduced.outputs) == 1
    path = tmp_path / "repro.py"
    path.write_text(reproducer_source(reduced, 18, Outcome(kind, "max_pool")))
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=300)
    assert done.returncode != 0 and "AssertionError" in done.stderr, done.stderr[-2000:]
    # The same reproducer on a program that works says so (in this process: a second
    # interpreter costs seconds).
    path.write_text(reproducer_source(_program("torch.neg(x0)"), 18, Outcome(PASS)))
    runpy.run_path(str(path))
    assert "matches eager" in capsys.readouterr().out


def test_cli_summary_and_exit_code(tmp_path, capsys, monkeypatch):
    from onnxport_fuzz import __main__ as cli
    from onnxport_fuzz import campaign

    assert cli.main(["--cases", "3", "--seed", "1", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "3 cases, seed 1, opset 18" in out and "0 unexpected failure(s)" in out
    # An unexpected failure makes the run fail and leaves a reproducer behind.
    entry = next(e for e in TABLE if e.name == "max-pool-with-nan")
    monkeypatch.setattr(campaign, "generate", lambda seed, index: entry.witness.copy())
    monkeypatch.setattr(campaign, "expected_for", lambda program: None)
    monkeypatch.setattr(cli, "expected_for", lambda program: None)
    assert cli.main(["--cases", "1", "--out", str(tmp_path)]) == 1
    assert list(tmp_path.glob("mismatch-witness-opset18-seed0-case0.py"))


def test_nan_patterns_match_nan_made_in_the_graph_and_only_where_it_reaches_the_op():
    entry = next(e for e in TABLE if e.name == "max-pool-with-nan")
    made = _program("F.max_pool2d(torch.sqrt(x0), 2, stride=1)", dims=(1, 2, 4, 5))
    assert run(made, 18).kind == MISMATCH and entry.matches(made)
    # The same pool over values without NaN (abs before sqrt), or a NaN made after the pool,
    # is not the known failure.
    assert not entry.matches(_program("F.max_pool2d(torch.sqrt(x0.abs()), 2, stride=1)",
                                      dims=(1, 2, 4, 5)))
    after = _program("torch.sqrt(F.max_pool2d(x0, 2, stride=1))", dims=(1, 2, 4, 5))
    assert not entry.matches(after) and run(after, 18).kind == PASS
    sdpa = next(e for e in TABLE if e.name == "sdpa-with-nan-inputs")
    assert sdpa.matches(_program("F.scaled_dot_product_attention(torch.log(x0), x0, x0)",
                                 dims=(2, 3, 4)))
    assert not sdpa.matches(_program("F.scaled_dot_product_attention(x0, x0, x0)",
                                     dims=(2, 3, 4)))
