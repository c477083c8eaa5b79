"""benchmarks/fuzz_dynamic.py's fixed sample: random chains of shape ops over inputs whose
every axis is dynamic, on both paths, from examples of sizes 3 to 5 and of 1 to 3 (a batch of
1), with the first op family and with both (``--more-ops``), traced and scripted
(``--scripted``). None may be silently wrong; the full runs live in the script."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "fuzz_dynamic.py"


@pytest.fixture(scope="module")
def fuzz():
    spec = importlib.util.spec_from_file_location("fuzz_dynamic", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["fuzz_dynamic"] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules["fuzz_dynamic"]


@pytest.mark.parametrize("small", [False, True], ids=["sizes 3 to 5", "sizes 1 to 3"])
@pytest.mark.parametrize("block", range(4))
def test_no_silent_mismatch(fuzz, small, block):
    _check_block(fuzz, (1000 if small else 0) + 8 * block, small, more=False)


@pytest.mark.parametrize("small", [False, True], ids=["sizes 3 to 5", "sizes 1 to 3"])
@pytest.mark.parametrize("block", range(2))
def test_no_silent_mismatch_with_the_second_op_family(fuzz, small, block):
    _check_block(fuzz, (23000 if small else 22000) + 8 * block, small, more=True)


@pytest.mark.parametrize("small", [False, True], ids=["sizes 3 to 5", "sizes 1 to 3"])
def test_no_silent_mismatch_scripted(fuzz, small, tmp_path):
    # (the programs written out as TorchScript source, compiled by torch.jit.script)
    _check_block(fuzz, 1000 if small else 0, small, more=True, script_folder=str(tmp_path))


def _check_block(fuzz, first, small, more, script_folder=None):
    mismatches, checked = [], 0
    for seed in range(first, first + 8):
        result = fuzz.check(seed, small, more=more, script_folder=script_folder)
        if result is None:
            continue
        checked += 1
        mismatches += [f"{seed} {' -> '.join(result['steps'])} ({path}): {verdict}"
                       for path, verdict in result["verdicts"].items()
                       if verdict.startswith("MISMATCH")]
    assert checked >= 4  # (the sample runs: programs torch refuses are no test)
    assert not mismatches, "\n".join(mismatches)
