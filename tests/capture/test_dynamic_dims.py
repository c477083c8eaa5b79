"""A dim asked to be dynamic stays dynamic whatever its example size (issue 7): from a batch of
1, in every form of asking; and when the model really fixes it, the export warns, naming the
input, the axis and the line, and the dim is static. The capture records its strategies."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.export import Dim

import onnxport
from onnxport.capture import capture_torch_export
from onnxport.errors import CaptureError, DynamicDimensionFixedWarning


class SmallNet(torch.nn.Module):
    """Conv, pool, a batch-keeping view and a linear: what most exported models do."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4).eval()
        self.fc = torch.nn.Linear(4 * 4 * 4, 5)

    def forward(self, x, scale):
        y = torch.nn.functional.adaptive_avg_pool2d(self.bn(self.conv(x)).relu(), 4)
        return self.fc(y.view(y.shape[0], -1)) * scale


def _inputs(batch):
    return torch.randn(batch, 3, 8, 8), torch.rand(batch, 1)


def _check_runs(program, model, batches=(1, 3)):
    for batch in batches:
        args = _inputs(batch)
        with torch.no_grad():
            expected = model(*args)
        (actual,) = program(*args)
        torch.testing.assert_close(actual, expected, rtol=1e-3, atol=1e-4)


BATCH = Dim("batch")
FORMS = {
    "dynamic_axes dict": dict(input_names=["x", "scale"],
                              dynamic_axes={"x": {0: "batch"}, "scale": {0: "batch"}}),
    "dynamic_axes list": dict(input_names=["x", "scale"], dynamic_axes={"x": [0], "scale": [0]}),
    "dynamic_axes mixed": dict(input_names=["x", "scale"],
                               dynamic_axes={"x": {0: "batch"}, "scale": [0]}),
    "named Dim": dict(dynamic_shapes={"x": {0: BATCH}, "scale": {0: BATCH}}),
    "Dim.DYNAMIC": dict(dynamic_shapes={"x": {0: Dim.DYNAMIC}, "scale": {0: Dim.DYNAMIC}}),
    "Dim.AUTO": dict(dynamic_shapes={"x": {0: Dim.AUTO}, "scale": {0: Dim.AUTO}}),
    "strings": dict(dynamic_shapes=({0: "batch"}, {0: "batch"})),
}
# Unnamed dims are named after the first input that has them (x * scale makes them one dim).
NAMES = {"dynamic_axes list": "x_dynamic_axes_1", "Dim.DYNAMIC": "x_dim_0", "Dim.AUTO": "x_dim_0"}


@pytest.mark.parametrize("form", list(FORMS))
def test_dynamic_batch_from_an_example_batch_of_one(form):
    model = SmallNet().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DynamicDimensionFixedWarning)
        program = onnxport.export(model, _inputs(1), **FORMS[form])
    name = NAMES.get(form, "batch")
    inputs = program.model.graph.inputs
    assert str(inputs[0].shape[0]) == name and str(inputs[1].shape[0]) == name
    # The output carries the input's batch, under the user's name for it.
    assert str(program.model.graph.outputs[0].shape[0]) == name
    _check_runs(program, model)


def test_dynamic_axes_on_an_output_name_the_output_dim():
    model = SmallNet().eval()
    program = onnxport.export(model, _inputs(1), input_names=["x", "scale"], output_names=["y"],
                              dynamic_axes={"x": {0: "batch"}, "scale": {0: "batch"},
                                            "y": {0: "batch"}})
    assert str(program.model.graph.outputs[0].shape[0]) == "batch"
    _check_runs(program, model)


def test_example_of_size_zero_stays_dynamic():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU()).eval()
    program = onnxport.export(model, (torch.randn(0, 3),), dynamic_shapes=({0: BATCH},))
    assert str(program.model.graph.inputs[0].shape[0]) == "batch"
    for batch in (2, 1, 0):
        x = torch.randn(batch, 3)
        torch.testing.assert_close(program(x)[0], model(x))


class BranchesOnBatch(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] == 1:  # fixes the batch: the line the warning names
            return x * 2
        return x * 3


class ExpandsToLiteral(torch.nn.Module):
    def forward(self, x):
        return x.expand(4, 3) + 1


@pytest.mark.parametrize("model, line", [(BranchesOnBatch(), "if x.shape[0] == 1:"),
                                         (ExpandsToLiteral(), "return x.expand(4, 3) + 1")],
                         ids=["branch", "expand"])
@pytest.mark.parametrize("shapes", [{"x": {0: BATCH}}, {"x": {0: Dim.DYNAMIC}},
                                    {"x": {0: Dim.AUTO}}], ids=["named", "DYNAMIC", "AUTO"])
def test_a_dim_the_model_fixes_is_static_with_a_warning_naming_the_line(model, line, shapes):
    with pytest.warns(DynamicDimensionFixedWarning) as record:
        program = onnxport.export(model, (torch.randn(1, 3),), dynamic_shapes=shapes)
    message = str(record[0].message)
    assert "axis 0" in message and "'x'" in message and "fixed to 1" in message
    assert "test_dynamic_dims.py:" in message and line in message
    assert record[0].filename == __file__  # the warning points at the export call
    assert list(program.model.graph.inputs[0].shape) == [1, 3]
    x = torch.randn(1, 3)
    torch.testing.assert_close(program(x)[0], model(x))


def test_a_dim_fixed_from_an_example_larger_than_one_warns_too():
    model = torch.nn.Sequential()
    model.forward = lambda x: x.view(4, 3) * 2  # fixes the batch to the example's 4
    with pytest.warns(DynamicDimensionFixedWarning, match="fixed to 4"):
        program = onnxport.export(model, (torch.randn(4, 3),), input_names=["x"],
                                  dynamic_axes={"x": {0: "batch"}})
    assert list(program.model.graph.inputs[0].shape) == [4, 3]


class SqueezesBatch(torch.nn.Module):
    def forward(self, x):
        return x.squeeze(0) + 1


def test_a_model_treating_size_one_specially_is_static_with_a_warning():
    # Kept symbolic, size 1 would be assumed not to squeeze: the graph's output shape at the
    # example would not be eager's.
    with pytest.warns(DynamicDimensionFixedWarning, match="returns \\[3\\]"):
        program = onnxport.export(SqueezesBatch(), (torch.randn(1, 3),),
                                  dynamic_shapes={"x": {0: BATCH}})
    x = torch.randn(1, 3)
    assert program(x)[0].shape == (3,)
    torch.testing.assert_close(program(x)[0], x.squeeze(0) + 1)


class TokenAttention(torch.nn.Module):
    """A class token expanded to the batch, then attention (torchvision's ViT in small): from
    a batch of 1 torch fixes the batch in linear's contiguity check."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.token = torch.nn.Parameter(torch.randn(1, 1, 8))
        self.attention = torch.nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x):
        x = torch.cat([self.token.expand(x.shape[0], -1, -1), x], dim=1)
        return self.attention(x, x, x, need_weights=False)[0]


def test_a_batch_torch_fixes_at_size_one_is_traced_at_size_two():
    model = TokenAttention().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DynamicDimensionFixedWarning)
        program = onnxport.export(model, (torch.randn(1, 5, 8),), dynamic_shapes={"x": {0: BATCH}})
    assert str(program.model.graph.inputs[0].shape[0]) == "batch"
    assert str(program.model.graph.outputs[0].shape[0]) == "batch"
    for batch in (1, 3):
        x = torch.randn(batch, 5, 8)
        with torch.no_grad():
            torch.testing.assert_close(program(x)[0], model(x), rtol=1e-3, atol=1e-4)
    captured = capture_torch_export(model, (torch.randn(1, 5, 8),), {},
                                    dynamic_shapes={"x": {0: BATCH}})
    assert captured.strategy == "non-strict, sizes 0 and 1 traced at 2"
    assert [name for name, _ in captured.failed_strategies] == ["non-strict"]
    assert "fixed to 1" in captured.failed_strategies[0][1]


def test_the_capture_records_its_strategy():
    captured = capture_torch_export(SmallNet().eval(), _inputs(1), {},
                                    dynamic_shapes={"x": {0: BATCH}, "scale": {0: BATCH}})
    assert captured.strategy == "non-strict" and captured.failed_strategies == []
    with pytest.warns(DynamicDimensionFixedWarning):
        captured = capture_torch_export(BranchesOnBatch(), (torch.randn(1, 3),), {},
                                        dynamic_shapes={"x": {0: BATCH}})
    assert captured.strategy == "non-strict, fixed dims static"
    assert [(d.position, d.axis, d.size) for d in captured.fixed_dims] == [(0, 0, 1)]


class DataDependent(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # a branch on values: no strategy can capture it
            return x + 1
        return x - 1


def test_capture_failure_names_the_line_and_the_strategies_tried():
    with pytest.raises(CaptureError) as caught:
        onnxport.export(DataDependent(), (torch.randn(2, 3),))
    message = str(caught.value)
    assert "test_dynamic_dims.py:" in message and "if x.sum() > 0:" in message
    assert "non-strict:" in message and "strict:" in message
    assert "fallback=True" in message and "dynamo=False" in message


class SlicesAPositionTable(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("positions", torch.arange(64).unsqueeze(0))

    def forward(self, x):
        return x + self.positions[:, : x.shape[1]]


def test_a_dim_the_model_bounds_stays_dynamic_with_a_warning():
    with pytest.warns(DynamicDimensionFixedWarning, match="at most 64") as record:
        program = onnxport.export(SlicesAPositionTable(), (torch.ones(2, 8, dtype=torch.long),),
                                  dynamic_shapes={"x": {0: "batch", 1: "sequence"}})
    assert "self.positions[:, : x.shape[1]]" in str(record[0].message)
    assert record[0].filename == __file__  # points at the export call
    assert str(program.model.graph.inputs[0].shape[1]) == "sequence"
    x = torch.ones(3, 20, dtype=torch.long)
    torch.testing.assert_close(program(x)[0], SlicesAPositionTable()(x))


class WritesIntoAView(torch.nn.Module):
    def forward(self, x):
        y = x.clone()
        y[:, 0] = 0  # read back through y: the capture is functionalized
        return torch.einsum("bij,bkj->bik", y, x)


def test_a_functionalized_graph_from_a_batch_of_one_stays_dynamic():
    model = WritesIntoAView()
    program = onnxport.export(model, (torch.randn(1, 4, 3),), dynamic_shapes={"x": {0: BATCH}})
    assert str(program.model.graph.inputs[0].shape[0]) == "batch"
    for batch in (1, 3):
        x = torch.randn(batch, 4, 3)
        torch.testing.assert_close(program(x)[0], model(x), rtol=1e-3, atol=1e-4)
