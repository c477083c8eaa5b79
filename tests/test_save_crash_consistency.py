"""ONNXProgram.save under fault injection: a failure (or a crash, no clean-up run) at any
write, sync, rename or removal of a save leaves the old model with its own weights or the new
model with its own, never the old model beside the new weights; a failure leaves no temporary
files."""

from __future__ import annotations

import builtins
import os
import shutil
import tempfile

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
import torch

import onnxport
import onnxport.program as program_module


def _model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                               torch.nn.Linear(32, 4)).eval()


@pytest.fixture(scope="module")
def programs():
    x = torch.randn(3, 16)
    result = {}
    for label, seed in (("old", 0), ("new", 1)):
        model = _model(seed)
        with torch.no_grad():
            result[label] = (onnxport.export(model, (x,)), model(x).numpy())
    assert not np.allclose(result["old"][1], result["new"][1], atol=1e-3)
    return x, result


class _Faults:
    """Counts the points where a save touches the disk; raises at the ``fail_at``-th one, after
    copying ``folder`` as it is then to ``crash_copy``: what a process killed there (no
    clean-up run) would leave."""

    def __init__(self, fail_at: int | None = None, folder=None, crash_copy=None):
        self.fail_at, self.folder, self.crash_copy = fail_at, folder, crash_copy
        self.points: list[str] = []
        self.failed: str | None = None
        self.active = True

    def point(self, what: str) -> None:
        if not self.active:
            return
        self.points.append(what)
        if len(self.points) == self.fail_at:
            self.failed = what
            if self.crash_copy is not None:
                self.active = False  # the copy's own writes are not points of the save
                shutil.copytree(self.folder, self.crash_copy, symlinks=True)
                self.active = True
            raise OSError(f"injected failure at {what} (point {self.fail_at})")


class _FaultyFile:
    def __init__(self, file, faults: _Faults):
        self._file, self._faults = file, faults

    def write(self, data):
        self._faults.point("write")
        return self._file.write(data)

    def flush(self):
        self._faults.point("flush")
        return self._file.flush()

    def __getattr__(self, name):
        return getattr(self._file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._file.close()
        return False


def _inject(monkeypatch, faults: _Faults) -> None:
    real_open = builtins.open

    def faulty_open(file, mode="r", *args, **kwargs):
        if any(flag in mode for flag in "wax+"):
            faults.point("open")
            return _FaultyFile(real_open(file, mode, *args, **kwargs), faults)
        return real_open(file, mode, *args, **kwargs)

    def wrap(module, name):
        real = getattr(module, name)

        def faulty(*args, **kwargs):
            faults.point(name)
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, faulty)

    monkeypatch.setattr(builtins, "open", faulty_open)
    for name in ("replace", "rename", "remove", "unlink", "fsync"):
        wrap(os, name)
    wrap(program_module, "_exchanged")  # the atomic swap of a new model with the old one
    for name in ("mkstemp", "mkdtemp"):
        wrap(tempfile, name)
    wrap(ir, "save")


def _locations(path) -> set[str]:
    proto = onnx.load(str(path), load_external_data=False)
    return {entry.value for tensor in proto.graph.initializer
            for entry in tensor.external_data if entry.key == "location"}


def _pair_in(folder, x, results, crashed: bool = False) -> tuple[str, set[str]]:
    """Which complete pair the folder holds ("old" or "new"; else an assertion error), and the
    files in it that the model does not point at. Temporary files are allowed only after a
    crash, or where deleting the old model swapped out of the way was what failed."""
    path = folder / "m.onnx"
    names = {p.name for p in folder.iterdir()}
    temporary = {n for n in names if n.startswith(".onnxport-")}
    assert crashed or not temporary, f"temporary files: {names}"
    names -= temporary
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)  # every weight readable
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (actual,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    matches = [label for label, (_, want) in results.items()
               if np.allclose(actual, want, rtol=1e-3, atol=1e-4)]
    assert len(matches) == 1, "the model runs with weights of neither export"
    return matches[0], names - {"m.onnx"} - _locations(path)


# (old save, new save): external each time, a switch either way, and the same weights again
# (the new side file has the old one's name).
SCENARIOS = {
    "external_to_external": (("old", True), ("new", True)),
    "single_to_external": (("old", False), ("new", True)),
    "external_to_single": (("old", True), ("new", False)),
    "same_weights_again": (("old", True), ("old", True)),
}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_failure_leaves_a_complete_pair(tmp_path, monkeypatch, programs, scenario):
    x, results = programs
    (old_label, old_external), (new_label, new_external) = SCENARIOS[scenario]
    new_program = results[new_label][0]

    def fresh_folder(name):
        folder = tmp_path / name
        folder.mkdir()
        results[old_label][0].save(folder / "m.onnx", external_data=old_external)
        return folder

    counting = _Faults()
    folder = fresh_folder("count")
    with monkeypatch.context() as patch:
        _inject(patch, counting)
        new_program.save(folder / "m.onnx", external_data=new_external)
    assert _pair_in(folder, x, results) == (new_label, set())
    total = len(counting.points)
    assert total >= 5, counting.points

    inconsistent = []
    for k in range(1, total + 1):
        folder = fresh_folder(f"fail{k}")
        crash_copy = tmp_path / f"crash{k}"
        faults = _Faults(fail_at=k, folder=folder, crash_copy=crash_copy)
        with monkeypatch.context() as patch:
            _inject(patch, faults)
            try:
                new_program.save(folder / "m.onnx", external_data=new_external)
                raised = False
            except OSError as error:
                assert "injected failure" in str(error)
                raised = True
        try:
            label, unreferenced = _pair_in(folder, x, results,
                                           crashed=faults.failed in ("remove", "unlink"))
            if not raised:
                assert label == new_label
            # A side file left over only where deleting it was the step that failed (that
            # failure is not worth failing a save that has already replaced the model).
            assert not unreferenced or faults.failed in ("remove", "unlink"), unreferenced
        except AssertionError as error:
            inconsistent.append(f"point {k} ({faults.failed}): {error}")
        try:
            _pair_in(crash_copy, x, results, crashed=True)
        except AssertionError as error:
            inconsistent.append(f"crash at point {k} ({faults.failed}): {error}")
    assert not inconsistent, f"{len(inconsistent)} of {total} injection points:\n" + \
        "\n".join(inconsistent)
    print(f"{scenario}: 0 inconsistent pairs at {total} injection points, failed or crashed")
