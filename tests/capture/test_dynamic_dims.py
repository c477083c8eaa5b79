"""A dim asked to be dynamic stays dynamic whatever its example size (issue 7): from a batch of
1, in every form of asking; and when the model really fixes it, the export warns, naming the
input, the axis and the line, and the dim is static. The capture records its strategies."""

from __future__ import annotations

import re
import warnings

import pytest
import torch
from torch.export import Dim

import onnxport
from onnxport._versions import torch_at_least
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
        onnxport.export(DataDependent(), (torch.randn(2, 3),), fallback=False)
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


# torch.onnx.export(dynamo=True) takes dim names as strings wherever torch.export takes a Dim;
# a string is a dynamic dim that the ONNX model calls so, and one name in two places is one dim.
STRING_FORMS = {
    "dict by name": {"x": {0: "batch"}, "scale": {0: "batch"}},
    "tuple": ({0: "batch"}, {0: "batch"}),
    "list": [{0: "batch"}, {0: "batch"}],
    "per-axis lists": {"x": ["batch", None, None, None], "scale": ("batch", None)},
    "negative axis": {"x": {-4: "batch"}, "scale": {-2: "batch"}},
    "string beside a Dim": {"x": {0: BATCH}, "scale": {0: "batch"}},
}


@pytest.mark.parametrize("form", list(STRING_FORMS))
def test_string_dim_names_in_every_position_torch_export_takes_a_dim(form):
    model = SmallNet().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DynamicDimensionFixedWarning)
        program = onnxport.export(model, _inputs(1), dynamic_shapes=STRING_FORMS[form])
    graph = program.model.graph
    assert [str(v.shape[0]) for v in [*graph.inputs, *graph.outputs]] == ["batch"] * 3
    _check_runs(program, model)


class ReadsANestedDictAndAKeyword(torch.nn.Module):
    def forward(self, inputs, scale=None):
        return inputs["a"] * 2 + inputs["b"][0], scale.sum(-1)


@pytest.mark.parametrize("shapes", [
    {"inputs": {"a": {0: "batch"}, "b": [{0: "batch"}]}, "scale": {0: "batch", 1: "width"}},
    # A tuple covers the keyword arguments after the positional ones (the old code left the
    # keyword's strings to torch.export, which refuses them).
    ({"a": {0: "batch"}, "b": [{0: "batch"}]}, {0: "batch", 1: "width"}),
])
@pytest.mark.parametrize("path", [{}, {"dynamo": False}], ids=["torch.export", "dynamo=False"])
def test_string_dim_names_on_nested_inputs_and_keyword_arguments(shapes, path):
    model = ReadsANestedDictAndAKeyword()

    def example(batch, width):
        return ({"a": torch.randn(batch, 4), "b": [torch.randn(batch, 4)]},), \
            {"scale": torch.randn(batch, width)}

    args, kwargs = example(1, 1)
    program = onnxport.export(model, args, kwargs=kwargs, dynamic_shapes=shapes, **path)
    graph = program.model.graph
    assert [str(v.shape) for v in graph.inputs] == ["[batch,4]", "[batch,4]", "[batch,width]"]
    assert [str(v.shape) for v in graph.outputs] == ["[batch,4]", "[batch]"]
    for batch, width in ((1, 1), (3, 5)):
        args, kwargs = example(batch, width)
        for actual, expected in zip(program(*args, **kwargs), model(*args, **kwargs)):
            torch.testing.assert_close(actual, expected)


def test_a_small_resnet_from_a_batch_of_one_with_a_string_batch():
    from torchvision.models.resnet import BasicBlock, ResNet

    torch.manual_seed(0)
    model = ResNet(BasicBlock, [1, 1, 1, 1], num_classes=10).eval()
    program = onnxport.export(model, (torch.randn(1, 3, 32, 32),),
                              dynamic_shapes={"x": {0: "batch"}})
    assert str(program.model.graph.inputs[0].shape) == "[batch,3,32,32]"
    assert str(program.model.graph.outputs[0].shape) == "[batch,10]"
    for batch in (1, 3):
        x = torch.randn(batch, 3, 32, 32)
        with torch.no_grad():
            torch.testing.assert_close(program(x)[0], model(x), rtol=1e-3, atol=1e-4)


class TinyTransformer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(50, 16)
        layer = torch.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0,
                                                 batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = torch.nn.Linear(16, 50)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)))


def test_a_tiny_transformer_from_a_batch_of_one_with_string_batch_and_sequence():
    model = TinyTransformer().eval()
    program = onnxport.export(model, (torch.randint(0, 50, (1, 5)),),
                              dynamic_shapes=({0: "batch", 1: "sequence"},))
    assert str(program.model.graph.inputs[0].shape) == "[batch,sequence]"
    assert str(program.model.graph.outputs[0].shape) == "[batch,sequence,50]"
    for shape in ((1, 5), (3, 9)):
        tokens = torch.randint(0, 50, shape)
        with torch.no_grad():
            torch.testing.assert_close(program(tokens)[0], model(tokens), rtol=1e-3, atol=1e-4)


class TwoOutputs(torch.nn.Module):
    def forward(self, x, b):
        return x.relu(), b.sigmoid()


# The forms torch.onnx's own tests give torch.onnx.export(dynamo=True), names made strings.
TORCH_ONNX_FORMS = {
    "keyed by input_names": dict(input_names=["input_x", "input_b"], dynamic_shapes={
        "input_x": {0: "customx_dim_0", 1: "customx_dim_1"}, "input_b": {0: "customb_dim_0"}}),
    "tuple without names": dict(dynamic_shapes=(
        {0: "customx_dim_0", 1: "customx_dim_1"}, {0: "customb_dim_0"})),
    "keyed by parameter, Dim beside strings": dict(dynamic_shapes={
        "x": {0: Dim("customx_dim_0"), 1: "customx_dim_1"}, "b": {0: "customb_dim_0"}}),
}


@pytest.mark.parametrize("form", list(TORCH_ONNX_FORMS))
def test_the_dynamic_shapes_forms_torch_onnx_takes(form):
    # The old code took input_names as keys for parameters it did not have (torch.export's
    # error under a CaptureError).
    model = TwoOutputs()
    program = onnxport.export(model, (torch.randn(1, 1, 3), torch.randn(1, 2, 3)),
                              **TORCH_ONNX_FORMS[form])
    graph = program.model.graph
    assert [str(v.shape) for v in [*graph.inputs, *graph.outputs]] == [
        "[customx_dim_0,customx_dim_1,3]", "[customb_dim_0,2,3]"] * 2
    x, b = torch.randn(2, 3, 3), torch.randn(4, 2, 3)
    for actual, expected in zip(program(x, b), model(x, b)):
        torch.testing.assert_close(actual, expected)


class TakesANumber(torch.nn.Module):
    def forward(self, n, x):
        return x * n


def test_a_number_input_takes_none_and_the_tensor_a_string():
    with pytest.warns(UserWarning, match="n=2 is a graph input"):
        program = onnxport.export(TakesANumber(), (2, torch.randn(1, 3)),
                                  dynamic_shapes=(None, {0: "batch"}))
    assert [str(v.shape) for v in program.model.graph.inputs] == ["[]", "[batch,3]"]
    x = torch.randn(3, 3)
    torch.testing.assert_close(program(2, x)[0], x * 2)
    with pytest.raises(onnxport.errors.InvalidExportOptionsError,
                       match=r"dynamic_shapes\[0\] \(input 'n'\) = \{0: 'batch'\}, but that "
                             r"input is not a tensor \(int 2\)"):
        onnxport.export(TakesANumber(), (2, torch.randn(1, 3)),
                        dynamic_shapes=({0: "batch"}, {0: "batch"}))


@pytest.mark.parametrize("shapes, message", [
    ({"x": {0: 2.5}}, r"dynamic_shapes\['x'\]\[0\] = 2.5 \(float\); a dim is a dim name string"),
    ({"x": {0: 4}}, r"dynamic_shapes\['x'\]\[0\] = 4, but the example's size there is 1"),
    ({"x": {0: ""}}, r"dynamic_shapes\['x'\]\[0\] is an empty string"),
    ({"images": {0: "batch"}}, r"dynamic_shapes names 'images', which is no input given to the "
                               r"model; its inputs are 'scale', 'x'"),
    ({"x": {4: "batch"}}, r"dynamic_shapes\['x'\] names axis 4, but the input has 4 dimensions"),
    ({"x": {"0": "batch"}}, r"dynamic_shapes\['x'\] has the key '0'; axes are ints"),
    ({"x": [0]}, r"dynamic_shapes\['x'\] = \[0\] lists 1 dims but the input has 4"),
    ({"x": "batch"}, r"dynamic_shapes\['x'\] = 'batch': a tensor input takes a dict"),
    (({0: "batch"}, {0: "batch"}, {0: "batch"}), r"dynamic_shapes has 3 entries but the model "
                                                 r"is given 2 inputs \(x, scale\)"),
])
def test_bad_dynamic_shapes_name_the_argument_what_was_given_and_what_is_accepted(shapes,
                                                                                    message):
    # The old code passed these to torch.export, which failed with its own words under a
    # CaptureError (or, for the empty name, exported a dim with no name).
    with pytest.raises(onnxport.errors.InvalidExportOptionsError, match=message):
        onnxport.export(SmallNet().eval(), _inputs(1), dynamic_shapes=shapes)


def test_string_dim_names_keyed_by_argument_name_on_an_exported_program():
    # The old code knew no argument names for an ExportedProgram and dropped the dict's names.
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU()).eval()
    exported = torch.export.export(model, (torch.randn(2, 3),),
                                   dynamic_shapes={"input": {0: Dim("b")}})
    program = onnxport.export(exported, (torch.randn(2, 3),),
                              dynamic_shapes={"input": {0: "batch"}})
    assert str(program.model.graph.inputs[0].shape) == "[batch,3]"
    for batch in (1, 3):
        x = torch.randn(batch, 3)
        torch.testing.assert_close(program(x)[0], model(x), rtol=1e-3, atol=1e-4)


class HalvedRows(torch.nn.Module):
    def forward(self, x):
        return x.reshape(int(x.size(0) / 2), -1) * 2


def test_a_size_made_a_python_number_is_not_left_looking_dynamic():
    # Non-strict torch.export made int(x.size(0) / 2) the constant 2 and kept axis 0 dynamic,
    # its only trace a guard the program's module checks: the ONNX model gave (2, 12) for 8
    # rows where torch gives (4, 6). Strict capture follows the division.
    model, x = HalvedRows(), torch.randn(4, 3)
    program = onnxport.export(model, (x,), input_names=["x"], dynamic_axes={"x": {0: "n"}})
    for rows in (4, 8, 6):
        given = torch.randn(rows, 3)
        actual, expected = program(given)[0], model(given)
        assert actual.shape == expected.shape
        torch.testing.assert_close(actual, expected, rtol=1e-3, atol=1e-4)


def test_the_guard_that_pins_a_size_is_found_and_a_periodic_one_is_not():
    from onnxport.capture.specialization import _PinningGuards

    def first_size(module, rows):
        program = torch.export.export(module, (torch.randn(rows, 3),),
                                      dynamic_shapes=({0: Dim.AUTO},), strict=False)
        placeholder = next(n for n in program.graph.nodes if n.op == "placeholder")
        return program, placeholder.meta["val"].shape[0].node.expr

    program, symbol = first_size(HalvedRows(), 4)
    assert "math.trunc" in _PinningGuards(program).of(symbol, 4)

    class Pairs(torch.nn.Module):  # even sizes only: any even size meets it
        def forward(self, x):
            return x.reshape(x.size(0) // 2, 2, 3)

    program, symbol = first_size(Pairs(), 6)
    assert _PinningGuards(program).of(symbol, 6) is None


def test_a_branch_on_a_size_expression_makes_the_axis_static_with_a_warning():
    # Non-strict torch.export took the branch for 6 rows and kept axis 0 dynamic: at 8 rows the
    # ONNX model doubled where torch triples, silently. The guard names the condition.
    class HalfIsThree(torch.nn.Module):
        def forward(self, x):
            if x.size(0) // 2 == 3:
                return x * 2
            return x * 3

    model, x = HalfIsThree(), torch.randn(6, 3)
    with pytest.warns(DynamicDimensionFixedWarning,
                      match=r"axis 0 \('n'\) of input 'x' is kept at 6: .*// 2\) == 3"):
        program = onnxport.export(model, (x,), input_names=["x"], dynamic_axes={"x": {0: "n"}})
    assert program.model.graph.inputs[0].shape[0] == 6
    torch.testing.assert_close(program(x)[0], model(x), rtol=1e-3, atol=1e-4)


def test_guard_code_is_walked_not_run():
    from onnxport.capture.specialization import _Guard

    size = "L['x'].size()[0]"
    trunc = _Guard.parse(f"math.trunc({size} / 2) == 2", size)
    assert trunc.floating and trunc.holds(5) is True and trunc.holds(8) is False
    floor = _Guard.parse(f"({size} // 2) == 3", size)
    assert not floor.floating and floor.holds(7) is True
    assert _Guard.parse(f"{size} <= 512", size) is None  # a bound, not an equality
    # Anything but arithmetic on the size has no verdict: nothing of it is called.
    assert _Guard.parse(f"__import__('os').getpid() == {size}", size).holds(3) is None


def _last(pieces):
    """The last piece by an index computed from the count, which a capture from an example
    of one piece records as [0] (a literal [-1] of one piece is computed at every size: see
    tests/capture/quirks/test_one_piece_splits.py): what the checks at larger sizes catch."""
    return pieces[len(pieces) - 1]


class _FirstChunk(torch.nn.Module):
    def forward(self, x):
        return x.chunk(2, 0)[0] * 2


class _LastChunk(torch.nn.Module):
    def forward(self, x):
        return _last(x.chunk(2, 0)) * 2  # (one row: the same as [0] at the example)


def _at_sizes(program, model, sizes):
    for size in sizes:
        x = torch.randn(size, 3)
        with torch.no_grad():
            expected = model(x)
        actual = program(x)[0]
        assert actual.shape == expected.shape, (size, actual.shape, expected.shape)
        torch.testing.assert_close(actual, expected, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_the_first_chunk_of_a_dynamic_axis_of_one_row(dynamo):
    # One row makes one chunk, the row itself: the graph was x whole, at every size.
    program = onnxport.export(_FirstChunk(), (torch.randn(1, 3),), input_names=["x"],
                              dynamic_axes={"x": {0: "n"}}, dynamo=dynamo)
    _at_sizes(program, _FirstChunk(), [1, 2, 5, 6])


def _static_by_default_refused_when_traced(model, example, axes, warning, traced_warning):
    """The default path's export of ``model`` (with a warning matching ``warning``, its axis
    kept static); dynamo=False keeps it static too, with a warning matching
    ``traced_warning`` (it refused the export until PyTorch's suite exported such models:
    the file now refuses other sizes, where torch.onnx's answers wrongly at them)."""
    with pytest.warns(DynamicDimensionFixedWarning, match=warning):
        program = onnxport.export(model, (example,), input_names=["x"], dynamic_axes=axes)
    with pytest.warns(DynamicDimensionFixedWarning, match=traced_warning):
        traced = onnxport.export(model, (example,), input_names=["x"], dynamic_axes=axes,
                                 dynamo=False)
    assert [str(v.shape) for v in traced.model.graph.inputs] == \
        [str(v.shape) for v in program.model.graph.inputs]
    torch.testing.assert_close(traced(example)[0], model(example))
    return program


def test_the_last_chunk_from_one_row_is_never_silently_wrong():
    # [-1] and [0] of one chunk are one graph: the default path checks at size 3, sees the
    # difference and keeps the axis static (with a warning); tracing says what to change.
    program = _static_by_default_refused_when_traced(
        _LastChunk(), torch.randn(1, 3), {"x": {0: "n"}}, None,
        "kept at its example's size, 1.*size 2 or more")
    assert program.model.graph.inputs[0].shape[0] == 1


class _LastChunkAfterAShiftIsRemoved(torch.nn.Module):
    def forward(self, x):
        # The size-2 check grew axis 1 with the example's values plus one: minus the max over
        # axis 0 took the shift away, its two rows were alike, and [-1] passed for [0].
        x = x - x.max(0, keepdim=True)[0]
        return _last(x.chunk(2, 1)).chunk(3, 1)[0].reshape(x.size(0), -1).cumsum(1)


def test_the_size_two_check_tells_rows_apart_after_a_shift_is_removed():
    # Found by fuzzing (benchmarks/fuzz_dynamic.py --small, seed 1072): silently wrong at
    # every size of axis 1 but 1, on both paths.
    axes = {"x": {0: "a", 1: "b", 2: "c"}}
    example = torch.randn(2, 1, 3)
    program = _static_by_default_refused_when_traced(
        _LastChunkAfterAShiftIsRemoved(), example, axes, "'b'.*kept at 1",
        "'b'.*kept at its example's size, 1.*size 2 or more")
    assert program.model.graph.inputs[0].shape[1] == 1
    x = torch.randn(4, 1, 5)
    torch.testing.assert_close(program(x)[0], _LastChunkAfterAShiftIsRemoved()(x))


class _EveryFourthColumnFlattened(torch.nn.Module):
    def forward(self, x):
        # 3 columns leave 1: torch's fake flatten then merged the wrong axes (a guard equated
        # an expression of the size with 1), silently wrong at every other size.
        return x[:, ::2][:, ::2].flatten(0, 1).softmax(1)


def test_a_size_pinned_by_a_guard_is_never_silently_wrong():
    # torch.export bounds the axis: a warning says up to which size the model matches, on
    # both paths (tracing's propagation sees the guard and leaves the graph to torch.export).
    axes = {"x": {0: "a", 1: "b", 2: "c"}}
    with pytest.warns(DynamicDimensionFixedWarning, match="'b'.*matches PyTorch only up to 4"):
        onnxport.export(_EveryFourthColumnFlattened(), (torch.randn(3, 3, 4),),
                        input_names=["x"], dynamic_axes=axes)
    with pytest.warns(DynamicDimensionFixedWarning, match="axis 1 .*matches PyTorch only up to 4"):
        onnxport.export(_EveryFourthColumnFlattened(), (torch.randn(3, 3, 4),),
                        input_names=["x"], dynamic_axes=axes, dynamo=False)


def _fails_beyond(program, x, check_name):
    import onnxruntime as ort

    session = ort.InferenceSession(program.model_proto.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    with pytest.raises(Exception, match=check_name):
        session.run(None, {"x": x.numpy()})


def _right_up_to_a_bound_and_refused_beyond(model, example, right_at, beyond, check_name,
                                            dynamo=None, match=None):
    """The program of ``model`` exported with every axis of ``example`` dynamic (warning that
    a dim is bounded or static), checked against eager at the shapes of ``right_at`` and to
    fail beyond the bound, at ``beyond``, at the check ``check_name``."""
    axes = {"x": {axis: "abc"[axis] for axis in range(example.dim())}}
    with pytest.warns(DynamicDimensionFixedWarning, match=match):
        program = onnxport.export(model, (example,), input_names=["x"], dynamic_axes=axes,
                                  dynamo=dynamo)
    for shape in right_at:
        x = torch.randn(shape)
        torch.testing.assert_close(program(x)[0], model(x))
    _fails_beyond(program, torch.randn(beyond), check_name)
    return program


class _BranchOnTheWidth(torch.nn.Module):
    def forward(self, x):
        if x.size(1) <= 4:  # torch.export bounds the width to 4 (a trace fixes it: static)
            return x * 2
        return x * 3


def test_a_bounded_size_fails_the_run_beyond_its_bound():
    # The warning said it; the file answered wrongly beyond the bound all the same. PyTorch's
    # own program refuses sizes beyond its range: so does the ONNX model now, by a check named
    # after the input and the bound.
    _right_up_to_a_bound_and_refused_beyond(
        _BranchOnTheWidth(), torch.randn(3, 3), [(3, 3), (2, 4), (5, 2)], (3, 5),
        "x_axis_1_at_most_4", match="only up to 4")


class _FirstPieceOfTheFlippedColumn(torch.nn.Module):
    def forward(self, x):
        return (x[:1].expand_as(x) + x).flip(0)[:, -1].chunk(3, 0)[0]


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "dynamo=False"])
def test_a_bound_the_program_holds_beyond_is_not_checked(dynamo):
    # torch.export bounds the rows to 3 (the count of pieces), but its program and the
    # shapes it records hold beyond (fuzz_dynamic --small seed 1083: translation computes
    # the pieces at run time): checked at 4 and 7, and kept dynamic.
    model = _FirstPieceOfTheFlippedColumn()
    program = onnxport.export(model, (torch.randn(2, 2),), input_names=["x"],
                              dynamic_axes={"x": {0: "a", 1: "b"}}, dynamo=dynamo)
    for shape in [(2, 2), (5, 2), (7, 4), (12, 3)]:
        x = torch.randn(shape)
        torch.testing.assert_close(program(x)[0], model(x))


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "dynamo=False"])
def test_a_bound_the_recorded_shapes_hold_up_to_only_is_checked(dynamo):
    # torch bounds the width of _EveryFourthColumnFlattened to 4 and records the flattened
    # rows as the batch (one column left). The program, run eagerly, holds beyond, and so
    # did the ONNX values, but under a declared shape that is wrong there, on which a
    # runtime may build: the run fails beyond 4 instead.
    _right_up_to_a_bound_and_refused_beyond(
        _EveryFourthColumnFlattened(), torch.randn(3, 3, 4), [(3, 3, 4), (2, 4, 3)], (3, 5, 4),
        "x_axis_1_at_most_4", dynamo=dynamo)


class _ChunkOfAChunkSized(torch.nn.Module):
    def forward(self, x):
        # 3 columns chunked in 3 leave 1, whose chunk(2) is one piece; torch.export takes the
        # piece for all of it (the arange's length), which holds up to 3 columns only.
        piece = x.chunk(3, 1)[0].chunk(2, 1)[0]
        return piece + torch.arange(piece.size(1), dtype=piece.dtype)


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "dynamo=False"])
def test_a_chunk_of_a_chunk_is_right_up_to_its_bound_and_refused_beyond(dynamo):
    # fuzz_dynamic --small seed 8306 (and 8296): 2 columns where torch gives 1, at 4 columns.
    _right_up_to_a_bound_and_refused_beyond(
        _ChunkOfAChunkSized(), torch.randn(2, 3), [(2, 3), (4, 2), (5, 3)], (4, 5),
        "x_axis_1_at_most_3", dynamo=dynamo)


class _PieceDoubledRepeated(torch.nn.Module):
    """A chunk's piece of one row at the example, doubled: torch records the product's rows
    as 1, and repeat_interleave's Reshape was built on that. The program itself, run
    eagerly, holds at other sizes (its ops compute the piece), so only the recorded shapes
    tell."""

    def __init__(self, chunks: int, index: int):
        super().__init__()
        self.chunks, self.index = chunks, index

    def forward(self, x):
        wide = (x.chunk(self.chunks, 0)[self.index] * 2).repeat_interleave(2, 1)
        return wide @ wide.transpose(0, 1)


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "dynamo=False"])
def test_a_bound_whose_recorded_shapes_hold_up_to_it_only_is_checked(dynamo):
    # fuzz_dynamic --small seed 9023: (1, 1) where torch gives (2, 2) at 6 rows, silently.
    # Of at most 3 rows (torch's bound), chunk(3)'s first piece has 1.
    _right_up_to_a_bound_and_refused_beyond(
        _PieceDoubledRepeated(3, 0), torch.randn(3, 3), [(3, 3), (2, 5)], (6, 4),
        "x_axis_0_at_most_3", dynamo=dynamo)


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "dynamo=False"])
def test_a_guard_on_the_size_of_a_piece_keeps_the_axis_static(dynamo):
    # (1, 1) where torch gives (2, 2) at 5 rows, silently, on both paths: a program that
    # splits had every integer guard taken for a count of pieces, which translation checks
    # at run time. Only a guard that says what a split's count says is one now. (The last
    # chunk of 3 rows has 1: torch guards the piece's size as 1, with no bound on the rows.)
    model = _PieceDoubledRepeated(2, 1)
    with pytest.warns(DynamicDimensionFixedWarning, match="holds only where"):
        program = onnxport.export(model, (torch.randn(3, 3),), input_names=["x"],
                                  dynamic_axes={"x": {0: "a", 1: "b"}}, dynamo=dynamo)
    assert program.model.graph.inputs[0].shape[0] == 3
    x = torch.randn(3, 5)
    torch.testing.assert_close(program(x)[0], model(x))


def test_a_guard_on_a_count_of_pieces_keeps_the_axis_dynamic():
    # chunk(2) of 5 rows makes 2 pieces, as of any number but 1: the count's guard is left
    # to translation, which computes the pieces at run time, and the rows stay dynamic.
    model = _FirstChunk()
    program = onnxport.export(model, (torch.randn(5, 2),), input_names=["x"],
                              dynamic_axes={"x": {0: "a", 1: "b"}})
    assert not isinstance(program.model.graph.inputs[0].shape[0], int)
    for shape in [(5, 2), (9, 3), (7, 2)]:
        x = torch.randn(shape)
        torch.testing.assert_close(program(x)[0], model(x))


def test_from_a_batch_of_one_the_other_dynamic_sizes_are_checked_grown_too():
    # With a batch of 1, torch keeps sizes of 1 symbolic and records no guard for the piece
    # count either: the program had no bound, and was silently wrong from 4 columns on. The
    # check at batch 3 grows the other dynamic sizes too (2 columns to 5): it sees that, and
    # the batch is static; the columns are then bounded as from a larger batch.
    program = _right_up_to_a_bound_and_refused_beyond(
        _ChunkOfAChunkSized(), torch.randn(1, 2), [(1, 2), (1, 3)], (1, 5),
        "x_axis_1_at_most_3")
    assert "at size 3 and the other dynamic sizes doubled" in str(program.capture_attempts)


class _RolledThenSplit(torch.nn.Module):
    def forward(self, x):
        # From a batch of 1, split(2) makes one piece: the program holds up to a batch of 2.
        return (x @ x.transpose(-1, -2)).roll(1, 0).split(2, 0)[0]


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "dynamo=False"])
def test_a_dim_the_program_holds_up_to_two_only_is_static_on_both_paths(dynamo):
    # dynamo=False kept the batch dynamic with a warning ("matches PyTorch only up to 2") and
    # returned every row of a batch of 4 where torch returns 2 (fuzz_dynamic --small seed
    # 1185); the default path makes it static. Now both do, and ONNX Runtime refuses a batch
    # of 4 instead of answering wrongly.
    import onnxruntime as ort

    example = torch.randn(1, 1, 2)
    with pytest.warns(DynamicDimensionFixedWarning, match="axis 0 .*fixed to 1"):
        program = onnxport.export(_RolledThenSplit(), (example,), input_names=["x"],
                                  dynamic_axes={"x": {0: "a", 1: "b", 2: "c"}}, dynamo=dynamo)
    assert program.model.graph.inputs[0].shape[0] == 1
    x = torch.randn(1, 1, 5)
    torch.testing.assert_close(program(x)[0], _RolledThenSplit()(x))
    session = ort.InferenceSession(program.model_proto.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    with pytest.raises(Exception, match="invalid dimensions"):
        session.run(None, {"x": torch.randn(4, 4, 7).numpy()})



class _LastChunkSoftmaxed(torch.nn.Module):
    def forward(self, x):
        # At size 2, [-1] and [0] are one row each, and softmax over a row of one made both
        # ones: the checks at size 2 passed, and the file returned the first chunk (2 rows of
        # 3 where torch returns 1) on both paths, with no warning on dynamo=False (fuzz_dynamic
        # --small seed 6245).
        return _last(x.sort(0)[0].chunk(2, 0)).softmax(0)


def test_the_last_chunk_from_one_row_is_checked_where_it_differs_in_size():
    program = _static_by_default_refused_when_traced(
        _LastChunkSoftmaxed(), torch.randn(1, 6), {"x": {0: "n"}}, "kept at 1: at size 3",
        "kept at its example's size, 1.*has shape \\[2, 6\\]")
    assert program.model.graph.inputs[0].shape[0] == 1


class _MeanOfTheFirstChunk(torch.nn.Module):
    def forward(self, x):
        return x.chunk(3, 1)[0].mean(1)


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_the_one_piece_of_a_split_is_not_declared_as_wide_as_its_input(dynamo):
    # From one column, the chunk's recorded shape was the input's: the file declared the
    # piece [a, b], a pass read the mean's count from the input's shape, and the mean was
    # divided by every column where torch divides by the chunk's (fuzz_dynamic --small seed
    # 7020, the default path).
    program = onnxport.export(_MeanOfTheFirstChunk(), (torch.randn(1, 1),), input_names=["x"],
                              dynamic_axes={"x": {0: "a", 1: "b"}}, dynamo=dynamo)
    for shape in ((3, 3), (5, 4), (2, 7)):
        x = torch.randn(shape)
        torch.testing.assert_close(program(x)[0], _MeanOfTheFirstChunk()(x),
                                   rtol=1e-3, atol=1e-4)


class _AllButTheFirstRowOfTheLastChunk(torch.nn.Module):
    def forward(self, x):
        # At 3 rows the last chunk and the first are one row each, both empty after [1:]: a
        # check at 3 compared nothing, and the file returned the first chunk's rows (fuzz
        # --small seed 7117, dynamo=False).
        return _last(x.mean(1).chunk(3, 0))[1:]


def test_a_check_whose_outputs_are_empty_at_three_checks_at_four():
    with pytest.warns(DynamicDimensionFixedWarning, match="kept at its example's size, 1"):
        program = onnxport.export(_AllButTheFirstRowOfTheLastChunk(), (torch.randn(1, 3),),
                                  input_names=["x"], dynamic_axes={"x": {0: "n"}}, dynamo=False)
    assert program.model.graph.inputs[0].shape[0] == 1


class _AllButTheFirstRowOfTheLastChunkDoubled(torch.nn.Module):
    def forward(self, x):
        return _last(x.chunk(3, 0))[1:] * 2


def test_the_default_path_checks_at_four_where_the_outputs_are_empty_at_three():
    # At 4 rows the file returned rows of the first chunk where torch returns the last's.
    with pytest.warns(DynamicDimensionFixedWarning, match="kept at 1: at size 4"):
        program = onnxport.export(_AllButTheFirstRowOfTheLastChunkDoubled(),
                                  (torch.randn(1, 3),), input_names=["x"],
                                  dynamic_axes={"x": {0: "n"}})
    assert program.model.graph.inputs[0].shape[0] == 1


class _LastChunkPlusItsArange(torch.nn.Module):
    def forward(self, x):
        piece = _last((x / x.numel()).chunk(2, 2))
        return piece + torch.arange(piece.size(-1), dtype=piece.dtype)


def test_a_trace_whose_graph_fails_at_larger_sizes_keeps_the_axis_static():
    # From one column, torch.export recorded the chunk's width as the input's: the graph's
    # arange read the input's width, torch's graph failed at 3 columns (broadcasting 2 to
    # 3), which the check took for a loud failure, while ONNX broadcast the piece of 1 to
    # the arange of 2 (fuzz_dynamic --small seed 7242: (4, 7, 2) where torch gives (4, 7, 1)).
    with pytest.warns(DynamicDimensionFixedWarning,
                      match="'c'.*kept at its example's size, 1.*the graph fails there"):
        program = onnxport.export(_LastChunkPlusItsArange(), (torch.randn(3, 3, 1),),
                                  input_names=["x"], dynamic_axes={"x": {0: "a", 1: "b", 2: "c"}},
                                  dynamo=False)
    assert str(program.model.graph.inputs[0].shape) == "[a,b,1]"
    x = torch.randn(4, 7, 1)
    torch.testing.assert_close(program(x)[0], _LastChunkPlusItsArange()(x))


class _PaddedToAnEvenLength(torch.nn.Module):
    def forward(self, x):
        if x.size(-1) % 2 == 1:  # (audio and vision models pad an odd length so)
            x = torch.nn.functional.pad(x, (0, 1))
        return x.reshape(x.size(0), -1, 2).sum(-1)


def test_a_branch_on_a_sizes_parity_is_not_taken_at_every_size():
    # torch.export takes the branch of the example's parity and keeps the guard
    # "size % 2 == 1" as code its module checks; a guard that holds at every multiple of the
    # example was not taken for a pin, and the file answered for odd lengths at even ones
    # (the other half of the rows, silently).
    model = _PaddedToAnEvenLength()
    with pytest.warns(DynamicDimensionFixedWarning, match="axis 1 .* % 2"):
        program = onnxport.export(model, (torch.randn(2, 5),), input_names=["x"],
                                  dynamic_axes={"x": {0: "n", 1: "length"}})
    assert str(program.model.graph.inputs[0].shape) == "[n,5]"
    x = torch.randn(3, 5)
    torch.testing.assert_close(program(x)[0], model(x))


class _SecondHalf(torch.nn.Module):
    def forward(self, x):
        return x.tensor_split(2, 1)[1] * 2


class _Halves(torch.nn.Module):
    def forward(self, x):
        return x.reshape(x.size(0), 2, x.size(1) // 2).sum(1)


@pytest.mark.parametrize("model", [_SecondHalf(), _Halves()], ids=["tensor_split", "halves"])
def test_a_parity_guard_where_the_program_holds_or_the_model_fails_keeps_the_axis(model):
    # tensor_split's pieces of an odd example carry the guard "size % 2 > 0", but the
    # translation computes them at every size; halving refuses odd sizes in PyTorch too.
    example = torch.randn(2, 5) if isinstance(model, _SecondHalf) else torch.randn(2, 6)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DynamicDimensionFixedWarning)
        program = onnxport.export(model, (example,), input_names=["x"],
                                  dynamic_axes={"x": {1: "length"}})
    assert str(program.model.graph.inputs[0].shape) == "[2,length]"
    for length in (8, 10) if isinstance(model, _Halves) else (4, 7, 10):
        x = torch.randn(2, length)
        torch.testing.assert_close(program(x)[0], model(x))


class _SecondHalfOverItsSizeNarrowed(torch.nn.Module):
    def forward(self, x):
        x = x.tensor_split(2, 0)[1]
        x = (x / x.numel())[:, :-1]
        return x.narrow(1, 0, min(x.size(1), x.size(0)))


def test_a_parity_guard_is_checked_where_the_results_are_not_empty():
    # The rows of the second half are counted by torch's formula for an odd example (numel
    # and min read it): wrong at even sizes. The check of the guard grew the rows alone, and
    # the width of 1 left every result empty there, nothing told apart: silently wrong at
    # (2, 6) (fuzz seed 27007). The other dims of 1 are grown too where the results are empty.
    # (torch 2.11 records the rows by a formula that holds at every size: the axis stays
    # dynamic there, and the file must then be right at even sizes.)
    model = _SecondHalfOverItsSizeNarrowed()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        program = onnxport.export(model, (torch.randn(3, 1),), input_names=["x"],
                                  dynamic_axes={"x": {0: "a", 1: "b"}})
    fixed = [str(w.message) for w in record if w.category is DynamicDimensionFixedWarning]
    pinned = program.model.graph.inputs[0].shape[0] == 3
    assert pinned == any(re.search("axis 0 .* % 2", message) for message in fixed), fixed
    for shape in ((3, 1), (3, 4), (3, 7)) + (() if pinned else ((2, 6), (4, 4), (6, 3))):
        x = torch.randn(shape)
        torch.testing.assert_close(program(x)[0], model(x))
    assert pinned or not torch_at_least("2.14")  # (2.14's formula holds at odd sizes only)


class _LastPieceOfThreeColumnSplits(torch.nn.Module):
    def forward(self, x):
        return x.split(3, 1)[-1].softmax(1)


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "dynamo=False"])
def test_a_bound_the_program_holds_beyond_is_not_warned_about(dynamo):
    # torch bounds the width to 3 (one piece in the example); the one-piece quirk computes the
    # last piece from the width at run time, so the ONNX model matches PyTorch beyond 3: the
    # warning "matches PyTorch only up to 3" was false.
    model = _LastPieceOfThreeColumnSplits()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DynamicDimensionFixedWarning)
        program = onnxport.export(model, (torch.randn(1, 2),), input_names=["x"],
                                  dynamic_axes={"x": {0: "a", 1: "b"}}, dynamo=dynamo)
    for shape in ((1, 2), (2, 4), (3, 7), (2, 9)):
        x = torch.randn(shape)
        torch.testing.assert_close(program(x)[0], model(x))


class _FirstHalfRolledByHalfItsRows(torch.nn.Module):
    def forward(self, x):
        half = x.chunk(2, 0)[0]
        return half.roll(half.size(0) // 2, 0)


def test_a_size_read_from_one_piece_of_one_row_is_checked_at_five():
    # From one row the piece's size was recorded as the input's, so the roll read the input's
    # rows: at 3 rows both give a roll by 1 (3 // 2 and 2 // 2), at 4 and 5 the file rolled
    # by 2 where torch rolls by 1 (fuzz seed 33012, the default path). Kept static, loudly.
    with pytest.warns(DynamicDimensionFixedWarning, match="at size 5"):
        program = onnxport.export(_FirstHalfRolledByHalfItsRows(), (torch.randn(1, 3),),
                                  input_names=["x"], dynamic_axes={"x": {0: "n"}})
    _at_sizes(program, _FirstHalfRolledByHalfItsRows(), [1])
    assert program.model.graph.inputs[0].shape[0] == 1


class _OnesCountedByItsRows(torch.nn.Module):
    def forward(self, x):
        return torch.ones(len(x.unbind(0))) + x.sum()


def test_a_count_of_pieces_read_by_python_keeps_the_traced_axis_static():
    # len() of the rows gives no TracingWarning and leaves nothing in the graph: the trace's
    # ones(5) answered (5,) at 7 rows, silently (torch.onnx's too). The outputs' shapes are
    # checked at larger sizes whatever the warnings.
    with pytest.warns(DynamicDimensionFixedWarning, match="gives no TracingWarning"):
        program = onnxport.export(_OnesCountedByItsRows(), (torch.randn(5, 4),),
                                  input_names=["x"], dynamic_axes={"x": {0: "n"}},
                                  dynamo=False)
    assert program.model.graph.inputs[0].shape[0] == 5
    x = torch.randn(5, 4)
    torch.testing.assert_close(program(x)[0], _OnesCountedByItsRows()(x), rtol=1e-3, atol=1e-4)


class _SizesAsATensor(torch.nn.Module):
    def forward(self, x, y):
        return torch.tensor([x.shape[0], y.shape[0]]) + torch.tensor([x.shape[1], y.shape[1]])


def test_sizes_made_a_tensor_from_an_example_of_one_keep_the_axes_static_when_traced():
    # PyTorch's suite (every axis of both inputs dynamic, y's first of size 1): torch.tensor
    # of sizes is a constant of the trace. dynamo=False refused the export, as the example
    # had a dynamic axis of 1; now every axis the constant holds is kept static, with a
    # warning, and the file matches torch at the example (torch.onnx's: there only).
    x, y = torch.randn(2, 3, 4, 5), torch.randn(1, 2, 3, 4)
    with pytest.warns(DynamicDimensionFixedWarning, match="axis 0 .* of input 'y' is kept at "
                      "its example's size, 1"):
        program = onnxport.export(_SizesAsATensor(), (x, y), input_names=["x", "y"],
                                  dynamic_axes={"x": [0, 1, 2, 3], "y": [0, 1, 2, 3]},
                                  dynamo=False)
    torch.testing.assert_close(program(x, y)[0], _SizesAsATensor()(x, y))


class _ScaledHeads(torch.nn.Module):
    def forward(self, x):
        b, s, d = x.shape
        return x.view(b, s, 2, d // 2).transpose(1, 2) * (float(d // 2) ** -0.5)


def test_a_fixed_scale_is_checked_at_doubled_sizes_where_the_model_fails_at_others():
    # The scale is a Python float of the trace (a TracingWarning), fixed to the example's
    # 1/2. The check grew the width from 8 to 13, where the model's view fails, and so
    # checked nothing: the file was silently wrong at every other even width. Doubled (16),
    # the model runs and the check sees it: the width is static, with a warning.
    with pytest.warns(DynamicDimensionFixedWarning, match="axis 2 .*kept at its example's size"):
        program = onnxport.export(_ScaledHeads(), (torch.randn(2, 3, 8),), input_names=["x"],
                                  dynamic_axes={"x": [0, 1, 2]}, dynamo=False)
    assert program.model.graph.inputs[0].shape[2] == 8
    x = torch.randn(3, 5, 8)
    torch.testing.assert_close(program(x)[0], _ScaledHeads()(x))


class _SizeOfAPiece(torch.nn.Module):
    # The third of 3 chunks of 5 rows has 1: torch took (piece * 2)'s rows as 1 with a guard
    # that holds at 3, 5 and 7 rows only, and the zeros made of that size were the example's.
    def forward(self, x):
        return torch.zeros((x.chunk(3, 0)[2] * 2).size(0) * 3)


class _SizeOfTheLastPieceMinusOne(torch.nn.Module):
    def forward(self, x):
        return torch.zeros((x.split(2, 0)[-1] - 1).size(0) * 3)


@pytest.mark.parametrize("dynamo", [None, False, True], ids=["default", "torchscript", "dynamo"])
@pytest.mark.parametrize("model", [_SizeOfAPiece, _SizeOfTheLastPieceMinusOne],
                         ids=["chunk piece", "last piece minus one"])
def test_a_size_torch_took_as_the_example_s_is_no_silent_constant(model, dynamo):
    # The graph made the example's zeros at every size (silently: 3 where eager made 6), and
    # read x for nothing, so that it was dropped and nothing refused the other sizes. The axis
    # is fixed now, with a warning, and x stays an input for ONNX Runtime to check.
    model = model()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = onnxport.export(model, (torch.randn(5, 4),), input_names=["x"],
                                  dynamic_axes={"x": [0, 1]}, dynamo=dynamo)
    assert any("axis 0" in str(w.message) for w in caught
               if issubclass(w.category, DynamicDimensionFixedWarning))
    assert [v.name for v in program.model.graph.inputs] == ["x"]
    assert program.model.graph.inputs[0].shape[0] == 5
    torch.testing.assert_close(program(torch.randn(5, 3))[0], model(torch.randn(5, 3)))
    with pytest.raises(Exception, match="dimensions"):
        program(torch.randn(6, 4))


def test_a_guard_torch_s_sympy_functions_refuse_at_a_size_is_undecided_there():
    # From cuda, max_pool1d of a chunk left a guard with torch's Mod of a size difference;
    # checking it at the example's sizes took Mod(-1, 2), which torch's Mod asserts against,
    # and dynamo=False failed with "AssertionError: -1" (fuzz seed 70472 from cuda).
    import sympy
    from torch.utils._sympy.functions import Mod

    from onnxport.capture.torchscript.propagate import _holds

    size = sympy.Symbol("s", integer=True, positive=True)
    guard = sympy.Eq(Mod(size - 3, 2), 1)
    assert _holds(guard, {size: sympy.Integer(2)}) is True  # (undecided: no pin from it)
    assert _holds(guard, {size: sympy.Integer(6)}) is True
    assert _holds(guard, {size: sympy.Integer(5)}) is False


class _PooledNarrowToTheSmallerSize(torch.nn.Module):
    def forward(self, x):
        x = x.chunk(2, 1)[0]
        x = x + x.new_full((x.size(-1),), 2.0)
        x = x.narrow(1, 0, min(x.size(1), x.size(0)))
        pooled = torch.nn.functional.max_pool1d(x.reshape(1, -1, x.size(-1)), 2, ceil_mode=True)
        return pooled.reshape(x.shape[:-1] + [-1])


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_a_comparison_of_sizes_torch_export_decided_is_no_silent_answer(dynamo):
    # Scripted fuzz seed 73256: propagating the graph found the pool's width pinned; torch.export
    # over it then took min(piece, rows) as the piece (a guard of no equation) and kept the
    # axis dynamic: at 2 x 5 the ONNX model pooled 3 columns where the model pools 2. The
    # axis is fixed now where the program differs from the traced graph at a larger size.
    model = torch.jit.script(_PooledNarrowToTheSmallerSize())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = onnxport.export(model, (torch.randn(3, 3),), input_names=["x"],
                                  dynamic_axes={"x": [0, 1]}, dynamo=dynamo)
    assert any(issubclass(w.category, DynamicDimensionFixedWarning) for w in caught)
    x = torch.randn(3, 3)
    torch.testing.assert_close(program(x)[0], model(x))
    for shape in ((2, 5), (4, 7)):
        try:
            actual = program(torch.randn(shape))[0]
        except Exception as error:  # noqa: BLE001 - refused: the axis is static
            assert "dimensions" in str(error)
        else:
            pytest.fail(f"ran at {shape}: {tuple(actual.shape)}")


class _NarrowedToTheSmallerSizeThenChunked(torch.nn.Module):
    def forward(self, x):
        x = x.cummax(1)[0]
        x = x.narrow(2, 0, min(x.size(2), x.size(0))).chunk(3, 2)[-1]
        return x - x.logsumexp(1, keepdim=True)


def test_a_relation_of_sizes_only_a_large_growth_tells_is_checked_on_small_inputs():
    # Fuzz seed 76451 (dynamo=False, from 3 x 1 x 3): the trace took min(x.size(2), x.size(0))
    # as x.size(2); the axis of 1 hides it (logsumexp over it is x itself) unless it grows
    # with the last one, a growth of 16.3 times the example's elements, which the check left
    # out: at 5 x 6 x 6 the ONNX model answered 2 columns where the model has 1.
    model = _NarrowedToTheSmallerSizeThenChunked()
    with pytest.warns(DynamicDimensionFixedWarning):
        program = onnxport.export(model, (torch.randn(3, 1, 3),), input_names=["x"],
                                  dynamic_axes={"x": {0: "a", 1: "b", 2: "c"}}, dynamo=False)
    for shape in ((3, 1, 3), (5, 6, 6), (3, 7, 7), (6, 2, 4)):
        x = torch.randn(shape)
        try:
            actual = program(x)[0]
        except Exception as error:  # noqa: BLE001 - refused: an axis is static
            assert "dimensions" in str(error) or "pieces" in str(error)
        else:
            torch.testing.assert_close(actual, model(x))
