"""ONNXProgram over a loaded model (runs, saves elsewhere complete), external data locations
checked on load and save, model_state checked before anything changes, and external-data saves
byte-identical across exports."""

from __future__ import annotations

import io
import os
import sys

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
import torch

import onnxport
from onnxport import InvalidExportOptionsError, ONNXProgram
from onnxport.errors import ExternalDataError


class ConvFc(torch.nn.Module):
    """Weights kept as they are in the model (Conv, Gemm), so a state dict applies by name."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).mean(dim=(2, 3)))


def _eager(model, x):
    with torch.no_grad():
        return model(x).numpy()


def _run(path, x):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]


def _close(actual, expected):
    np.testing.assert_allclose(np.asarray(actual), expected, rtol=1e-3, atol=1e-4)


@pytest.fixture
def exported(tmp_path):
    """A model exported with its weights in a side file, in a folder of its own."""
    torch.manual_seed(0)
    model = ConvFc().eval()
    x = torch.randn(2, 3, 6, 6)
    folder = tmp_path / "exported"
    folder.mkdir()
    onnxport.export(model, (x,), folder / "m.onnx", external_data=True)
    assert len(list(folder.glob("m.onnx.*.data"))) == 1
    return model, x, folder / "m.onnx"


def _locations(path) -> set[str]:
    proto = onnx.load(str(path), load_external_data=False)
    return {entry.value for tensor in proto.graph.initializer
            for entry in tensor.external_data if entry.key == "location"}


# -- a program over a loaded model ----------------------------------------------------------
def test_loaded_program_runs_and_saves_elsewhere_complete(tmp_path, exported):
    model, x, path = exported
    program = ONNXProgram.load(path)
    _close(program(x)[0], _eager(model, x))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    program.save(elsewhere / "external.onnx", external_data=True)
    program.save(elsewhere / "single.onnx")
    buffer = io.BytesIO()
    program.save(buffer)
    for side_file in path.parent.iterdir():  # the source folder is gone: copies are complete
        side_file.unlink()
    path.parent.rmdir()
    assert _locations(elsewhere / "single.onnx") == set()
    (side_file,) = _locations(elsewhere / "external.onnx")
    assert (elsewhere / side_file).is_file()
    for saved in ("external.onnx", "single.onnx"):
        onnx.checker.check_model(onnx.load(str(elsewhere / saved)), full_check=True)
        _close(_run(elsewhere / saved, x), _eager(model, x))
    _close(ONNXProgram.load(elsewhere / "external.onnx")(x)[0], _eager(model, x))
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    _close(session.run(None, {session.get_inputs()[0].name: x.numpy()})[0], _eager(model, x))


def test_loaded_program_saved_over_its_own_path_keeps_reading(exported):
    model, x, path = exported
    program = ONNXProgram.load(path)
    torch.manual_seed(1)
    other = ConvFc().eval()
    program.save(path, external_data=True, model_state={"fc.weight": other.fc.weight})
    model.fc.weight = other.fc.weight
    _close(_run(path, x), _eager(model, x))
    # The other weights are still read from the first side file, which the save kept.
    program.release()
    _close(program(x)[0], _eager(model, x))


def test_load_of_a_missing_file(tmp_path):
    with pytest.raises(InvalidExportOptionsError, match="no such file"):
        ONNXProgram.load(tmp_path / "none.onnx")


# -- external data locations ------------------------------------------------------------------
def _point_weights_at(path, location: str) -> None:
    """Rewrite the model at ``path`` so that its external weights are read from ``location``."""
    proto = onnx.load(str(path), load_external_data=False)
    for tensor in proto.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = location
    path.write_bytes(proto.SerializeToString())


def _escaping_models(tmp_path, exported):
    """(label, model path, expected message): side files outside the model's folder."""
    _, _, path = exported
    (side_file,) = path.parent.glob("m.onnx.*.data")
    secret = tmp_path / "secret.bin"
    secret.write_bytes(side_file.read_bytes())  # a file outside that would even load
    cases = []
    for label, location, message in (
            ("dotdot", "../secret.bin", "leaves the model's folder"),
            ("absolute", str(secret), "absolute path"),
            ("symlink", "link.data", "is a link to"),
            ("missing", "nothing.data", "missing")):
        folder = tmp_path / label
        folder.mkdir()
        target = folder / "m.onnx"
        target.write_bytes(path.read_bytes())
        if label == "symlink":
            os.symlink(secret, folder / "link.data")
        _point_weights_at(target, location)
        cases.append((label, target, message))
    return cases


def test_external_data_outside_the_folder_is_refused_on_load_and_save(tmp_path, exported):
    for label, target, message in _escaping_models(tmp_path, exported):
        with pytest.raises(ExternalDataError, match=message):
            ONNXProgram.load(target)
        # A program over a model loaded otherwise: save neither reads nor references it.
        program = ONNXProgram(ir.load(str(target)))
        out = tmp_path / f"{label}-out"
        out.mkdir()
        for external in (True, False):
            with pytest.raises(ExternalDataError, match=message):
                program.save(out / "copy.onnx", external_data=external)
        assert list(out.iterdir()) == [], label


# -- model_state ------------------------------------------------------------------------------
@pytest.fixture
def program_and_other():
    torch.manual_seed(0)
    model = ConvFc().eval()
    x = torch.randn(2, 3, 6, 6)
    torch.manual_seed(1)
    return model, x, onnxport.export(model, (x,)), ConvFc().eval()


def test_model_state_from_safetensors(tmp_path, program_and_other):
    safetensors_torch = pytest.importorskip("safetensors.torch")
    _, x, program, other = program_and_other
    state = tmp_path / "state.safetensors"
    safetensors_torch.save_file(other.state_dict(), str(state))
    program.save(tmp_path / "m.onnx", model_state=state)
    _close(_run(tmp_path / "m.onnx", x), _eager(other, x))


@pytest.mark.parametrize("change,message", [
    (lambda state: state.update({"head.weight": torch.zeros(3)}), r"no weight for: head\.weight"),
    (lambda state: state.update({"fc.weight": torch.zeros(5, 7)}),
     r"fc\.weight: the model has FLOAT \[5, 8\], model_state torch.float32 \[5, 7\]"),
    (lambda state: state.update({"fc.bias": torch.zeros(5, dtype=torch.float16)}),
     r"fc\.bias: the model has FLOAT \[5\], model_state torch.float16 \[5\]"),
])
def test_model_state_that_does_not_fit_changes_nothing(tmp_path, program_and_other, change,
                                                       message):
    model, x, program, other = program_and_other
    state = dict(other.state_dict())
    change(state)
    target = tmp_path / "m.onnx"
    with pytest.raises(InvalidExportOptionsError, match=message):
        program.save(target, model_state=state)
    assert not target.exists()
    _close(program(x)[0], _eager(model, x))  # still the exported weights, none half applied


def test_model_state_of_folded_weights_is_refused(tmp_path):
    class ConvNorm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3)
            self.norm = torch.nn.BatchNorm2d(4)

        def forward(self, x):
            return self.norm(self.conv(x))

    torch.manual_seed(0)
    model = ConvNorm().eval()
    x = torch.randn(1, 3, 5, 5)
    program = onnxport.export(model, (x,))
    with pytest.raises(InvalidExportOptionsError, match=r"computed at export.*conv\.weight"):
        program.save(tmp_path / "m.onnx", model_state={"conv.weight": torch.randn(4, 3, 3, 3)})
    assert not (tmp_path / "m.onnx").exists()
    _close(program(x)[0], _eager(model, x))


# -- determinism ------------------------------------------------------------------------------
def test_external_data_exports_are_byte_identical(tmp_path):
    torch.manual_seed(0)
    model = ConvFc().eval()
    x = torch.randn(2, 3, 6, 6)
    files = []
    for run in ("first", "second"):
        folder = tmp_path / run
        folder.mkdir()
        onnxport.export(model, (x,), folder / "m.onnx", external_data=True)
        files.append({p.name: p.read_bytes() for p in folder.iterdir()})
    assert files[0] == files[1] and len(files[0]) == 2
    _close(_run(tmp_path / "first" / "m.onnx", x), _eager(model, x))


def test_loaded_constant_attribute_in_a_side_file_is_copied(tmp_path):
    """onnx can put a Constant node's value in the side file too: save copies it as well."""
    from onnx import helper, numpy_helper

    value = np.arange(64, dtype=np.float32).reshape(8, 8)
    constant = helper.make_node("Constant", [], ["c"],
                                value=numpy_helper.from_array(value, name="c_value"))
    add = helper.make_node("Add", ["x", "c"], ["y"])
    graph = helper.make_graph(
        [constant, add], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [8, 8])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [8, 8])])
    source = tmp_path / "source"
    source.mkdir()
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)],
                                ir_version=10),  # onnx 1.23's default 14: ORT 1.30 reads 13
              str(source / "m.onnx"), save_as_external_data=True, location="weights.bin",
              size_threshold=0, convert_attribute=True)
    program = ONNXProgram.load(source / "m.onnx")
    x = torch.randn(8, 8)
    _close(program(x)[0], x.numpy() + value)
    program.save(tmp_path / "copy.onnx")
    (source / "weights.bin").unlink()
    _close(_run(tmp_path / "copy.onnx", x), x.numpy() + value)


@pytest.mark.parametrize("options, argument", [
    ({"destination": 123}, "f must be"),
    ({"include_initializers": "no"}, "include_initializers must be True or False"),
    ({"external_data": "yes"}, "external_data must be"),
    ({"serializer": 5}, "serializer must have a serialize"),
    ({"model_state": [1, 2]}, "model_state must be"),
])
def test_save_arguments_are_checked_and_nothing_is_written(tmp_path, options, argument):
    # Before: include_initializers="no" and external_data="yes" counted as True, a number as
    # destination or serializer failed with AttributeError.
    program = onnxport.export(torch.nn.Linear(2, 2), (torch.randn(1, 2),))
    options = {"destination": tmp_path / "m.onnx", **options}
    with pytest.raises(onnxport.InvalidExportOptionsError, match=argument):
        program.save(options.pop("destination"), **options)
    assert list(tmp_path.iterdir()) == []


def test_a_self_contained_save_is_renamed_into_place_without_fsync(tmp_path, monkeypatch):
    # The sync was half of a small model's export; the rename alone keeps the save atomic (a
    # failed save leaves the old file, complete). A save with a side file still syncs.
    program = onnxport.export(torch.nn.Linear(2, 2), (torch.randn(1, 2),))
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    path = tmp_path / "m.onnx"
    program.save(path)
    assert synced == []
    before = path.read_bytes()

    def failing_write(*args, **kwargs):
        raise OSError("disk full")

    import onnxport.program as program_module

    monkeypatch.setattr(program_module, "write_model", failing_write)
    with pytest.raises(OSError, match="disk full"):
        program.save(path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx"]
    monkeypatch.undo()
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    program.save(tmp_path / "e.onnx", external_data=True)
    assert synced


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
@pytest.mark.parametrize("external", [False, True])
def test_saved_files_follow_the_umask_as_open_would(tmp_path, umask, external):
    torch.manual_seed(0)
    model, x = ConvFc().eval(), torch.randn(2, 3, 6, 6)
    previous = os.umask(umask)
    try:
        onnxport.export(model, (x,), tmp_path / "m.onnx", external_data=external)
        with open(tmp_path / "reference", "wb"):
            pass
    finally:
        os.umask(previous)
    expected = os.stat(tmp_path / "reference").st_mode & 0o777
    written = [tmp_path / "m.onnx", *tmp_path.glob("m.onnx.*.data")]
    assert len(written) == (2 if external else 1)
    for path in written:
        assert os.stat(path).st_mode & 0o777 == expected, path
    _close(_run(tmp_path / "m.onnx", x), _eager(model, x))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="renameat2 is Linux's")
def test_a_save_over_a_model_swaps_it_out_in_one_step(tmp_path, monkeypatch):
    # A rename over an existing file makes ext4 write the new one out before returning (a third
    # of a large model's save); the swap does not. Readers see the old model or the new one.
    x = torch.randn(1, 2)
    torch.manual_seed(0)
    old, new = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    path = tmp_path / "m.onnx"
    onnxport.export(old, (x,), path)
    os.chmod(path, 0o600)
    renames = []
    monkeypatch.setattr(os, "replace", lambda *a: renames.append(a))
    onnxport.export(new, (x,), path)
    assert renames == []  # swapped, not renamed over
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx"]
    _close(_run(path, x), _eager(new, x))
    with open(tmp_path / "reference", "wb"):
        pass
    assert os.stat(path).st_mode & 0o777 == os.stat(tmp_path / "reference").st_mode & 0o777
    monkeypatch.undo()
    # A link is replaced by the model, as a rename would; what it pointed at is left alone.
    target = tmp_path / "elsewhere.onnx"
    target.write_bytes(b"not touched")
    link = tmp_path / "link.onnx"
    link.symlink_to(target)
    onnxport.export(new, (x,), link)
    assert not link.is_symlink() and target.read_bytes() == b"not touched"
    _close(_run(link, x), _eager(new, x))
    # A folder in the way is an error, and stays as it was.
    folder = tmp_path / "folder.onnx"
    folder.mkdir()
    (folder / "inside").write_bytes(b"x")
    with pytest.raises((OSError, onnxport.InvalidExportOptionsError)):
        onnxport.export(new, (x,)).save(folder)
    assert [p.name for p in folder.iterdir()] == ["inside"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".onnxport-")]
