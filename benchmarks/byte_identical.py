"""Check that two onnxport source trees export the same bytes: the zoo models of
``export_bench.py``, with static and with dynamic shapes, on the default path and with
``dynamo=False``, each file (model and external data) compared by sha256.

Each tree exports in its own process with ``PYTHONPATH`` set to it, so the two never share
imported modules. A refactoring that must not change what an export produces (issue 19) runs it
before landing:

    git archive <base> | tar -x -C /tmp/onnxport-old
    python benchmarks/byte_identical.py --old-src /tmp/onnxport-old/src --new-src src
    python benchmarks/byte_identical.py --old-src ... --new-src src --all   # the whole zoo

Exit status 0 when every export matches (an export that fails in both trees with the same
error counts as matching), 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODELS = ["mlp", "resnet18", "bert"]  # quick: one of each kind, a minute per tree
OPSET = 18  # export_bench.py's opset
SHAPES = ["static", "dynamic"]
PATHS = {"dynamo": True, "torchscript": False}


def all_model_names() -> list[str]:
    sys.path.insert(0, str(ROOT / "tests"))
    import model_zoo

    return ["mlp", *model_zoo.TORCHVISION_MODELS, *model_zoo.TRANSFORMERS_MODELS]


# -- in the worker process, with one tree on PYTHONPATH -------------------------------------
def export_one(name: str, shapes: str, path: str, folder: Path) -> None:
    """Export zoo model ``name`` into ``folder`` (model.onnx and any external data)."""
    import model_zoo
    import onnxport

    model, args, kwargs = model_zoo.build(name)
    options = {}
    if shapes == "dynamic":
        parameters = [p for p, spec in inspect.signature(model.forward).parameters.items()
                      if spec.kind in (spec.POSITIONAL_OR_KEYWORD, spec.KEYWORD_ONLY)]
        options["dynamic_axes"] = model_zoo.dynamic_axes_for(name, args, kwargs, parameters)
    folder.mkdir(parents=True, exist_ok=True)
    onnxport.export(model, args, f=str(folder / "model.onnx"), kwargs=kwargs,
                    opset_version=OPSET, dynamo=PATHS[path], **options)


def run_worker(source: str, models: list[str], output: Path, result_path: str) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    warnings.simplefilter("ignore")  # tracing and dynamic-dimension warnings: not compared
    import onnxport

    expected = Path(source).resolve()
    if expected not in Path(onnxport.__file__).resolve().parents:
        raise SystemExit(f"onnxport imported from {onnxport.__file__}, not from {expected}")
    errors = {}
    for name in models:
        for shapes in SHAPES:
            for path in PATHS:
                key = f"{name}/{shapes}/{path}"
                try:
                    export_one(name, shapes, path, output / key)
                except Exception as error:  # noqa: BLE001 - the other tree must fail alike
                    errors[key] = f"{type(error).__name__}: {str(error).splitlines()[:1]}"
    Path(result_path).write_text(json.dumps(errors))


# -- in the parent process -------------------------------------------------------------------
def export_tree(source: str, models: list[str], output: Path) -> dict[str, str]:
    """Export ``models`` with the onnxport of ``source`` (the folder holding ``onnxport/``);
    returns the failed exports' errors."""
    result = output / "errors.json"
    source = str(Path(source).resolve())
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([source, str(ROOT / "tests")]))
    subprocess.run([sys.executable, __file__, "--worker", "--src", source, "--models",
                    ",".join(models), "--output", str(output / "files"),
                    "--result", str(result)], env=environment, check=True,
                   cwd=str(output))
    return json.loads(result.read_text())


def digests(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder``, by its path relative to ``folder``."""
    return {str(file.relative_to(folder)): hashlib.sha256(file.read_bytes()).hexdigest()
            for file in sorted(folder.rglob("*")) if file.is_file()}


def compare(old: dict, old_errors: dict, new: dict, new_errors: dict) -> list[str]:
    problems = []
    for key in sorted(set(old_errors) | set(new_errors)):
        if old_errors.get(key) != new_errors.get(key):
            problems.append(f"{key}: old {old_errors.get(key)!r}, new {new_errors.get(key)!r}")
    for file in sorted(set(old) | set(new)):
        if old.get(file) != new.get(file):
            what = "missing in new" if file not in new else (
                "missing in old" if file not in old else "differs")
            problems.append(f"{file}: {what}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old-src", help="the source folder (holding onnxport/) before")
    parser.add_argument("--new-src", default=str(ROOT / "src"), help="and after")
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS))
    parser.add_argument("--all", action="store_true", help="the whole zoo of export_bench.py")
    parser.add_argument("--keep", help="export into this folder and keep the files")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--src", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    models = all_model_names() if options.all else options.models.split(",")
    if options.worker:
        run_worker(options.src, models, Path(options.output), options.result)
        return 0
    if not options.old_src:
        parser.error("--old-src is required")
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(options.keep or scratch).resolve()
        results = {}
        for side in ("old", "new"):
            source = getattr(options, f"{side}_src")
            (base / side).mkdir(parents=True, exist_ok=True)
            errors = export_tree(source, models, base / side)
            results[side] = digests(base / side / "files"), errors
        problems = compare(*results["old"], *results["new"])
        files, errors = results["new"]
        print(f"{len(models)} models x {len(SHAPES)} shapes x {len(PATHS)} paths: "
              f"{len(files)} files compared, {len(errors)} exports failing in the new tree")
        for key, error in sorted(errors.items()):
            print(f"  failed (new): {key}: {error}")
        if problems:
            print("NOT byte-identical:")
            for problem in problems:
                print("  " + problem)
            return 1
        print("byte-identical")
        return 0


if __name__ == "__main__":
    sys.exit(main())
