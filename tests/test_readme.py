"""The README's code runs as written. Every ```python, ```bash and ```sh block of README.md, and
every ```python block of docs/guide.md, is run from this checkout, so a block that breaks
fails the test.

The rules:
- Each page's blocks run in order in one new temporary folder, as a reader following the page
  does: its Python blocks in one interpreter (names carry over from block to block, as in one
  session), its shell blocks with ``bash -e -o pipefail`` in the same folder.
- What runs is this checkout: ``python`` and ``onnxport`` in a shell block are this test's
  interpreter (``python -m onnxport`` for ``onnxport``), with the checkout's ``src`` first on
  ``PYTHONPATH``.
- A shell line is skipped only when it starts with one of SKIPPED_COMMANDS, for the reason given
  there; every other line runs. ``test_only_setup_lines_are_skipped`` keeps the list honest.
- docs/guide.md's shell blocks are not run: they are the fuzzer and the op-conformance and
  benchmark runs, which take minutes to hours. The commands in the README's "Why onnxport"
  table are benchmarks too, written inline, not as blocks.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SKIPPED_COMMANDS = {
    "git clone ": "the test runs from the checkout that the line would clone",
    "cd onnxport": "the folder of that clone: the test runs in a temporary folder instead",
    "pip install ": "the test environment is installed already, and a test must not change it",
    "pytest": "it runs the whole suite, which runs this test again",
}
# (page, the block languages that run)
PAGES = [("README.md", ("python", "bash", "sh")), ("docs/guide.md", ("python",))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)

# Runs one page's blocks: Python blocks exec'd in one namespace, shell blocks through bash.
DRIVER = r'''
import json, linecache, os, subprocess, sys, traceback
blocks = json.load(open(sys.argv[1]))
namespace = {"__name__": "__main__"}
prelude = ('onnxport() { "$ONNXPORT_PYTHON" -m onnxport "$@"; }\n'
           'python() { "$ONNXPORT_PYTHON" "$@"; }\n')
for block in blocks:
    where = f"{block['page']}, the {block['language']} block at line {block['line']}"
    print(f"== {where}", flush=True)
    if block["language"] == "python":
        # Its source known by its name, as a file's is: torch.jit.script reads it.
        lines = block["code"].splitlines(keepends=True)
        linecache.cache[where] = (len(block["code"]), None, lines, where)
        try:
            exec(compile(block["code"], where, "exec"), namespace)
        except BaseException:
            traceback.print_exc()
            print(f"FAILED: {where}", flush=True)
            sys.exit(1)
    else:
        result = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", prelude + block["code"]])
        if result.returncode != 0:
            print(f"FAILED: {where} (exit {result.returncode})", flush=True)
            sys.exit(1)
print("ALL BLOCKS RAN", flush=True)
'''


def code_blocks(page: str) -> list[dict]:
    """The page's fenced blocks: language, code and the line of the opening fence."""
    text = (ROOT / page).read_text()
    return [{"page": page, "language": match.group(1), "code": match.group(2),
             "line": text.count("\n", 0, match.start()) + 1}
            for match in FENCE.finditer(text)]


def runnable(code: str) -> tuple[str, list[str]]:
    """A shell block without the lines SKIPPED_COMMANDS names, and those lines."""
    kept, skipped = [], []
    for line in code.splitlines():
        if any(line.strip().startswith(command) for command in SKIPPED_COMMANDS):
            skipped.append(line.strip())
        else:
            kept.append(line)
    return "\n".join(kept) + "\n", skipped


def blocks_to_run(page: str, languages: tuple[str, ...]) -> list[dict]:
    blocks = []
    for block in code_blocks(page):
        if block["language"] not in languages:
            continue
        if block["language"] != "python":
            block["code"], _ = runnable(block["code"])
        blocks.append(block)
    return blocks


@pytest.mark.parametrize("page, languages", PAGES, ids=[page for page, _ in PAGES])
def test_every_block_runs_as_written(page, languages, tmp_path):
    blocks = blocks_to_run(page, languages)
    assert blocks, f"{page} has no block to run"
    (tmp_path / "blocks.json").write_text(json.dumps(blocks))
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    folder = tmp_path / "reader"
    folder.mkdir()
    env = dict(os.environ, ONNXPORT_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, str(driver), str(tmp_path / "blocks.json")],
                            cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "ALL BLOCKS RAN" in result.stdout, output[-6000:]


def test_only_setup_lines_are_skipped():
    """The README's skipped lines are exactly its clone, install and test-suite lines, and the
    quick start's export itself is kept."""
    skipped = []
    for block in code_blocks("README.md"):
        if block["language"] in ("bash", "sh"):
            skipped += runnable(block["code"])[1]
    assert skipped == ["git clone <repo-url> onnxport", "cd onnxport",
                       'pip install -e ".[models]"', 'pip install -e ".[test]"', "pytest -n 2"]
    quick_start = [b for b in code_blocks("README.md") if "git clone" in b["code"]][0]
    assert "onnxport export torchvision:resnet18" in runnable(quick_start["code"])[0]


def test_the_readme_shows_the_kinds_of_blocks_the_test_runs():
    languages = [block["language"] for block in code_blocks("README.md")]
    assert languages.count("python") >= 2 and languages.count("bash") >= 3
    assert set(languages) <= {"python", "bash", "sh"}, languages  # no block goes unrun


@pytest.mark.parametrize("page", ["README.md", "docs/guide.md", "docs/cli.md"])
def test_links_stay_in_the_repository(page):
    """Relative links name files of this repository (the README is read on other sites and
    in clones alone); no link leaves it."""
    text = (ROOT / page).read_text()
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        assert not re.match(r"[a-z]+:", target), f"{page} links outside the repository: {target}"
        path = (ROOT / page).parent / target.split("#")[0]
        assert path.resolve().is_relative_to(ROOT), f"{page}: {target} leaves the repository"
        assert path.exists(), f"{page}: {target} does not exist"


# -- the troubleshooting section quotes the messages users see ------------------------------
def _unsupported_op(untranslated):
    import torch

    import onnxport

    class QR(torch.nn.Module):
        def forward(self, x):
            return torch.geqrf(x)[0]

    onnxport.export(QR(), (torch.randn(3, 3),))


def _capture(untranslated):
    import torch

    import onnxport

    class Branch(torch.nn.Module):
        def forward(self, x):
            return x * 2 if x.sum() > 0 else x

    onnxport.export(Branch(), (torch.randn(3),), dynamo=True)


def _verification(untranslated):
    import torch

    import onnxport

    class Noisy(torch.nn.Module):
        def forward(self, x):
            return x + torch.rand_like(x)

    onnxport.export(Noisy(), (torch.randn(2, 3),), verify=True)


def _dynamic_axes(untranslated):
    import warnings

    import torch

    import onnxport

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        onnxport.export(torch.nn.Linear(3, 2), (torch.randn(2, 3),), input_names=["x"],
                        dynamic_axes={"inp": {0: "batch"}})


def _inputs_do_not_fit(untranslated):
    import torch

    import onnxport

    onnxport.export(torch.nn.Linear(4, 2), (torch.randn(2, 5),))


@pytest.mark.parametrize("number, quoted, cause", [
    (1, "unsupported op(s) at opset 18: aten::", _unsupported_op),
    (2, "torch.export could not capture the model", _capture),
    (3, "ONNX Runtime's outputs differ from PyTorch's (rtol 0.001, atol 0.0001)", _verification),
    (4, "which is neither an input nor an output of this export", _dynamic_axes),
    (5, "the example inputs do not fit the model: it fails on them in PyTorch itself (eager)",
     _inputs_do_not_fit),
])
def test_troubleshooting_quotes_the_real_messages(number, quoted, cause, untranslated):
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Troubleshooting"):readme.index("## Supported versions")]
    heading = re.search(rf"^\*\*{number}\. `(.*?)`", section, re.M | re.S).group(1)
    assert quoted in " ".join(heading.split()), heading
    with pytest.raises(Exception) as raised:
        cause(untranslated)
    message = " ".join(str(raised.value).split())  # the first line and the report below it
    assert quoted.split(" aten::")[0] in message, message
    if number == 4:
        assert "Its inputs are x" in message
