"""export(): argument handling (A1-A7, A12), bad inputs with clear errors and no files left,
file outputs, determinism and provenance."""

from __future__ import annotations

import io
import os
import pathlib

import onnx
import pytest
import torch

import onnxport
from onnxport import InvalidExportOptionsError, UnsupportedOpsError


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4, 5)

    def forward(self, x, scale: float = 1.0):
        y = torch.relu(self.conv(x)).mean(dim=(2, 3))
        return self.fc(y) * scale


class TwoInputs(torch.nn.Module):
    def forward(self, a, b):
        return a + b, a * b


def run(path_or_proto, *inputs):
    import onnxruntime as ort

    data = path_or_proto if isinstance(path_or_proto, str) else path_or_proto.SerializeToString()
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, {n: t.numpy() for n, t in zip(names, inputs)})


@pytest.fixture
def small():
    torch.manual_seed(0)
    return Small().eval(), torch.randn(2, 3, 8, 8)


def expected(model, *args, **kwargs):
    with torch.no_grad():
        return model(*args, **kwargs)


# -- A1/A2: models and arguments -----------------------------------------------------------
def test_function_and_single_tensor_args():
    def f(x):
        return torch.sigmoid(x) * 2

    x = torch.randn(3, 4)
    program = onnxport.export(f, x)
    torch.testing.assert_close(program(x)[0], f(x), rtol=1e-3, atol=1e-4)


def test_exported_program_and_kwargs(small):
    model, x = small
    ep = torch.export.export(model, (x,), {"scale": 2.0})
    program = onnxport.export(ep, (x,), kwargs={"scale": 2.0})
    torch.testing.assert_close(program(x)[0], expected(model, x, scale=2.0), rtol=1e-3, atol=1e-4)


def test_trailing_dict_in_args_is_kwargs(small):
    model, x = small
    program = onnxport.export(model, (x, {"scale": 3.0}))
    torch.testing.assert_close(program(x)[0], expected(model, x, scale=3.0), rtol=1e-3, atol=1e-4)


def test_model_left_in_its_mode(small):
    model, x = small
    model.train()
    assert not onnxport.is_in_onnx_export()
    onnxport.export(model, (x,))
    assert model.training
    assert not onnxport.is_in_onnx_export()


# -- A3: destinations ----------------------------------------------------------------------
def test_path_pathlike_file_object_and_none(tmp_path, small):
    model, x = small
    want = expected(model, x).numpy()
    as_str = str(tmp_path / "a.onnx")
    onnxport.export(model, (x,), as_str)
    onnxport.export(model, (x,), tmp_path / "b.onnx")
    buffer = io.BytesIO()
    onnxport.export(model, (x,), buffer)
    program = onnxport.export(model, (x,), None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.onnx", "b.onnx"]
    for source in (as_str, str(tmp_path / "b.onnx")):
        onnx.checker.check_model(source, full_check=True)
        torch.testing.assert_close(run(source, x)[0], want, rtol=1e-3, atol=1e-4)
    proto = onnx.load_from_string(buffer.getvalue())
    torch.testing.assert_close(run(proto, x)[0], want, rtol=1e-3, atol=1e-4)
    torch.testing.assert_close(run(program.model_proto, x)[0], want, rtol=1e-3, atol=1e-4)


def test_same_model_twice_gives_identical_bytes(tmp_path, small):
    model, x = small
    onnxport.export(model, (x,), tmp_path / "1.onnx")
    onnxport.export(model, (x,), tmp_path / "2.onnx")
    assert (tmp_path / "1.onnx").read_bytes() == (tmp_path / "2.onnx").read_bytes()


def test_nodes_say_where_they_come_from(small):
    model, x = small
    program = onnxport.export(model, (x,))
    nodes = {node.name: node for node in program.model.graph}
    conv = nodes["conv/Conv"]
    assert conv.metadata_props["onnxport.module"] == "conv"
    assert conv.metadata_props["onnxport.aten"] == "aten::conv2d"
    assert "test_api.py" in conv.metadata_props["onnxport.source"]
    assert "fc/Gemm" in nodes


# -- A4: names -----------------------------------------------------------------------------
def test_partial_input_and_output_names():
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    program = onnxport.export(TwoInputs(), (a, b), input_names=["first"], output_names=["sum"])
    model = program.model_proto
    assert [i.name for i in model.graph.input] == ["first", "b"]
    assert model.graph.output[0].name == "sum"
    assert len(model.graph.output) == 2 and model.graph.output[1].name != "sum"
    got = run(model, a, b)
    torch.testing.assert_close(got[0], (a + b).numpy())
    torch.testing.assert_close(got[1], (a * b).numpy())


def test_too_many_input_names():
    with pytest.raises(InvalidExportOptionsError, match="input_names has 3 names"):
        onnxport.export(TwoInputs(), (torch.randn(2), torch.randn(2)), input_names=["a", "b", "c"])


# -- A5: opsets ----------------------------------------------------------------------------
@pytest.mark.parametrize("opset", [12, 24, "18", 18.0])
def test_opset_out_of_range(tmp_path, small, opset):
    model, x = small
    target = tmp_path / "m.onnx"
    with pytest.raises(InvalidExportOptionsError, match=r"opset_version=.* 13 to 23"):
        onnxport.export(model, (x,), target, opset_version=opset)
    assert not target.exists()


def test_default_opset_is_18(small):
    model, x = small
    assert onnxport.export(model, (x,)).model.opset_imports[""] == 18


# -- A6: dynamic axes and shapes -----------------------------------------------------------
def test_dynamic_axes_dict_list_and_mixed():
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    program = onnxport.export(
        TwoInputs(), (a, b), input_names=["a", "b"], output_names=["sum", "product"],
        dynamic_axes={"a": {0: "batch"}, "b": [0], "sum": {0: "batch"}},
    )
    inputs = {v.name: v for v in program.model.graph.inputs}
    assert str(inputs["a"].shape[0]) == "batch"
    outputs = {v.name: v for v in program.model.graph.outputs}
    assert str(outputs["sum"].shape[0]) == "batch"
    a5, b5 = torch.randn(5, 3), torch.randn(5, 3)
    got = run(program.model_proto, a5, b5)
    torch.testing.assert_close(got[0], (a5 + b5).numpy())


def test_dynamic_axes_list_form_generates_names():
    x = torch.randn(2, 3)
    program = onnxport.export(lambda x: x * 2, (x,), input_names=["sum"],
                              dynamic_axes={"sum": [0, 1]})
    assert [str(d) for d in program.model.graph.inputs[0].shape] == [
        "sum_dynamic_axes_1", "sum_dynamic_axes_2"]


def test_dynamic_shapes(small):
    model, x = small
    batch = torch.export.Dim("batch")
    program = onnxport.export(model, (x,), dynamic_shapes={"x": {0: batch}})
    assert str(program.model.graph.inputs[0].shape[0]) == "batch"
    x4 = torch.randn(4, 3, 8, 8)
    torch.testing.assert_close(program(x4)[0], expected(model, x4), rtol=1e-3, atol=1e-4)


def test_dynamic_axes_and_shapes_together_is_an_error(small):
    model, x = small
    with pytest.raises(InvalidExportOptionsError, match="dynamic_axes and dynamic_shapes"):
        onnxport.export(model, (x,), dynamic_axes={"x": {0: "b"}},
                        dynamic_shapes={"x": {0: torch.export.Dim("b")}})


class MaybeLengths(torch.nn.Module):
    """Called with or without lengths, as an RNN wrapper is; one dynamic_axes dict serves both."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)

    def forward(self, x, seq_lengths=None):
        y = self.fc(x)
        if seq_lengths is not None:
            y = y * seq_lengths.unsqueeze(-1).to(y.dtype)
        return y


@pytest.mark.parametrize("dynamo", [True, False])
def test_dynamic_axes_for_an_input_the_call_leaves_out_warns_and_exports(tmp_path, dynamo):
    model = MaybeLengths().eval()
    axes = {"x": {0: "batch"}, "seq_lengths": {0: "batch"}, "out": {0: "batch"}}
    target = tmp_path / "m.onnx"
    with pytest.warns(UserWarning, match=r"dynamic_axes names 'seq_lengths', which is neither "
                      r"an input nor an output of this export; left out\. Its inputs are x .*"
                      r"outputs out") as caught:
        onnxport.export(model, (torch.randn(4, 3),), target, input_names=["x"],
                        output_names=["out"], dynamic_axes=axes, dynamo=dynamo)
    assert any(w.filename == __file__ for w in caught)  # shown at the export call
    program = onnxport.ONNXProgram.load(target)
    with torch.no_grad():
        for batch in (4, 7):  # the axes of the inputs it has are dynamic
            x = torch.randn(batch, 3)
            torch.testing.assert_close(program(x)[0], model(x), rtol=1e-3, atol=1e-4)


def test_unknown_name_in_dynamic_axes_is_left_out(small):
    model, x = small
    with pytest.warns(UserWarning, match="'y'.*neither an input"):
        program = onnxport.export(model, (x,), output_names=["out"], dynamic_axes={"y": {0: "b"}})
    assert [v.name for v in program.model.graph.outputs] == ["out"]


def test_dynamic_axis_out_of_range(small):
    model, x = small
    with pytest.raises(InvalidExportOptionsError, match="axis 7"):
        onnxport.export(model, (x,), dynamic_axes={"x": {7: "b"}})


# -- A7: weights ---------------------------------------------------------------------------
def test_export_params_false_makes_weights_inputs(small):
    model, x = small
    proto = onnxport.export(model, (x,), export_params=False).model_proto
    assert len(proto.graph.initializer) == 0 or all(
        i.name.startswith("const") for i in proto.graph.initializer)
    names = [i.name for i in proto.graph.input]
    assert "conv.weight" in names and "fc.bias" in names


def test_keep_initializers_as_inputs(small):
    model, x = small
    proto = onnxport.export(model, (x,), keep_initializers_as_inputs=True).model_proto
    names = [i.name for i in proto.graph.input]
    assert "conv.weight" in names
    assert "conv.weight" in [i.name for i in proto.graph.initializer]
    torch.testing.assert_close(run(proto, x)[0], expected(model, x).numpy(), rtol=1e-3, atol=1e-4)


def test_external_data_true_writes_side_file(tmp_path, small):
    model, x = small
    target = tmp_path / "m.onnx"
    onnxport.export(model, (x,), target, external_data=True)
    # The side file is named after its content (crash-consistent saves, see ONNXProgram.save).
    (side_file,) = tmp_path.glob("m.onnx.*.data")
    torch.testing.assert_close(run(str(target), x)[0], expected(model, x).numpy(), rtol=1e-3,
                               atol=1e-4)
    locations = [
        entry.value for tensor in onnx.load(str(target), load_external_data=False).graph.initializer
        for entry in tensor.external_data if entry.key == "location"
    ]
    assert locations and set(locations) == {side_file.name}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", side_file.name]


def test_external_data_unset_goes_external_above_the_limit(tmp_path, small, monkeypatch):
    from onnxport import program as program_module

    model, x = small
    monkeypatch.setattr(program_module, "PROTOBUF_LIMIT", 100)
    onnxport.export(model, (x,), tmp_path / "big.onnx")
    assert len(list(tmp_path.glob("big.onnx.*.data"))) == 1
    onnxport.export(model, (x,), tmp_path / "small.onnx", external_data=None)
    target = tmp_path / "refused.onnx"
    with pytest.raises(InvalidExportOptionsError, match="external_data=False.*2 GB"):
        onnxport.export(model, (x,), target, external_data=False)
    assert not target.exists()


def test_external_data_unset_is_one_file_below_the_limit(tmp_path, small):
    model, x = small
    onnxport.export(model, (x,), tmp_path / "m.onnx")
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx"]


# -- bad inputs: clear errors, no file, existing file untouched -----------------------------
@pytest.mark.parametrize("args", ["text", 3, {1, 2}])
def test_wrong_args_type(tmp_path, small, args):
    model, _ = small
    target = tmp_path / "m.onnx"
    with pytest.raises(InvalidExportOptionsError, match="args must be a tuple"):
        onnxport.export(model, args, target)
    assert not target.exists()


def test_wrong_model_type():
    with pytest.raises(InvalidExportOptionsError, match="model must be"):
        onnxport.export(42, (torch.randn(1),))


@pytest.mark.parametrize("f", [42, io.StringIO()])
def test_wrong_destination_type(small, f):
    model, x = small
    with pytest.raises(InvalidExportOptionsError, match="f "):
        onnxport.export(model, (x,), f)


def test_missing_folder(tmp_path, small):
    model, x = small
    with pytest.raises(InvalidExportOptionsError, match="does not exist"):
        onnxport.export(model, (x,), tmp_path / "no" / "such" / "m.onnx")


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write into read-only folders")
def test_unwritable_folder(tmp_path, small):
    model, x = small
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with pytest.raises(InvalidExportOptionsError, match="not writable"):
            onnxport.export(model, (x,), folder / "m.onnx")
    finally:
        folder.chmod(0o700)


def test_unwritable_destination_leaves_nothing(tmp_path, small):
    model, x = small
    # A destination that is a folder can never be written, even by root.
    with pytest.raises(InvalidExportOptionsError, match="is a folder"):
        onnxport.export(model, (x,), tmp_path)
    assert list(tmp_path.iterdir()) == []


def _custom_ops():
    library = torch.library.Library("onnxport_test", "FRAGMENT")
    library.define("first(Tensor x) -> Tensor")
    library.define("second(Tensor x) -> Tensor")
    library.impl("first", lambda x: x + 1, "CompositeExplicitAutograd")
    library.impl("second", lambda x: x * 2, "CompositeExplicitAutograd")
    library.impl("first", lambda x: torch.empty_like(x), "Meta")
    library.impl("second", lambda x: torch.empty_like(x), "Meta")
    return library


_LIBRARY = _custom_ops()


class UsesUnsupported(torch.nn.Module):
    def forward(self, x):
        y = torch.ops.onnxport_test.first(x)
        z = torch.ops.onnxport_test.second(y)
        return torch.ops.onnxport_test.first(z)


def test_unsupported_ops_are_all_listed_and_existing_file_is_untouched(tmp_path):
    target = tmp_path / "m.onnx"
    target.write_bytes(b"previous export")
    with pytest.raises(UnsupportedOpsError) as caught:
        onnxport.export(UsesUnsupported(), (torch.randn(3),), target)
    message = str(caught.value)
    assert "2 unsupported op(s)" in message
    assert "onnxport_test::first" in message and "onnxport_test::second" in message
    assert "test_api.py" in message  # where in the user's code
    assert target.read_bytes() == b"previous export"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def test_failed_save_leaves_existing_file(tmp_path, small, monkeypatch):
    model, x = small
    target = tmp_path / "m.onnx"
    target.write_bytes(b"previous export")

    def broken_write(model, stream, **options):
        stream.write(b"half a model")
        raise OSError("disk full")

    monkeypatch.setattr(onnxport.program, "write_model", broken_write)
    with pytest.raises(OSError, match="disk full"):
        onnxport.export(model, (x,), target)
    assert target.read_bytes() == b"previous export"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def test_existing_file_is_replaced_by_a_complete_one(tmp_path, small):
    model, x = small
    target = tmp_path / "m.onnx"
    target.write_bytes(b"previous export")
    onnxport.export(model, (x,), target)
    onnx.checker.check_model(str(target))


@pytest.mark.parametrize("option,value", [("training", "TRAINING"),
                                          ("external_data", "yes")])
def test_unsupported_option_values(small, option, value):
    model, x = small
    with pytest.raises(InvalidExportOptionsError, match=option):
        onnxport.export(model, (x,), **{option: value})


# -- A12 / D1 ------------------------------------------------------------------------------
def test_verbose_prints_the_graph(small, capsys):
    model, x = small
    onnxport.export(model, (x,), verbose=True)
    out = capsys.readouterr().out
    assert "Conv" in out and "Gemm" in out


def test_export_to_pretty_string(small):
    model, x = small
    text = onnxport.export_to_pretty_string(model, (x,))
    assert "Conv" in text and "conv.weight" in text


def test_verify_reports_per_output():
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    program = onnxport.export(TwoInputs(), (a, b), verify=True)
    assert len(program.verification) == 2
    assert all(r.passed and r.max_abs_diff < 1e-5 for r in program.verification)


def test_verify_catches_a_mismatch(monkeypatch):
    from onnxport import VerificationError
    from onnxport.translate.ops import elementwise  # noqa: F401
    from onnxport.translate.registry import default_registry

    registry = default_registry()
    original = registry.lookup("aten::mul.Tensor", 18)

    def wrong_mul(g, self, other):
        return g.op("Add", self, other)

    registry.register("aten::mul", wrong_mul, since_opset=1)
    try:
        with pytest.raises(VerificationError, match="MISMATCH"):
            onnxport.export(TwoInputs(), (torch.randn(2, 3), torch.randn(2, 3)), verify=True)
    finally:
        registry.register("aten::mul", original.function, since_opset=original.since_opset)


def test_onnx_program_save_model_state(tmp_path, small):
    model, x = small
    program = onnxport.export(model, (x,))
    other = Small().eval()
    state = tmp_path / "state.pt"
    torch.save(other.state_dict(), state)
    program.save(tmp_path / "m.onnx", model_state=str(state))
    torch.testing.assert_close(run(str(tmp_path / "m.onnx"), x)[0], expected(other, x).numpy(),
                               rtol=1e-3, atol=1e-4)


def test_pathlib_is_pathlike():
    assert isinstance(pathlib.Path("x"), os.PathLike)


def test_the_garbage_collector_is_paused_during_an_export_and_restored():
    # Collections an export's objects triggered walked torch's whole heap (a full one took
    # 1 s, every few exports of a mid-size model).
    import gc

    seen = []
    model = torch.nn.Linear(2, 2)
    onnxport.export(model, (torch.randn(1, 2),), dynamo=False,
                    on_stage=lambda stage: seen.append(gc.isenabled()))
    assert seen and not any(seen)
    assert gc.isenabled()
    with pytest.raises(Exception):
        onnxport.export(model, (torch.randn(1, 3),), dynamo=False)
    assert gc.isenabled()
    gc.disable()
    try:  # a caller's own choice is kept
        onnxport.export(model, (torch.randn(1, 2),), dynamo=False)
        assert not gc.isenabled()
    finally:
        gc.enable()
