"""The shape of the house (../shared/STYLE.md) as checks on src/: imports follow the pipeline,
the installed package runs no generated source, and modules stay readable in one sitting."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "onnxport"
MAX_MODULE_LINES = 800
# Modules over MAX_MODULE_LINES today, with their length then: each may only shrink, and leaves
# the list when it is short enough. (None since capture/torchscript.py became a package.)
LONG_MODULES: dict[str, int] = {}
# Stages and what they never import: translation and the passes know nothing of capture;
# verification and diagnostics are used by every stage and depend on none of them, nor on a
# front door. compat/ (the torch.onnx compatibility layer) sits on translation: it may import
# translate/, never the other way round (users' symbolics reach translation as the adapted
# callables compat registers), and it knows nothing of capture or a front door.
_FRONT_DOORS = ["onnxport.api", "onnxport.compat.dynamo_api", "onnxport.utils", "onnxport.cli"]
_STAGES = ["onnxport.capture", "onnxport.translate", "onnxport.passes", "onnxport.program"]
FORBIDDEN_IMPORTS = {
    "translate": ["onnxport.capture", "onnxport.compat", *_FRONT_DOORS],
    "compat": ["onnxport.capture", *_FRONT_DOORS],
    "passes": ["onnxport.capture", "onnxport.translate", *_FRONT_DOORS],
    "verification": _STAGES + _FRONT_DOORS,
    "diagnostics": _STAGES + _FRONT_DOORS + ["onnxport.pipeline", "onnxport._arguments"],
}


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _name(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def _imported(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a function, as absolute names
    (``from onnxport import api`` counts as ``onnxport.api``)."""
    tree = ast.parse(path.read_text(), str(path))
    package = ".".join(path.relative_to(SRC).with_suffix("").parts[:-1])
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


# dynamo_export is torch.onnx's compatibility surface (issue 19 puts it in compat/) but a front
# door over the pipeline, not a piece translation builds on: it is held to the front doors'
# rules (short functions), not compat's.
FRONT_DOOR_FILES = {"compat/dynamo_api.py"}


@pytest.mark.parametrize("stage", sorted(FORBIDDEN_IMPORTS))
def test_no_import_against_the_pipeline(stage):
    wrong = []
    for path in _modules():
        if _name(path).split("/")[0] != stage or _name(path) in FRONT_DOOR_FILES:
            continue
        for name in sorted(_imported(path)):
            if any(name == f or name.startswith(f + ".") for f in FORBIDDEN_IMPORTS[stage]):
                wrong.append(f"{_name(path)} imports {name}")
    assert not wrong, "\n".join(wrong)


def test_no_exec_or_eval_in_the_package():
    # Test tooling that runs generated source (the fuzzer, the conformance runner) lives in
    # tools/, outside the installed package.
    found = [f"{_name(path)}:{node.lineno} {node.func.id}()"
             for path in _modules() for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
             and node.func.id in ("exec", "eval")]
    assert not found, found


def test_modules_are_short():
    lengths = {_name(path): len(path.read_text().splitlines()) for path in _modules()}
    too_long = {name: n for name, n in lengths.items()
                if n > MAX_MODULE_LINES and n > LONG_MODULES.get(name, 0)}
    assert not too_long, (f"modules over {MAX_MODULE_LINES} lines (split them, or if one is "
                          f"on LONG_MODULES, make it no longer): {too_long}")
    # An entry that is short enough now, or whose module is gone, leaves the list.
    stale = {name for name in LONG_MODULES if lengths.get(name, 0) <= MAX_MODULE_LINES}
    assert not stale, f"remove from LONG_MODULES: {sorted(stale)}"


def test_the_torchscript_package_imports_no_private_name_of_another_capture_module():
    private = []
    for path in (PACKAGE / "capture" / "torchscript").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and \
                    node.module.startswith("onnxport.capture.") and \
                    not node.module.startswith("onnxport.capture.torchscript"):
                private += [f"{path.name}: {node.module}.{alias.name}" for alias in node.names
                            if alias.name.startswith("_")]
    assert not private, private


# The entry points of the stages, by the package that defines them. Outside that package, only
# the pipeline calls them (every front door builds a plan and runs it); ONNXProgram.optimize()
# is torch.onnx's method that optimizes a finished program again.
STAGE_ENTRY_POINTS = {
    "capture": {"capture_model", "capture_torch_export", "capture_tracing"},
    "translate": {"translate_graph", "missing_translations"},
    "passes": {"run_preset", "optimize", "optimize_without_weights"},
}
STAGE_CALLERS = {"pipeline.py", "program.py:run_preset"}


def _called_names(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            function = node.func
            if isinstance(function, ast.Name):
                names.add(function.id)
            elif isinstance(function, ast.Attribute):
                names.add(function.attr)
    return names


def test_only_the_pipeline_calls_the_stages():
    wrong = []
    for path in _modules():
        name = _name(path)
        called = _called_names(ast.parse(path.read_text()))
        for stage, entry_points in STAGE_ENTRY_POINTS.items():
            if name.split("/")[0] == stage or name in STAGE_CALLERS:
                continue
            for function in sorted(called & entry_points):
                if f"{name}:{function}" not in STAGE_CALLERS:
                    wrong.append(f"{name} calls {stage}'s {function}")
    assert not wrong, "\n".join(wrong)


MAX_FUNCTION_LINES = 80
# The front doors, the plan and its runner: read in one sitting, a function at a time.
SHORT_FUNCTION_MODULES = ["api.py", "pipeline.py", "_arguments.py", "compat/dynamo_api.py",
                          "utils.py", "verification/__init__.py", "diagnostics/session.py"]


def test_the_pipeline_and_its_front_doors_have_short_functions():
    long = [f"{name}: {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for name in SHORT_FUNCTION_MODULES
            for node in ast.walk(ast.parse((PACKAGE / name).read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, long
