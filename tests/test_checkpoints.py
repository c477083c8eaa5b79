"""Checkpoints read while they are written: weights of .safetensors and torch.save files are
copied chunk by chunk (a tiny chunk here, so that every weight spans several), the saved model
runs in ONNX Runtime like the model the checkpoint came from, and bad files are named."""

import gc
import json
import os
import struct

import onnxruntime as ort
import pytest
import torch

import onnxport
from onnxport import checkpoints
from onnxport.errors import InvalidExportOptionsError


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(300, 200)
        self.out = torch.nn.Linear(200, 7)

    def forward(self, x):
        return self.out(torch.relu(self.fc(x)))


@pytest.fixture
def small_chunks(monkeypatch):
    # A page: a weight spans many chunks, and released pages border unreleased ones.
    monkeypatch.setattr(checkpoints, "_CHUNK", 4096)


def _run(path, x):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return torch.from_numpy(session.run(None, {session.get_inputs()[0].name: x.numpy()})[0])


@pytest.mark.parametrize("kind", ["safetensors", "pt"])
@pytest.mark.parametrize("external", [True, False])
def test_checkpoint_weights_are_streamed_into_the_saved_model(tmp_path, small_chunks, kind,
                                                              external):
    torch.manual_seed(0)
    x = torch.randn(4, 300)
    program = onnxport.export(Net().eval(), (x,), optimize=False)
    trained = Net().eval()
    path = tmp_path / f"state.{kind}"
    if kind == "pt":
        torch.save(trained.state_dict(), path)
    else:
        pytest.importorskip("safetensors.torch").save_file(trained.state_dict(), str(path))
    program.save(tmp_path / "m.onnx", model_state=path, external_data=external)
    expected = trained(x).detach()
    torch.testing.assert_close(_run(tmp_path / "m.onnx", x), expected, rtol=1e-3, atol=1e-4)
    # The program keeps the checkpoint's weights: it runs with them too.
    torch.testing.assert_close(program(x)[0], expected, rtol=1e-3, atol=1e-4)


def test_a_mapped_weight_reads_back_after_its_pages_are_released(tmp_path, small_chunks):
    weight = torch.randn(3000, 7)
    torch.save({"w": weight}, tmp_path / "w.pt")
    (mapped,) = checkpoints.read_checkpoint(str(tmp_path / "w.pt")).values()
    assert isinstance(mapped, checkpoints.MappedTensor)
    first, second = mapped.tobytes(), mapped.tobytes()  # the second after the release
    assert first == second == weight.numpy().tobytes()


def _safetensors_file(path, header: dict, data: bytes):
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


@pytest.mark.parametrize("header, data, message", [
    ({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 12]}}, bytes(12), "need 16"),
    ({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, bytes(8), "ends before"),
    ({"w": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}}, bytes(8), "'C64'"),
])
def test_a_bad_safetensors_file_is_named(tmp_path, header, data, message):
    path = tmp_path / "bad.safetensors"
    _safetensors_file(path, header, data)
    with pytest.raises(InvalidExportOptionsError, match=message):
        checkpoints.read_checkpoint(str(path))


def _status_kib(key):
    with open("/proc/self/status") as stream:
        return next(int(line.split()[1]) for line in stream if line.startswith(key + ":"))


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="Linux's peak-RSS reset")
@pytest.mark.parametrize("kind", ["safetensors", "pt"])
def test_saving_a_checkpoint_holds_a_chunk_not_the_checkpoint(tmp_path, kind):
    with onnxport.enable_fake_mode() as fake:
        model = torch.nn.Linear(4000, 10000)  # 160 MB of weights, none made here
    program = onnxport.dynamo_export(model, torch.randn(2, 4000),
                                     export_options=onnxport.ExportOptions(fake_context=fake))
    path = tmp_path / f"state.{kind}"
    state = {"weight": torch.randn(10000, 4000), "bias": torch.randn(10000)}
    if kind == "pt":
        torch.save(state, path)
    else:
        pytest.importorskip("safetensors.torch").save_file(state, str(path))
    del state
    gc.collect()
    with open("/proc/self/clear_refs", "w") as stream:
        stream.write("5")  # the peak RSS starts again from the current RSS
    before = _status_kib("VmRSS")
    program.save(tmp_path / "m.onnx", model_state=path)
    grown = (_status_kib("VmHWM") - before) * 1024
    # Reading the whole checkpoint first grew it by its size (160 MB); a chunk is 16 MiB.
    assert grown < 0.25 * os.path.getsize(path), f"grew {grown / 2**20:.0f} MiB while saving"
