"""Expected failures of the OpInfo conformance suite at opset 18: one line per (op, dtype) with
its reason. tests/conformance fails when a listed pair passes, so the table only shrinks.
Regenerate the lines with benchmarks/op_conformance.py --write-expected (reasons kept)."""

EXPECTED_FAILURES: dict[tuple[str, str], str] = {
}
