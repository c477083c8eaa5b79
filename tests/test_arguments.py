"""export()'s argument checks (onnxport/_arguments.py): a bad argument is refused with a message
naming it, what was given and what is accepted, and leaves no file (nor changes an old one)."""

from __future__ import annotations

import pytest
import torch

import onnxport
from onnxport import InvalidExportOptionsError


class Affine(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 4)

    def forward(self, x):
        return self.fc(x) + 1


X = torch.randn(2, 3)


def assert_refused(tmp_path, match: str, model=None, args=(X,), **options):
    """The export is refused with ``match`` in the message; with no file at f it writes none,
    and a file already at f keeps its bytes."""
    model = model if model is not None else Affine()
    fresh = tmp_path / "fresh.onnx"
    with pytest.raises(InvalidExportOptionsError, match=match) as caught:
        onnxport.export(model, args, fresh, **options)
    assert not fresh.exists()
    existing = tmp_path / "existing.onnx"
    existing.write_bytes(b"previous export")
    with pytest.raises(InvalidExportOptionsError, match=match):
        onnxport.export(model, args, existing, **options)
    assert existing.read_bytes() == b"previous export"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing.onnx"]
    return str(caught.value)


# -- flags: any non-empty string would otherwise count as True -------------------------------
@pytest.mark.parametrize("option,value", [
    ("export_params", "False"), ("verify", "no"), ("optimize", "no"), ("verbose", "no"),
    ("do_constant_folding", "no"), ("keep_initializers_as_inputs", 1), ("dynamo", "yes"),
    ("autograd_inlining", 0), ("external_data", "yes"),
])
def test_flags_must_be_booleans(tmp_path, option, value):
    message = assert_refused(tmp_path, option, **{option: value})
    assert repr(value) in message and "True" in message and "False" in message


def test_verbose_none_is_accepted():
    program = onnxport.export(Affine().eval(), (X,), verbose=None, external_data=None)
    assert len(program.model.graph.outputs) == 1


# -- names ---------------------------------------------------------------------------------
@pytest.mark.parametrize("options,match", [
    ({"input_names": [""]}, "input_names must be a list of non-empty strings, got ''"),
    ({"output_names": [3]}, "output_names must be a list of non-empty strings, got 3"),
    ({"input_names": "x"}, "input_names must be a list of strings, got str"),
    ({"output_names": ["y", "y"]}, r"output_names has repeated names \['y'\]"),
    ({"input_names": ["y"], "output_names": ["y"]}, r"\['y'\] given both in input_names and"),
])
def test_bad_names(tmp_path, options, match):
    assert_refused(tmp_path, match, **options)


@pytest.mark.parametrize("argument", ["input_names", "output_names"])
def test_name_of_a_weight_is_refused(tmp_path, argument):
    # Today this writes a model that fails ONNX's checker (two values named fc.weight).
    assert_refused(tmp_path, rf"{argument} gives \['fc.weight'\], which is already the name of a "
                   "weight", **{argument: ["fc.weight"]})


class Sum(torch.nn.Module):
    def forward(self, x, y):
        return x.sum(0) + y.sum(0)


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "dynamo=False"])
def test_a_name_given_to_one_input_that_another_has_by_default_is_taken_once(dynamo):
    # input_names=["y"] for forward(x, y): x is y, and y is y_1. The file had two values
    # named y, which the checker refused (the suite's harness passes such names).
    x, y = torch.randn(1, 4), torch.randn(3, 4)
    program = onnxport.export(Sum(), (x, y), input_names=["y"],
                              dynamic_axes={"y": {0: "rows"}}, dynamo=dynamo)
    assert [v.name for v in program.model.graph.inputs] == ["y", "y_1"]
    assert str(program.model.graph.inputs[0].shape) == "[rows,4]"
    for inputs in [(x, y), (torch.randn(5, 4), y)]:
        torch.testing.assert_close(program(*inputs)[0], Sum()(*inputs))


# -- dynamic_axes --------------------------------------------------------------------------
@pytest.mark.parametrize("dynamo", [True, False])
def test_dynamic_axes_key_naming_nothing_is_left_out_with_a_warning(dynamo):
    # torch.onnx warns and exports (one dict passed to several variants of a model).
    model = Affine().eval()
    with pytest.warns(UserWarning, match="dynamic_axes names 'nothing', which is neither an "
                      "input nor an output") as caught:
        program = onnxport.export(model, (X,), dynamic_axes={"nothing": {0: "batch"}},
                                  dynamo=dynamo)
    message = next(str(w.message) for w in caught if "nothing" in str(w.message))
    assert "inputs are x" in message and "outputs add" in message  # the names it could use
    with torch.no_grad():
        torch.testing.assert_close(program(X)[0], model(X), rtol=1e-3, atol=1e-4)


def test_dynamic_axes_unknown_axis_of_an_input_is_still_an_error(tmp_path):
    assert_refused(tmp_path, r"dynamic_axes\['x'\] names axis 2, but input 'x' has 2 dimensions",
                   dynamic_axes={"x": {2: "batch"}, "nothing": {0: "batch"}})


def test_dynamic_axes_output_axis_out_of_range(tmp_path):
    assert_refused(tmp_path, r"dynamic_axes\['out'\] names axis 5, but output 'out' has 2 "
                   "dimensions", output_names=["out"], dynamic_axes={"out": {5: "batch"}})


def test_dynamic_axes_must_be_a_dict(tmp_path):
    assert_refused(tmp_path, "dynamic_axes must be a dict", dynamic_axes=[0])


def test_dynamic_axes_on_output_still_works():
    x5 = torch.randn(5, 3)
    model = Affine().eval()
    program = onnxport.export(model, (X,), input_names=["x"], output_names=["out"],
                              dynamic_axes={"x": {0: "batch"}, "out": {0: "batch"}})
    assert str(program.model.graph.outputs[0].shape[0]) == "batch"
    with torch.no_grad():
        torch.testing.assert_close(program(x5)[0], model(x5), rtol=1e-3, atol=1e-4)


# -- inputs --------------------------------------------------------------------------------
def test_too_many_positional_inputs(tmp_path):
    assert_refused(tmp_path, r"model.forward takes 1 positional input\(s\) \(x\), 2 were given",
                   args=(X, X))


def test_unexpected_keyword_input(tmp_path):
    assert_refused(tmp_path, "do not fit model.forward", args=(X,), kwargs={"scale": 2.0})


def test_too_many_inputs_to_a_function(tmp_path):
    assert_refused(tmp_path, r"model takes 1 positional input\(s\) \(z\), 3 were given",
                   model=lambda z: z * 2, args=(X, X, X))


def test_complex_input_is_refused(tmp_path):
    message = assert_refused(tmp_path, "complex", model=lambda z: z * 2,
                             args=(torch.randn(2, dtype=torch.complex64),))
    assert "args[0]" in message and "torch.view_as_real" in message


def test_complex_keyword_input_is_refused(tmp_path):
    assert_refused(tmp_path, r"kwargs\['z'\] is a torch.complex64", model=lambda z: z * 2,
                   args=(), kwargs={"z": torch.randn(2, dtype=torch.complex64)})


# -- other options -------------------------------------------------------------------------
def test_unknown_keyword_suggests_the_right_one(tmp_path):
    message = assert_refused(tmp_path, "unknown keyword argument.*'opset'; did you mean "
                             "opset_version", opset=18)
    assert "export() takes:" in message


def test_unknown_keyword_with_a_typo():
    with pytest.raises(InvalidExportOptionsError, match="did you mean input_names"):
        onnxport.export(Affine(), (X,), inputs_names=["x"])


def test_on_stage_must_be_callable(tmp_path):
    assert_refused(tmp_path, "on_stage must be a function.*got 5 \\(int\\)", on_stage=5)


def test_on_stage_is_called_with_each_stage():
    stages = []
    onnxport.export(Affine(), (X,), on_stage=stages.append)
    assert stages[:2] == ["capture", "translate"]


@pytest.mark.parametrize("axes,match", [
    ({"x": {0: None}}, r"dimension names are non-empty strings such as 'batch', got None"),
    ({"x": {0: ""}}, "dimension names are non-empty strings"),
    ({0: {0: "batch"}}, "dynamic_axes keys are input or output names .*got 0"),
])
def test_dynamic_axes_names_are_strings(tmp_path, axes, match):
    assert_refused(tmp_path, match, dynamic_axes=axes)


def test_artifacts_dir_is_a_path(tmp_path):
    assert_refused(tmp_path, "artifacts_dir must be a folder path", artifacts_dir=3)


# -- devices: without a GPU, "meta" stands for the other device ----------------------------
def test_a_model_split_across_devices_is_refused_naming_both():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    model[1].to("meta")
    with pytest.raises(InvalidExportOptionsError) as caught:
        onnxport.export(model, (torch.randn(2, 3),))
    message = str(caught.value)
    assert "several devices" in message and "cpu (0.weight" in message \
        and "meta (1.weight" in message and "model.to(device)" in message


def test_an_input_on_another_device_than_the_weights_is_named():
    class TwoInputs(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(3, 3)

        def forward(self, x, extra):
            return self.fc(x) + extra["bias"]

    extra = {"bias": torch.randn(3, device="meta")}
    with pytest.raises(InvalidExportOptionsError) as caught:
        onnxport.export(TwoInputs(), (torch.randn(2, 3),), kwargs={"extra": extra})
    message = str(caught.value)
    assert "input kwargs['extra']['bias'] is on meta" in message \
        and "on cpu (fc.weight" in message


def test_a_cpu_scalar_tensor_goes_with_weights_anywhere():
    # torch mixes a 0-d CPU tensor with a tensor of any device, as it does a number.
    class Scaled(torch.nn.Module):
        def forward(self, x, scale):
            return x * scale

    x, scale = torch.randn(2, 3), torch.tensor(2.0)
    program = onnxport.export(Scaled(), (x, scale))
    torch.testing.assert_close(program(x, scale)[0], x * scale, rtol=1e-3, atol=1e-4)


def test_cpu_integer_inputs_go_with_weights_anywhere_but_cpu_floats_do_not():
    # pack_padded_sequence takes its lengths on the CPU beside cuda data ("meta" here): the
    # check refused the packed RNN exported from cuda. Floats on the CPU are still named.
    from onnxport._arguments import check_devices

    model = torch.nn.LSTM(4, 5).to("meta")
    x = torch.randn(6, 3, 4, device="meta")
    check_devices(model, (x, torch.tensor([6, 2, 4])), {})
    check_devices(model, (x, torch.tensor([[True, False]])), {})
    with pytest.raises(InvalidExportOptionsError, match=r"input args\[1\] is on cpu"):
        check_devices(model, (x, torch.randn(3)), {})


def test_a_destination_in_a_folder_no_file_can_be_made_in_is_refused_before_capture(tmp_path):
    # /proc: the folder exists and looks writable to root, yet no file can be made there.
    with pytest.raises(InvalidExportOptionsError) as caught:
        onnxport.export(torch.nn.ReLU(), (torch.randn(2),), "/proc/r.onnx")
    message = str(caught.value)
    assert "'/proc/r.onnx'" in message and "no file can be created" in message
    assert ".tmp" not in message


def test_a_destination_under_a_file_says_it_is_a_file(tmp_path):
    (tmp_path / "afile").write_text("")
    with pytest.raises(InvalidExportOptionsError, match="is a file, not a folder"):
        onnxport.export(torch.nn.ReLU(), (torch.randn(2),), tmp_path / "afile" / "r.onnx")
