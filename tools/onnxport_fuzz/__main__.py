"""``PYTHONPATH=tools python -m onnxport_fuzz --cases N --seed S --opset 18 [--out DIR]
[--jobs J]``: a fuzz campaign with a summary; exits 1 when a failure is not in the
expected-failures table."""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys
import time

from onnxport_fuzz.campaign import reduce_and_write, run_cases, summarize
from onnxport_fuzz.expected import expected_for
from onnxport_fuzz.runner import CLEAR_ERROR, ILL_CONDITIONED


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m onnxport_fuzz", description=__doc__)
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0, help="index of the first case")
    parser.add_argument("--opset", type=int, default=18)
    parser.add_argument("--out", default="fuzz-reproducers",
                        help="folder for the reduced reproducers")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--max-reduce", type=int, default=20,
                        help="reduce at most this many failures (distinct op sets first)")
    parser.add_argument("--reduce-expected", action="store_true",
                        help="also write reproducers for failures in the expected table")
    options = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch
    torch.set_num_threads(1)

    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 150)
    started = time.perf_counter()
    indices = range(options.start, options.start + options.cases)
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(f"fuzzing at opset {options.opset}", total=options.cases)
        results = run_cases(options.seed, indices, options.opset, options.jobs,
                            on_result=lambda r: progress.advance(task))
    elapsed = time.perf_counter() - started

    # Reduce failures, distinct op sets first, and re-check the smaller program against the
    # table: a failure whose reduction is a known pattern is that known failure.
    to_reduce = [r for r in results if r.unexpected or (options.reduce_expected and r.expected)]
    seen, firsts, rest = set(), [], []
    for r in to_reduce:
        key = (r.kind, tuple(sorted(set(r.ops))))
        (rest if key in seen else firsts).append(r)
        seen.add(key)
    ordered = firsts + rest
    written, distinct = [], set()
    for r in ordered[:options.max_reduce]:
        path, reduced, outcome = reduce_and_write(r, options.seed, options.opset, options.out)
        entry = expected_for(reduced)
        if r.unexpected and entry is not None:
            r.expected = entry.name
        key = (outcome.kind, tuple(reduced.ops))
        if key in distinct:
            os.remove(path)
            continue
        distinct.add(key)
        written.append((r, path, reduced, outcome))

    kinds, per_op = summarize(results)
    console.print(f"onnxport fuzz: {options.cases} cases, seed {options.seed}, "
                  f"opset {options.opset}, {elapsed:.0f} s", highlight=False)
    table = Table()
    table.add_column("outcome")
    table.add_column("cases", justify="right")
    for kind, count in sorted(kinds.items(), key=lambda kv: -kv[1]):
        table.add_row(kind, str(count))
    console.print(table)

    ops = Table(title="per op (cases containing it)")
    columns = sorted({k for c in per_op.values() for k in c} - {"cases"})
    ops.add_column("op")
    ops.add_column("cases", justify="right")
    for column in columns:
        ops.add_column(column, justify="right")
    for name, counts in sorted(per_op.items()):
        ops.add_row(name, str(counts["cases"]), *[str(counts.get(c, "")) for c in columns])
    console.print(ops)

    known = collections.Counter(r.expected for r in results if r.expected)
    if known:
        table = Table(title="expected failures (tools/onnxport_fuzz/expected.py), by entry")
        table.add_column("cases", justify="right")
        table.add_column("entry")
        for name, count in known.most_common():
            table.add_row(str(count), name)
        console.print(table)

    errors = collections.Counter(_first_line(r.detail) for r in results if r.kind == CLEAR_ERROR)
    if errors:
        table = Table(title="clear errors (onnxport's own), by message")
        table.add_column("cases", justify="right")
        table.add_column("message")
        for message, count in errors.most_common(15):
            table.add_row(str(count), message)
        console.print(table)

    for kind in (CLEAR_ERROR, ILL_CONDITIONED):  # a few, to look at by hand
        cases = [r for r in results if r.kind == kind]
        for r in cases[:10]:
            console.print(f"{kind} case {r.index}: {' '.join(r.ops)}: {_first_line(r.detail)}",
                          highlight=False)

    unexpected = [r for r in results if r.unexpected]
    for r in unexpected:
        console.print(f"[red]{r.kind}[/red] case {r.index}: {' '.join(r.ops)}: "
                      f"{r.detail.splitlines()[0] if r.detail else ''}", highlight=False)
    for r, path, reduced, outcome in written:
        console.print(f"reproducer ({outcome.kind}, {', '.join(reduced.ops)}): {path}",
                      highlight=False)
    console.print(f"{len(unexpected)} unexpected failure(s) in {options.cases} cases")
    return 1 if unexpected else 0


def _first_line(detail: str) -> str:
    # The op's name and the error, without the node's place (which differs per case).
    line = detail.splitlines()[0] if detail else ""
    return re.sub(r" \(node .*?\)", "", re.sub(r"<fuzz program>:\d+", "", line))[:140]


if __name__ == "__main__":
    sys.exit(main())
