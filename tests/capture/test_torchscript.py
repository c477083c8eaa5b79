"""dynamo=False: capture by tracing (loops unrolled, the branch taken, Python numbers read from
tensors fixed), translated by the same op library; sizes read from inputs stay dynamic."""

import copy
import warnings
from typing import List, Optional, Union

import numpy as np
import onnx_ir as ir
import onnxruntime as ort
import pytest
import torch

import onnxport
from onnxport.errors import CaptureError, InvalidExportOptionsError, TracingWarning


def _close(actual, expected):
    torch.testing.assert_close(actual, expected, rtol=1e-3, atol=1e-4)


def test_resnet18_with_a_dynamic_batch_runs_at_two_batch_sizes():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    program = onnxport.export(model, (torch.randn(2, 3, 64, 64),), dynamo=False,
                              input_names=["image"], output_names=["logits"],
                              dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}})
    assert program.capture_strategy == "tracing"
    assert program.model.graph.inputs[0].shape[0] == "batch"
    # Weights keep the model's own names, not those of the wrapper that was traced.
    assert "conv1.weight" in program.model.graph.initializers
    # Nodes are named after their module and carry the line they came from, as on the
    # dynamo path.
    node = next(n for n in program.model.graph if n.name == "layer1.0.conv1/Conv")
    assert "torchvision/models/resnet.py:" in node.metadata_props["onnxport.source"]
    with torch.no_grad():
        for batch in (1, 3):
            x = torch.randn(batch, 3, 64, 64)
            _close(program(x)[0], model(x))


def test_a_dynamic_axis_of_size_one_in_the_example_stays_dynamic():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(), torch.nn.ReLU())
    program = onnxport.export(model, (torch.randn(1, 3, 8, 8),), dynamo=False,
                              input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    assert program.model.graph.inputs[0].shape[0] == "batch"
    with torch.no_grad():
        for batch in (1, 4):
            x = torch.randn(batch, 3, 8, 8)
            _close(program(x)[0], model(x))


@pytest.mark.parametrize("dynamic_axes", [None, {"x": {0: "batch"}}], ids=["static", "dynamic"])
def test_a_model_with_no_forward_of_its_own_names_torchs_lines_not_onnxports(dynamic_axes):
    # The tracer's stack goes on past the model into onnxport's wrapper and its caller; an
    # nn.Sequential of torch's modules has no line of the user's, and its nodes named
    # onnxport/capture/torchscript/trace.py (the wrapper's call of the model) instead of torch's.
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(), torch.nn.ReLU())
    program = onnxport.export(model, (torch.randn(2, 3, 8, 8),), dynamo=False,
                              input_names=["x"], dynamic_axes=dynamic_axes)
    sources = {node.op_type: node.metadata_props.get("onnxport.source", "")
               for node in program.model.graph}
    assert sources["Conv"].startswith("torch/nn/modules/conv.py:"), sources
    assert sources["Relu"].startswith("torch/nn/"), sources
    assert not any("onnxport/" in source for source in sources.values()), sources
    with torch.no_grad():
        for batch in (2, 3) if dynamic_axes else (2,):
            x = torch.randn(batch, 3, 8, 8)
            _close(program(x)[0], model(x))


class ViewBySize(torch.nn.Module):
    """Shape arithmetic read with .size() and .shape, as traced code often does it."""

    def forward(self, x):
        n = x.size(0)
        return x.view(n, -1) * x.shape[1], x.new_zeros(n) + x.shape[2]


def test_sizes_read_from_inputs_stay_shape_arithmetic():
    model = ViewBySize()
    program = onnxport.export(model, (torch.randn(2, 3, 4),), dynamo=False,
                              input_names=["x"], dynamic_axes={"x": {0: "n", 2: "w"}})
    for shape in [(2, 3, 4), (5, 3, 7)]:
        x = torch.randn(shape)
        for got, want in zip(program(x), model(x)):
            _close(got, want)


def test_a_traced_program_is_not_exported_again(monkeypatch):
    # The traced graph is straight-line ATen calls; tracing it again with torch.export only
    # cost time (two thirds of a dynamo=False export). Its sizes must still be symbols.
    def no_export(*args, **kwargs):
        raise AssertionError("torch.export.export was called on the traced program")

    monkeypatch.setattr(torch.export, "export", no_export)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), ViewBySize())
    model[1].running_mean.uniform_(-0.2, 0.2)
    model.eval()
    program = onnxport.export(model, (torch.randn(2, 3, 8, 8),), dynamo=False,
                              input_names=["x"], dynamic_axes={"x": {0: "n", 3: "w"}})
    with torch.no_grad():
        for shape in [(2, 3, 8, 8), (5, 3, 8, 11)]:
            x = torch.randn(shape)
            for got, want in zip(program(x), model(x)):
                _close(got, want)


def test_transformer_layer_is_traced_as_its_ops_not_the_fused_inference_kernel():
    # Traced with gradients off, the layer would be one aten::_native_multi_head_attention
    # call, which has no ONNX translation.
    torch.manual_seed(0)
    model = torch.nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, batch_first=True).eval()
    program = onnxport.export(model, (torch.randn(2, 5, 16),), dynamo=False)
    with torch.no_grad():
        x = torch.randn(2, 5, 16)
        _close(program(x)[0], model(x))


class LoopModel(torch.nn.Module):
    """The torch.onnx 1.x page's trace-only example: the loop over a tensor count is unrolled."""

    def forward(self, x, y):
        for i in range(y):
            x = x + i
        return x


def test_loop_model_from_the_torchscript_exporter_page_is_unrolled():
    x, count = torch.ones(2, 3, dtype=torch.long), torch.tensor(5, dtype=torch.long)
    with pytest.warns(TracingWarning, match="index or count") as caught:
        program = onnxport.export(LoopModel(), (x, count), dynamo=False)
    assert {w.filename for w in caught if w.category is TracingWarning} == {__file__}
    assert "Loop" not in [node.op_type for node in program.model.graph]
    _close(program(x, count)[0], LoopModel()(x, count))
    # The count was fixed to 5: another count gives the traced result, as in torch.onnx.
    _close(program(x, torch.tensor(9))[0], LoopModel()(x, count))


class DataDependentBranch(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


def test_branch_taken_is_recorded_with_a_warning_at_its_line():
    x = torch.ones(2, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = onnxport.export(DataDependentBranch(), (x,), dynamo=False)
    fixed = [w for w in caught if issubclass(w.category, TracingWarning)]
    assert len(fixed) == 1 and fixed[0].filename == __file__
    assert "boolean" in str(fixed[0].message)
    _close(program(x)[0], x * 2)
    _close(program(-x)[0], -x * 2)  # the branch of the example, whatever the input


def test_non_tensor_inputs_are_constants_and_dict_outputs_are_flattened():
    class Scaled(torch.nn.Module):
        def forward(self, x, scale: float, mode: str):
            out = x * scale if mode == "mul" else x + scale
            return {"out": out, "label": mode, "double": out * 2}

    model, x = Scaled(), torch.randn(2, 3)
    with pytest.warns(UserWarning, match="scale=3.0 is a graph input in its place"):
        program = onnxport.export(model, (x, 3.0, "mul"), dynamo=False)
    # The float is a double input, as torch.onnx makes it; the string is no input
    assert [(v.name, v.dtype) for v in program.model.graph.inputs] == [
        ("x", ir.DataType.FLOAT), ("scale", ir.DataType.DOUBLE)]
    got = program(x, 3.0, "mul")
    assert len(got) == 2  # the string output is dropped, the dict becomes its values
    assert program.output_names == ["out", "double"]  # named after their keys
    _close(got[0], x * 3.0)
    _close(got[1], x * 6.0)


def test_keyword_and_nested_inputs_keep_their_names():
    class TwoInputs(torch.nn.Module):
        def forward(self, pair, bias=None):
            return pair[0] @ pair[1] + bias

    a, b, bias = torch.randn(2, 3), torch.randn(3, 4), torch.randn(4)
    program = onnxport.export(TwoInputs(), ((a, b),), kwargs={"bias": bias}, dynamo=False)
    assert program.input_names == ["pair.0", "pair.1", "bias"]
    _close(program(a, b, bias)[0], a @ b + bias)


def test_exported_program_cannot_be_traced():
    program = torch.export.export(ViewBySize(), (torch.randn(2, 3, 4),))
    with pytest.raises(InvalidExportOptionsError, match="dynamo=True"):
        onnxport.export(program, (torch.randn(2, 3, 4),), dynamo=False)


def test_a_model_the_tracer_cannot_run_names_the_tracing_stage():
    class Broken(torch.nn.Module):
        def forward(self, x):
            raise ValueError("no forward today")

    with pytest.raises(CaptureError, match="(?s)no forward today.*capture \\(tracing\\)"):
        onnxport.export(Broken(), (torch.randn(2),), dynamo=False)


# -- scripted models (torch.jit.script): their graph is converted, not traced ---------------
class LinearNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 4)
        self.norm = torch.nn.BatchNorm1d(4)  # its forward branches on self.training

    def forward(self, x):
        return torch.relu(self.norm(self.linear(x))).view(x.size(0), -1)


@pytest.mark.parametrize("dynamo", [True, False])
def test_script_module_with_a_dynamic_batch(dynamo):
    model = LinearNorm().eval()
    program = onnxport.export(torch.jit.script(model), (torch.randn(2, 3),), dynamo=dynamo,
                              input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    assert program.capture_strategy == "torchscript"
    assert "linear.weight" in program.model.graph.initializers
    with torch.no_grad():
        for batch in (2, 5):
            x = torch.randn(batch, 3)
            _close(program(x)[0], model(x))


def test_script_function():
    @torch.jit.script
    def scale_add(a, b):
        return a * b + 1

    a, b = torch.randn(2, 3), torch.randn(2, 3)
    program = onnxport.export(scale_add, (a, b))
    _close(program(a, b)[0], a * b + 1)


class _NumberInputs(torch.nn.Module):
    def forward(self, x, n: int, flag: bool, shift: float, mode: str):
        if flag and mode == "scale":
            return x * n + shift
        return x - shift


@pytest.mark.parametrize("dynamo", [None, False])
@pytest.mark.parametrize("numbers", [(3, True, 0.5, "scale"), (2, False, 1.5, "scale")])
def test_script_module_number_inputs_are_fixed_to_the_example(dynamo, numbers):
    # As tracing fixes a model's number inputs, a scripted model's int, bool, float and str
    # inputs are constants of the example's values (they were refused). The numbers are still
    # graph inputs in their places (int64, bool, double), as torch.onnx makes them, so that
    # code feeding every argument by position runs; the string is none. A warning says so.
    model = torch.jit.script(_NumberInputs())
    x = torch.randn(2, 3)
    with pytest.warns(UserWarning, match="graph computes with the example's value"):
        program = onnxport.export(model, (x, *numbers), dynamo=dynamo)
    assert [(v.name, v.dtype) for v in program.model.graph.inputs] == [
        ("x", ir.DataType.FLOAT), ("n", ir.DataType.INT64), ("flag", ir.DataType.BOOL),
        ("shift", ir.DataType.DOUBLE)]
    other = torch.randn(2, 3)
    _close(program(other)[0], model(other, *numbers))
    _close(program(other, *numbers)[0], model(other, *numbers))
    session = ort.InferenceSession(program.model_proto.SerializeToString())
    feeds = [other.numpy(), *(np.array(n) for n in numbers[:3])]  # as torch's tests feed them
    got = session.run(None, {i.name: v for i, v in zip(session.get_inputs(), feeds)})
    _close(torch.from_numpy(got[0]), model(other, *numbers))


class _NumberFirst(torch.nn.Module):
    def forward(self, n: int, x, shift: float):
        return x * n + shift


@pytest.mark.parametrize("dynamo", [None, False])
@pytest.mark.parametrize("scripted", [False, True], ids=["traced", "scripted"])
def test_input_names_name_number_inputs_in_their_places(dynamo, scripted):
    # torch.onnx's TorchScript exporter makes a number argument a graph input, named in turn;
    # so does this one (unread: the graph computes with the example's value), and the tensor
    # keeps its own name (a scripted model refused the names; a traced one gave the number's
    # name on).
    model = torch.jit.script(_NumberFirst()) if scripted else _NumberFirst()
    program = onnxport.export(model, (3, torch.randn(2, 3), 0.5), dynamo=dynamo,
                              input_names=["n", "x", "shift"], dynamic_axes={"x": {0: "b"}})
    assert [(v.name, str(v.shape)) for v in program.model.graph.inputs] == [
        ("n", "[]"), ("x", "[b,3]"), ("shift", "[]")]
    other = torch.randn(5, 3)
    _close(program(other)[0], other * 3 + 0.5)


class _NoneBetween(torch.nn.Module):
    def forward(self, x, absent=None, n: int = 2, z=None):
        return x * n + z


@pytest.mark.parametrize("dynamo", [None, False])
def test_input_names_name_numbers_but_pass_over_none(dynamo):
    # A None argument is no graph input and takes no name, a number is one and takes one
    # (torch.onnx's TorchScript exporter): "n" names the number, and "z" still names z.
    x, z = torch.randn(2, 3), torch.randn(2, 3)
    program = onnxport.export(_NoneBetween(), (x, None, 3, z), dynamo=dynamo,
                              input_names=["x", "n", "z"])
    assert [value.name for value in program.model.graph.inputs] == ["x", "n", "z"]
    _close(program(x, z)[0], x * 3 + z)


def test_script_function_number_input():
    @torch.jit.script
    def times(x, k: int):
        return x * k

    x = torch.randn(4)
    _close(onnxport.export(times, (x, 4))(x)[0], x * 4)


class _Sequences(torch.nn.Module):
    def forward(self, x, ys: list[torch.Tensor], k: int, z: tuple[torch.Tensor, torch.Tensor]):
        for y in ys:
            x = x + y * k
        return x * z[0] - z[1]


@pytest.mark.parametrize("dynamo", [None, False])
def test_script_module_list_and_tuple_inputs_are_one_input_per_tensor(dynamo):
    # A List[Tensor] or tuple input (refused before) is its tensors, flattened in order; the
    # number between stands in its place.
    model = torch.jit.script(_Sequences())
    inputs = (torch.randn(3), [torch.randn(3), torch.randn(3)], 2, (torch.randn(3),) * 2)
    program = onnxport.export(model, inputs, dynamo=dynamo)
    assert [value.name for value in program.model.graph.inputs] == \
        ["x", "ys.0", "ys.1", "k", "z.0", "z.1"]
    other = (torch.randn(3), [torch.randn(3), torch.randn(3)], 2, (torch.randn(3),) * 2)
    _close(program(other[0], *other[1], *other[3])[0], model(*other))


def test_script_module_with_a_dict_input_is_refused_clearly():
    class Total(torch.nn.Module):
        def forward(self, x, ys: dict[str, torch.Tensor]):
            return x + ys["a"]

    with pytest.raises(InvalidExportOptionsError, match="dicts, nested lists and keyword"):
        onnxport.export(torch.jit.script(Total()), (torch.randn(2), {"a": torch.randn(2)}, {}))


def test_scripted_data_dependent_branch_keeps_both_branches():
    model = torch.jit.script(DataDependentBranch())
    x = torch.ones(2, 3)
    program = onnxport.export(model, (x,))
    _close(program(x)[0], x * 2)
    _close(program(-x)[0], -x - 1)


class HalfSize(torch.nn.Module):
    def forward(self, x):
        # When tracing, interpolate computes the output size with tensor ops on x's sizes
        # and reads it back as an int, as torchvision's resize does.
        return torch.nn.functional.interpolate(x, scale_factor=0.5, recompute_scale_factor=True)


def test_sizes_computed_with_tensor_ops_are_fixed_for_a_static_export():
    x = torch.randn(1, 2, 8, 6)
    program = onnxport.export(HalfSize(), (x,), dynamo=False)
    _close(program(x)[0], HalfSize()(x))


def test_tiny_bert_with_dynamic_batch_and_sequence():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=64)
    model = transformers.BertModel(config).eval()
    dims = {0: "batch", 1: "sequence"}
    ids, mask = torch.randint(0, 100, (2, 7)), torch.ones(2, 7, dtype=torch.long)
    # Sizes read back from tensors leave torch runtime asserts (Eq(u1, 1) | Eq(u1, 7)) that
    # must not reach translation.
    program = onnxport.export(model, (ids, mask), dynamo=False,
                              input_names=["input_ids", "attention_mask"],
                              dynamic_axes={"input_ids": dims, "attention_mask": dims})
    assert program.output_names == ["last_hidden_state", "pooler_output"]
    for batch, length in [(2, 7), (3, 11)]:
        ids = torch.randint(0, 100, (batch, length))
        mask = torch.ones(batch, length, dtype=torch.long)
        mask[0, -2:] = 0
        with torch.no_grad():
            want = model(ids, mask)
        got = program(ids, mask)
        _close(got[0], want.last_hidden_state)
        _close(got[1], want.pooler_output)


# -- scripted loops (prim::Loop) whose count is known at run time only: ONNX Loop ----------
@torch.jit.script
def _add_iterations(x, y):
    for i in range(int(y)):
        x = x + i
    return x


class LoopModel2(torch.nn.Module):
    """The scripted loop of torch.onnx's TorchScript page, called from a traced model."""

    def forward(self, x, y):
        return _add_iterations(x, y)


@pytest.mark.parametrize("scripted", [False, True])
def test_scripted_loop_runs_other_counts(scripted):
    model = torch.jit.script(LoopModel2()) if scripted else LoopModel2()
    x = torch.ones(2, 3, dtype=torch.long)
    program = onnxport.export(model, (x, torch.tensor(5)), dynamo=False)
    assert "Loop" in [node.op_type for node in program.model.graph]
    for count in (5, 0, 9):
        assert torch.equal(program(x, torch.tensor(count))[0], LoopModel2()(x, torch.tensor(count)))


@torch.jit._script_if_tracing
def _stack_rows(rows: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    # Grows by one row per iteration, and each row is resized to a size read from the data,
    # as torchvision's paste-masks loop does: the carried tensor changes shape in the loop.
    out = torch.zeros(0, 4)
    for i in range(rows.size(0)):
        width = int(torch.clamp(scale[i], 1, 4))
        row = torch.cat((rows[i, :width], torch.zeros(4 - width)))
        out = torch.cat((out, row.unsqueeze(0)))
    return out


class KeptRows(torch.nn.Module):
    def forward(self, x):
        kept = x[x[:, 0] > 0]  # a data-dependent number of rows: the loop's count
        return _stack_rows(kept, kept[:, 1].abs() * 4)


def test_loop_of_a_function_scripted_when_traced_runs_other_counts():
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TracingWarning)
        program = onnxport.export(KeptRows(), (x,), dynamo=False, input_names=["x"],
                                  dynamic_axes={"x": {0: "n"}})
    assert "Loop" in [node.op_type for node in program.model.graph]
    counts = set()
    for seed in range(4):
        x = torch.randn(6 + seed, 4, generator=torch.Generator().manual_seed(seed))
        counts.add(int((x[:, 0] > 0).sum()))
        _close(program(x)[0], KeptRows()(x))
    assert len(counts) > 1


@torch.jit.script
def _halve(x):
    steps = 0
    while bool(x.sum() > 1):
        x = x / 2
        steps += 1
    return x * steps  # (the tracer takes no number back from a scripted call)


class _Halve(torch.nn.Module):
    def forward(self, x):
        return _halve(x) + 1


@pytest.mark.parametrize("dynamo", [None, False])
@pytest.mark.parametrize("scripted", [False, True])
def test_a_while_loop_with_a_computed_condition_is_an_onnx_loop(dynamo, scripted):
    # The loop runs as many times as its condition says at run time (it was refused), and the
    # counter it carries is a value of the run, not the example's count.
    model = torch.jit.script(_Halve()) if scripted else _Halve()
    program = onnxport.export(model, (torch.ones(3) * 8,), dynamo=dynamo)
    assert "Loop" in [node.op_type for node in program.model.graph]
    for x in (torch.ones(3) * 8, torch.ones(3) * 100, torch.full((3,), 0.1)):
        _close(program(x)[0], model(x))


class _CountingLoop(torch.nn.Module):
    def forward(self, x):
        total = 0
        for j in range(x.size(0)):
            total += 2
            x = x + j
        return x * total


@pytest.mark.parametrize("dynamo", [None, False])
def test_a_number_carried_by_a_scripted_loop_is_a_value_of_the_run(dynamo):
    model = torch.jit.script(_CountingLoop())
    program = onnxport.export(model, (torch.randn(3),), dynamo=dynamo, input_names=["x"],
                              dynamic_axes={"x": {0: "n"}})
    for n in (3, 6):
        x = torch.randn(n)
        _close(program(x)[0], model(x))


class _LoopReturningAnOuterValue(torch.nn.Module):
    def forward(self, x):
        y = x * 0
        for _ in range(x.size(0)):
            y = x
        return y


@pytest.mark.parametrize("dynamo", [None, False])
def test_a_loop_whose_body_returns_a_value_made_before_it(dynamo):
    # The body's result is x itself, which no node of the body reads: torch's converter did
    # not make it an argument of the body ("Output x.1 not found"), and the capture failed.
    model = torch.jit.script(_LoopReturningAnOuterValue())
    program = onnxport.export(model, (torch.randn(3),), dynamo=dynamo, input_names=["x"],
                              dynamic_axes={"x": {0: "n"}})
    for n in (0, 3, 6):
        x = torch.randn(n)
        _close(program(x)[0], model(x))


class SizeArithmetic(torch.nn.Module):
    """Slices by sizes computed as the transformers do (rotate_half, a cache's past length)
    and as swin's window padding does: the tracer keeps each as a 0-d tensor, then reads it
    back."""

    def forward(self, x, past):
        half = x[..., : x.shape[-1] // 2]
        total = x[:, : past.shape[1] + x.shape[1]]
        window = x[..., : (7 - x.shape[-1] % 7) % 7 + 1]
        return half, total, window


@pytest.mark.parametrize("dynamic", [True, False])
def test_sizes_computed_from_sizes_are_not_exported_again(monkeypatch, dynamic):
    # Read back, each was a number unknown to the fake-tensor pass, which then gave up and
    # had torch.export trace the program a second time (BERT 5.7 s instead of 1 s, a small
    # Llama with a dynamic sequence 50 s).
    def no_export(*args, **kwargs):
        raise AssertionError("torch.export.export was called on the traced program")

    monkeypatch.setattr(torch.export, "export", no_export)
    axes = {"x": {0: "n", 1: "s"}} if dynamic else None
    program = onnxport.export(SizeArithmetic(), (torch.randn(1, 5, 10), torch.zeros(1, 0)),
                              dynamo=False, input_names=["x", "past"], dynamic_axes=axes)
    for shape in [(1, 5, 10)] + ([(3, 8, 10)] if dynamic else []):
        x = torch.randn(shape)
        for got, want in zip(program(x, torch.zeros(1, 0)), SizeArithmetic()(x, torch.zeros(1, 0))):
            _close(got, want)


class ShiftedWindowMask(torch.nn.Module):
    """Swin's attention mask: a zero tensor filled region by region through views, its sizes
    those of the (static) height and width."""

    def forward(self, x):
        height, width = x.shape[-2:]
        mask = x.new_zeros((height, width))
        count = 0
        for rows in ((0, -2), (-2, -1), (-1, None)):
            for columns in ((0, -3), (-3, None)):
                mask[rows[0]:rows[1], columns[0]:columns[1]] = count
                count += 1
        early = x.new_ones((height, width))
        snapshot = early * 2  # read before the write below: must keep that order
        early[0] = 5.0
        return x + mask.view(1, 1, height, width), snapshot + early


def test_a_mask_filled_through_views_is_folded_not_functionalized(monkeypatch):
    # Functionalizing traces the whole program again (most of swin_t's dynamo=False export);
    # a tensor filled with constants only needs its final value. The second tensor is read
    # between its writes, so it cannot be folded and still needs functionalization.
    from onnxport.capture import torch_export

    functionalized = []
    real = torch_export.functionalize
    monkeypatch.setattr(torch_export, "functionalize",
                        lambda program, keep_op: functionalized.append(program)
                        or real(program, keep_op))
    model = ShiftedWindowMask()
    program = onnxport.export(model, (torch.randn(2, 3, 6, 5),), dynamo=False,
                              input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    assert len(functionalized) == 1
    graph = functionalized[0].graph
    assert not any(node.target is torch.ops.aten.new_zeros.default for node in graph.nodes)
    assert any(node.target is torch.ops.aten.new_ones.default for node in graph.nodes)
    for batch in (1, 3):
        x = torch.randn(batch, 3, 6, 5)
        for got, want in zip(program(x), model(x)):
            _close(got, want)


def test_a_mask_filled_through_views_alone_needs_no_functionalization(monkeypatch):
    from onnxport.capture import torch_export

    def no_functionalize(*args, **kwargs):
        raise AssertionError("the traced program was functionalized")

    class MaskOnly(ShiftedWindowMask):
        def forward(self, x):
            return super().forward(x)[0]

    monkeypatch.setattr(torch_export, "functionalize", no_functionalize)
    model = MaskOnly().eval()
    program = onnxport.export(model, (torch.randn(1, 3, 6, 5),), dynamo=False,
                              input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    for batch in (1, 4):
        x = torch.randn(batch, 3, 6, 5)
        _close(program(x)[0], model(x))


def test_a_static_export_takes_result_types_from_the_trace_not_fake_runs(monkeypatch):
    # Without dynamic dims, the tracer's recorded types are what a fake run of each op would
    # give (running them was most of the propagation); only ops the types cannot stand for
    # (views, here) run on fake tensors.
    from torch._subclasses.fake_tensor import FakeTensorMode

    ran = []
    dispatch = FakeTensorMode.dispatch

    def counting(self, func, types, args=(), kwargs=None):
        ran.append(func)
        return dispatch(self, func, types, args, kwargs)

    monkeypatch.setattr(FakeTensorMode, "dispatch", counting)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4),
                                torch.nn.ReLU(inplace=True), torch.nn.Flatten(),
                                torch.nn.Linear(144, 5)).eval()
    x = torch.randn(2, 3, 8, 8)
    program = onnxport.export(model, (x,), dynamo=False)
    ops = {func._overloadpacket.__name__ for func in ran}
    assert not ops & {"convolution", "batch_norm", "relu_", "linear"}, ops
    with torch.no_grad():
        _close(program(x)[0], model(x))
    # The program's values have the types a fake run gives.
    node = next(n for n in program.exported_program.graph.nodes
                if n.target is torch.ops.aten.convolution.default)
    assert tuple(node.meta["val"].shape) == (2, 4, 6, 6)
    assert node.meta["val"].dtype == torch.float32


class InPlaceOps(torch.nn.Module):
    """In-place ops, one broadcasting its other operand: their result is the tensor written."""

    def forward(self, x):
        y = x * 2
        y.relu_()
        y.add_(torch.arange(4.0))
        return y.mul_(y).sum(-1), y


def test_in_place_ops_keep_their_written_tensor():
    model = InPlaceOps()
    x = torch.randn(3, 4)
    program = onnxport.export(model, (x,), dynamo=False)
    for got, want in zip(program(x), model(x)):
        _close(got, want)
    program = onnxport.export(model, (torch.randn(3, 4),), dynamo=False,
                              input_names=["x"], dynamic_axes={"x": {0: "n"}})
    x = torch.randn(5, 4)
    for got, want in zip(program(x), model(x)):
        _close(got, want)


class KeepPositive(torch.nn.Module):
    """A result whose size depends on the input's values."""

    def forward(self, x):
        kept = x[x > 0]
        return (kept * 2).relu()


def test_sizes_that_depend_on_values_are_not_fixed_to_the_trace():
    # The tracer's types fix the boolean index's size to this run's; the fake run keeps it a
    # symbol, so the model runs on inputs with another count.
    model = KeepPositive()
    x = torch.tensor([[1.0, -1.0, 2.0], [-3.0, 4.0, -5.0]])
    program = onnxport.export(model, (x,), dynamo=False)
    assert not isinstance(program.model.graph.outputs[0].shape[0], int)  # not this run's 3
    y = torch.tensor([[1.0, 1.0, 2.0], [3.0, 4.0, -5.0]])
    _close(program(y)[0], model(y))


class _MetadataInPlace(torch.nn.Module):
    """In-place ops that change a tensor's shape, on a tensor another op made."""

    def forward(self, x):
        y = (x * 2).unsqueeze(0)
        y.squeeze_(0)
        z = (x + 1).t_()
        w = x.clone().unsqueeze_(1).transpose_(0, 1)
        v = x.exp()
        v.add_(1)
        return y, z, w, v * 2


@pytest.mark.parametrize("dynamic", [False, True])
def test_in_place_ops_that_change_shapes_keep_the_shape_of_their_input(dynamic):
    # The fake run of squeeze_ squeezed the value recorded for unsqueeze's node, which was
    # then translated as [3, 4]: the export dropped the squeeze and returned a [1, 3, 4].
    x = torch.randn(3, 4)
    axes = {"x": {0: "n"}} if dynamic else None
    program = onnxport.export(_MetadataInPlace(), (x,), dynamo=False, input_names=["x"],
                              dynamic_axes=axes)
    for size in (3, 5) if dynamic else (3,):
        x = torch.randn(size, 4)
        for ours, eager in zip(program(x), _MetadataInPlace()(x)):
            assert ours.shape == eager.shape
            torch.testing.assert_close(ours, eager, rtol=1e-3, atol=1e-4)


class PatchesBySize(torch.nn.Module):
    """torchvision ViT's patch flattening: the sizes are read from the convolution's result
    (and computed with tensor ops by the tracer), then its output goes through an eval-mode
    Dropout, as T5's last hidden state does."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 2, stride=2)
        self.dropout = torch.nn.Dropout(0.1)

    def forward(self, x):
        y = self.conv(x)
        n, c, h, w = y.shape
        return self.dropout(y.reshape(n, c, h * w).permute(0, 2, 1))


def test_a_static_export_reads_sizes_without_running_the_model_again(monkeypatch):
    # Each fake run of the model to find that sizes are read back cost vit_b_16 0.4 s, and
    # reading them by running the graph again cost one more forward; the tracer recorded
    # every size. A Dropout as an output made the program fail its own check, and
    # torch.export traced the graph again (T5: 1.3 s).
    from onnxport.capture.torchscript import propagate

    def no_export(*args, **kwargs):
        raise AssertionError("torch.export.export was called on the traced program")

    calls = []
    propagated = propagate._propagated
    monkeypatch.setattr(torch.export, "export", no_export)
    monkeypatch.setattr(propagate, "_propagated",
                        lambda *args, **kwargs: calls.append(1) or propagated(*args, **kwargs))
    from torch.utils._python_dispatch import TorchDispatchMode

    ran = []

    class Ops(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            ran.append(func)
            return func(*args, **(kwargs or {}))

    fix = propagate._fix_scalar_reads

    def watched(*args, **kwargs):
        with Ops():
            return fix(*args, **kwargs)

    monkeypatch.setattr(propagate, "_fix_scalar_reads", watched)
    model = PatchesBySize().eval()
    x = torch.randn(1, 3, 8, 8)
    program = onnxport.export(model, (x,), dynamo=False)
    assert len(calls) == 1 and ran and torch.ops.aten.convolution.default not in ran
    _close(program(x)[0], model(x))


class SplitThenSizes(torch.nn.Module):
    """The pieces of a split reshaped by their own sizes (GPT-2's query, key and value)."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(6, 6)

    def forward(self, x):
        query, key = self.linear(x).split(3, dim=-1)
        return query.reshape(query.size(0), -1) + key.reshape(key.size(0), -1)


def test_a_size_of_a_split_piece_is_read_without_running_the_model(monkeypatch):
    # The tracer records each piece's sizes; only one-result nodes kept them, so reading a
    # piece's size ran the model up to the split again (GPT-2's attention: both layers).
    from onnxport.capture.torchscript import propagate
    from torch.utils._python_dispatch import TorchDispatchMode

    ran = []

    class Ops(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            ran.append(func._overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    fix = propagate._fix_scalar_reads

    def watched(graph_module, tensors, reads):
        assert reads  # (else the test tests nothing)
        with Ops():
            return fix(graph_module, tensors, reads)

    monkeypatch.setattr(propagate, "_fix_scalar_reads", watched)
    model = SplitThenSizes().eval()
    x = torch.randn(2, 4, 6)
    program = onnxport.export(model, (x,), dynamo=False)
    assert not {"addmm", "linear", "split"} & set(ran), ran
    with torch.no_grad():
        _close(program(x)[0], model(x))


class IndexByViews(torch.nn.Module):
    """An index made of views of integer tensors (transformers' mask: arange(...)[:, None]),
    then a Linear."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(6, 3)

    def forward(self, x, table):
        rows = torch.arange(x.shape[0])[:, None]
        columns = torch.arange(x.shape[1])[None, :]
        return self.linear(x + table[rows, columns])


def test_an_index_made_of_views_still_takes_types_from_the_trace(monkeypatch):
    # A view has no traced type of its own (its fake value must share its base's storage),
    # so whether its integers index a tensor was not known: the whole graph ran on fake
    # tensors, every transformers model (BERT's propagation 16 -> 9 ms).
    from torch._subclasses.fake_tensor import FakeTensorMode

    ran = []
    dispatch = FakeTensorMode.dispatch

    def counting(self, func, types, args=(), kwargs=None):
        ran.append(func)
        return dispatch(self, func, types, args, kwargs)

    monkeypatch.setattr(FakeTensorMode, "dispatch", counting)
    model = IndexByViews().eval()
    x, table = torch.randn(4, 5, 6), torch.randn(5, 7, 6)
    program = onnxport.export(model, (x, table), dynamo=False)
    ops = {func._overloadpacket.__name__ for func in ran}
    assert not ops & {"linear", "add"}, ops
    with torch.no_grad():
        _close(program(x, table)[0], model(x, table))


class _FloatRange(torch.nn.Module):
    def forward(self, x):
        return torch.arange(2.5, x.size(0) + 0.5, 0.5) * x.mean()


def test_a_traced_size_as_a_float_bound_of_arange_stays_dynamic():
    # The trace turns the size plus 0.5 into a number with aten::ScalarImplicit, an op of
    # TorchScript's alone: it was refused ("operator aten::ScalarImplicit does not exist").
    model = _FloatRange()
    program = onnxport.export(model, (torch.randn(5),), dynamo=False, input_names=["x"],
                              dynamic_axes={"x": {0: "n"}})
    for n in (5, 8):
        x = torch.randn(n)
        _close(program(x)[0], model(x))


class _ReadsSizesOfMadeTensors(torch.nn.Module):
    def forward(self, x):
        halves = torch.arange(0, x.size(1), 0.5)
        down = torch.arange(x.size(0), 1, -1)
        scaled = torch.arange(x.size(0) * 1.5)
        filled = torch.full((x.size(0), 3), x.size(1))
        return (torch.ones(halves.size(0) + 1), torch.ones(down.size(0) * 2),
                torch.ones(scaled.size(0)), torch.ones(filled.size(0) * 2, filled.size(1)),
                halves, down, scaled, filled)


@pytest.mark.parametrize("dynamo", [None, False])
def test_sizes_of_aranges_and_fills_of_dynamic_sizes_stay_dynamic(dynamo):
    # On dynamo=False, the fake run took a float step's or a falling arange's length, and
    # full's size, at the example's values: what read them was fixed (9 ones at every size,
    # no warning), and the file declared static output shapes. full's 3 equals the fill
    # value in the example, which must not make it a symbol either.
    model = _ReadsSizesOfMadeTensors()
    program = onnxport.export(model, (torch.randn(3, 3),), dynamo=dynamo, input_names=["x"],
                              dynamic_axes={"x": {0: "a", 1: "b"}})
    declared = [[d if isinstance(d, int) else None for d in o.shape]
                for o in program.model.graph.outputs]
    assert declared[4] == [None] and declared[7] == [None, 3], declared
    for shape in ((3, 3), (5, 7), (2, 4)):
        x = torch.randn(*shape)
        for actual, expected in zip(program(x), model(x)):
            _close(actual, expected)


class _BagsOfRows(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bags = torch.nn.EmbeddingBag(10, 5, mode="mean")

    def forward(self, x):
        return self.bags(x)


@pytest.mark.parametrize("script", [False, True])
@pytest.mark.parametrize("dynamo", [None, False])
def test_an_arange_stepping_by_a_dynamic_size_stays_dynamic(dynamo, script):
    # 2-d indices make nn.EmbeddingBag's offsets arange(0, x.numel(), x.size(1)): with the
    # step a symbol, the fake run took its length at the example's (4 bags at every batch
    # size, silently, on dynamo=False).
    model = _BagsOfRows()
    exported = torch.jit.script(model) if script else model
    program = onnxport.export(exported, (torch.randint(0, 10, (4, 3)),), dynamo=dynamo,
                              input_names=["x"], dynamic_axes={"x": {0: "n", 1: "k"}})
    for shape in ((4, 3), (2, 5), (7, 1)):
        x = torch.randint(0, 10, shape)
        _close(program(x)[0], model(x))


class _Dropping(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.dropout = torch.nn.Dropout(0.5)

    def forward(self, x):
        return self.dropout(x) + 1


@pytest.mark.parametrize("dynamo", [None, False])
def test_a_script_module_exported_for_training_keeps_its_training_dropout(dynamo):
    # The scripted model was frozen in eval mode whatever `training` said: an Identity.
    model = torch.jit.script(_Dropping())
    program = onnxport.export(model, (torch.ones(2000),), dynamo=dynamo,
                              training=onnxport.TrainingMode.TRAINING)
    assert "Dropout" in [node.op_type for node in program.model.graph]
    out = program(torch.ones(2000))[0]
    assert set(torch.unique(out).tolist()) == {1.0, 3.0}  # dropped, or kept and scaled by 2
    assert abs((out == 1).float().mean().item() - 0.5) < 0.05
    evaluated = onnxport.export(model, (torch.ones(2000),), dynamo=dynamo)
    assert "Dropout" not in [node.op_type for node in evaluated.model.graph]
    _close(evaluated(torch.ones(2000))[0], torch.full((2000,), 2.0))


class _NormalizedTwice(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bn1 = torch.nn.BatchNorm2d(3, affine=False)
        self.conv = torch.nn.Conv2d(3, 3, 3)
        self.bn2 = torch.nn.BatchNorm2d(3)

    def forward(self, x):
        return self.bn2(self.conv(self.bn1(x)))


@pytest.mark.parametrize("mode", ["TRAINING", "PRESERVE"])
@pytest.mark.parametrize("dynamo", [None, False])
def test_a_script_module_exported_for_training_normalizes_with_the_batch_statistics(
        dynamo, mode):
    # BatchNorm's `if self.training:` (the count update) stayed a branch on an attribute,
    # which the converter refused: TS2EPConverter failed for node prim::If.
    torch.manual_seed(0)
    model = _NormalizedTwice().train()
    x = torch.randn(4, 3, 6, 6) * 2 + 1
    with torch.no_grad():
        expected = copy.deepcopy(model)(x)
    program = onnxport.export(torch.jit.script(model), (x,), dynamo=dynamo,
                              training=getattr(onnxport.TrainingMode, mode))
    _close(program(x)[0], expected)
    assert torch.equal(model.bn1.num_batches_tracked, torch.tensor(0))  # the export ran nothing


def test_tracing_warning_is_still_importable_from_the_torchscript_capture():
    # TracingWarning lives in onnxport.errors; users imported it from here.
    from onnxport.capture.torchscript import TracingWarning as where_it_was

    assert where_it_was is TracingWarning


class _ZeroWhenPositive(torch.nn.Module):
    def forward(self, x, i):
        if bool(x.sum() > 0):
            x[i] = 0.0
        else:
            x.add_(1)
        return x * 2


@pytest.mark.parametrize("dynamo", [None, False])
def test_index_put_inside_a_scripted_branch_writes_the_tensor_after_it(dynamo):
    # The write became an If output (capture/script_mutations.py); the branch wrote nowhere
    # before (every element wrong), then the converter refused it.
    model = torch.jit.script(_ZeroWhenPositive())
    i = torch.tensor([0, 2])
    program = onnxport.export(model, (torch.rand(4, 3), i), dynamo=dynamo)
    for x in (torch.rand(4, 3), -torch.rand(4, 3)):
        _close(program(x.clone(), i)[0], model(x.clone(), i))


class _AddInALoop(torch.nn.Module):
    def forward(self, x):
        y = x.clone()
        for k in range(x.size(0)):
            y.add_(k)
        return y


@pytest.mark.parametrize("dynamo", [None, False])
def test_an_in_place_write_inside_a_scripted_loop_is_a_carried_value(dynamo):
    model = torch.jit.script(_AddInALoop())
    program = onnxport.export(model, (torch.rand(3, 2),), dynamo=dynamo, input_names=["x"],
                              dynamic_axes={"x": {0: "n"}})
    for n in (3, 5):
        x = torch.rand(n, 2)
        _close(program(x)[0], model(x))


class _WithAScriptedEncoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.encoder = torch.jit.script(
            torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False))
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x, padding: Optional[torch.Tensor] = None):
        if padding is None:
            return self.head(self.encoder(x))
        return self.head(self.encoder(x, src_key_padding_mask=padding))


def _padding(batch: int, steps: int) -> torch.Tensor:
    padding = torch.zeros(batch, steps, dtype=torch.bool)
    padding[0, steps - 2:] = True
    return padding


@pytest.mark.parametrize("dynamo", [None, False])
@pytest.mark.parametrize("masked", [False, True], ids=["unmasked", "padding mask"])
def test_a_scripted_transformer_encoder_inside_a_traced_model(dynamo, masked):
    # Freezing left the layers' in_proj weights read from the module (they flow into the
    # tuple the fast-path check reads), so the encoder stayed a module the tracer refused
    # ("not part of the active trace", torch.onnx too); and a function made of its graph
    # lost forward's defaults (mask=None, ...). The weights are constants of the function
    # now, and the call fills the defaults in. With a padding mask, the layers' fast-path
    # checks branch on torch.is_autocast_enabled() and x.is_nested, a list comprehension
    # inside: folded to the export's answers (both False), as ONNX has neither.
    model = _WithAScriptedEncoder().eval()
    shapes = [(2, 5), (3, 7)]
    inputs = [(torch.randn(b, s, 16), *((_padding(b, s),) if masked else ())) for b, s in shapes]
    names = ["x", "padding"] if masked else ["x"]
    program = onnxport.export(model, inputs[0], dynamo=dynamo, input_names=names,
                              dynamic_axes={name: {0: "b", 1: "s"} for name in names})
    for given in inputs:
        with torch.no_grad():
            _close(program(*given)[0], model(*given))


class _ScaledSteps(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(4))

    def forward(self, x):
        for i in range(x.size(0)):
            x = x + self.weight * i
        return x


class _WithAScriptedPart(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.steps = torch.jit.script(_ScaledSteps())

    def forward(self, x):
        return self.steps(self.linear(x)) + 1


@pytest.mark.parametrize("dynamo", [None, False])
def test_a_scripted_submodule_of_a_traced_model_keeps_its_loop(dynamo):
    # The tracer refused the call ("not part of the active trace"): the scripted submodule is
    # now called as a function of its frozen graph, its loop an ONNX Loop over the run's size.
    model = _WithAScriptedPart().eval()
    program = onnxport.export(model, (torch.randn(3, 4),), dynamo=dynamo, input_names=["x"],
                              dynamic_axes={"x": {0: "n"}})
    assert isinstance(model.steps, torch.jit.ScriptModule)  # put back
    for n in (3, 6):
        x = torch.randn(n, 4)
        with torch.no_grad():
            _close(program(x)[0], model(x))


class _BranchInALoop(torch.nn.Module):
    def forward(self, x):
        for k in range(x.size(0)):
            if bool(x[k].sum() > 0):
                x = x * 2
            else:
                x = x - 1
        return x


class _LoopInALoop(torch.nn.Module):
    def forward(self, x):
        for k in range(x.size(0)):
            for j in range(2):
                x = x + k * j
        return x


@pytest.mark.parametrize("dynamo", [None, False])
@pytest.mark.parametrize("cls", [_BranchInALoop, _LoopInALoop])
def test_scripted_control_flow_nested_in_a_loop(cls, dynamo):
    # Refused before ("a loop in a loop, a branch in a loop: not yet"): inner bodies are
    # converted and propagated as the outer ones are.
    model = torch.jit.script(cls())
    program = onnxport.export(model, (torch.randn(3, 2),), dynamo=dynamo, input_names=["x"],
                              dynamic_axes={"x": {0: "n"}})
    for n in (3, 5):
        x = torch.randn(n, 2)
        _close(program(x)[0], model(x))


@pytest.mark.parametrize("dynamo", [None, False])
def test_no_node_names_a_line_of_onnxport_as_its_source(dynamo):
    # Ops that onnxport's replay of a trace or its packed-sequence quirk runs named those
    # files ("onnxport/capture/torchscript.py:1799 in forward") instead of the model's line.
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    class Packed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = torch.nn.LSTM(4, 5)

        def forward(self, x, lengths):
            return pad_packed_sequence(self.rnn(pack_padded_sequence(x, lengths))[0])[0]

    program = onnxport.export(Packed(), (torch.randn(5, 3, 4), torch.tensor([5, 4, 2])),
                              dynamo=dynamo)
    sources = {node.metadata_props.get("onnxport.source", "") for node in program.model.graph}
    assert not [s for s in sources if "onnxport" in s], sources
    assert any("test_torchscript.py" in s for s in sources)


class _WhileBoth(torch.nn.Module):
    def forward(self, x):
        steps = 0
        while bool(x.sum() < 10) and steps < 20:
            x = x + 1
            steps += 1
        return x


@pytest.mark.parametrize("dynamo", [None, False])
def test_a_while_loop_on_two_conditions(dynamo):
    # `a and b` is a branch inside the loop body whose one side is the constant False.
    model = torch.jit.script(_WhileBoth())
    program = onnxport.export(model, (torch.randn(3),), dynamo=dynamo)
    for x in (torch.randn(3), torch.randn(3) - 50, torch.full((3,), 100.0)):
        _close(program(x)[0], model(x))


@torch.jit.script
def _doubled_up_to(x, n: int):
    i = 0
    while i < n and x.sum() < 100:
        x = x * 2
        i += 1
    return x


class _CallsAScriptedWhile(torch.nn.Module):
    def forward(self, x):
        return _doubled_up_to(x, 3) + 1


@pytest.mark.parametrize("dynamo", [None, False])
def test_a_while_loop_on_a_number_and_a_tensor_comparison(dynamo):
    # `i < n and x.sum() < 100`: the branch the `and` makes gives False or the comparison's
    # 0-d tensor; propagating the loop failed ("'bool' object has no attribute 'dim'").
    model = _CallsAScriptedWhile()
    program = onnxport.export(model, (torch.rand(2, 3),), dynamo=dynamo, input_names=["x"],
                              dynamic_axes={"x": [0, 1]})
    for x in (torch.rand(2, 3), torch.rand(4, 5) * 20, torch.full((3, 3), 50.0)):
        _close(program(x)[0], model(x))


class _ListLoopAfterAWhile(torch.nn.Module):
    def forward(self, x, ys: list[torch.Tensor], scale: float):
        steps = 0
        while bool(x.abs().sum() > 1) and steps < 50:
            x = x / 2
            steps += 1
        for y in ys:
            x = x + y * scale
        return x


@pytest.mark.parametrize("dynamo", [None, False])
def test_a_loop_over_a_list_input_beside_a_while_loop(dynamo):
    # The list's loop (known count) is unrolled by torch's converter into calls of its body,
    # which are inlined so that the graph is propagated here: the while loop needs that.
    model = torch.jit.script(_ListLoopAfterAWhile())
    ys = [torch.randn(3), torch.randn(3)]
    program = onnxport.export(model, (torch.randn(3) * 8, ys, 0.5), dynamo=dynamo)
    for x in (torch.randn(3) * 8, torch.randn(3) * 0.1):
        _close(program(x, *ys)[0], model(x, ys, 0.5))


class _WhileUntilARow(torch.nn.Module):
    def forward(self, x):
        i = 0
        scale = 1.0
        found = False
        while i < x.size(0):
            if bool(x[i].sum() > 3):
                found = True
                break
            x = x + 1
            scale = scale * 0.5
            i += 1
        return x * scale, i, found


@pytest.mark.parametrize("dynamo", [None, False])
def test_a_while_loop_whose_break_branch_keeps_its_numbers(dynamo):
    # The branch that breaks returns the counter (and a float, a bool) it was given: torch's
    # converter cloned each, which fails on a number ("aten::clone() Expected a value of type
    # 'Tensor'").
    model = torch.jit.script(_WhileUntilARow())
    x = torch.zeros(4, 3)
    x[2] = 5
    program = onnxport.export(model, (x,), dynamo=dynamo, input_names=["x"],
                              dynamic_axes={"x": [0, 1]})
    later, never = torch.zeros(6, 2), torch.zeros(3, 5)
    later[4] = 5
    for inputs in (x, later, never):
        actual, expected = program(inputs.clone()), model(inputs.clone())
        _close(actual[0], expected[0])
        assert [int(actual[1]), bool(actual[2])] == [expected[1], expected[2]]


def test_fake_tensor_errors_are_not_logged_while_propagating(monkeypatch):
    # A fake run's failure is reported by the CaptureError naming the op; torch's fake tensor
    # logger would also print it with a traceback. Silenced for the propagation only.
    import logging

    from onnxport.capture.torchscript import propagate

    fake_log = logging.getLogger("torch._subclasses.fake_tensor")
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    propagated = propagate._propagated_static

    def logging_run(*args, **kwargs):
        fake_log.error("during propagation")
        return propagated(*args, **kwargs)

    import onnxport.capture.torchscript as torchscript

    monkeypatch.setattr(torchscript, "_propagated_static", logging_run)
    handler = Keep()
    fake_log.addHandler(handler)
    try:
        onnxport.export(torch.nn.Linear(3, 2).eval(), (torch.randn(2, 3),), dynamo=False)
        fake_log.error("after the export")
    finally:
        fake_log.removeHandler(handler)
    assert records == ["after the export"]


class _GrownByCat(torch.nn.Module):
    def forward(self, x):
        rows = x[0:1]
        for i in range(1, x.size(0)):
            rows = torch.cat((rows, x[i:i + 1] * i), 0)
        return rows


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_a_tensor_grown_by_cat_in_a_scripted_loop_of_a_dynamic_count(dynamo):
    # The carried tensor's size is an expression of the iteration (one row more each time):
    # propagation guarded on it ("could not guard on data-dependent expression") and refused.
    model = torch.jit.script(_GrownByCat())
    program = onnxport.export(model, (torch.randn(4, 3),), dynamo=dynamo, input_names=["x"],
                              dynamic_axes={"x": {0: "n"}})
    assert "Loop" in [node.op_type for node in program.model.graph]
    for n in (4, 1, 2, 7):
        x = torch.randn(n, 3)
        _close(program(x)[0], model(x))


@pytest.mark.parametrize("function", [
    lambda x, y: torch.nn.functional.pairwise_distance(x, y, keepdim=True),
    lambda x, y: torch.aminmax(x - y, dim=1)],
    ids=["pairwise_distance", "aminmax"])
def test_a_boolean_argument_of_the_traced_graph_is_a_bool(function):
    # TorchScript keeps a bool constant as an integer; torch's decompositions of these ops
    # refused it ("argument 'keepdim' must be bool, not int") and the export failed.
    class Model(torch.nn.Module):
        def forward(self, x, y):
            return function(x, y)

    x, y = torch.randn(3, 4), torch.randn(3, 4)
    program = onnxport.export(Model(), (x, y), dynamo=False)
    for actual, expected in zip(program(x, y), torch.utils._pytree.tree_leaves(Model()(x, y))):
        _close(actual, expected)


class _AddsABias(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(4))

    def forward(self, x, y):
        return x + self.bias, x * y


@pytest.mark.parametrize("dynamo", [None, False])
def test_a_dynamic_axis_the_model_fixes_is_kept_static_with_a_warning(dynamo):
    # dynamic_axes naming an axis the model fixes (x's features meet a bias of 4; y's batch
    # meets x's static one): torch.onnx exports; dynamo=False failed on torch.export's
    # "Constraints violated", where the default path warned and kept the axis static.
    from onnxport.errors import DynamicDimensionFixedWarning

    model = _AddsABias()
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    with pytest.warns(DynamicDimensionFixedWarning, match="axis 1.*fixed to 4"):
        program = onnxport.export(model, (x, y), dynamo=dynamo, input_names=["x", "y"],
                                  dynamic_axes={"x": {0: "b", 1: "f"}, "y": {0: "n"}})
    assert [str(v.shape) for v in program.model.graph.inputs] == ["[b,4]", "[b,4]"]
    for batch in (3, 5):
        x, y = torch.randn(batch, 4), torch.randn(batch, 4)
        for actual, expected in zip(program(x, y), model(x, y)):
            _close(actual, expected)


class _StatefulLSTM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.LSTM(3, 5)

    def forward(self, x, h0, c0):
        return self.rnn(x, (h0, c0))


def test_the_traced_program_runs_in_pytorch_with_each_input_in_its_place():
    # The program's placeholders were named input_1, input_2... for targets input, input_1...:
    # its generated forward then bound every input to the first ("input_2 = input_1"), so
    # the program run in PyTorch (exported_program.module(), capture's grown-size checks)
    # computed garbage, and a check took the LSTM's state for its input.
    torch.manual_seed(0)
    model = _StatefulLSTM().eval()
    x, h, c = torch.randn(4, 2, 3), torch.randn(1, 2, 5), torch.randn(1, 2, 5)
    program = onnxport.export(model, (x, h, c), dynamo=False)
    actual = torch.utils._pytree.tree_leaves(program.exported_program.module()(x, h, c))
    expected = torch.utils._pytree.tree_leaves(model(x, h, c))
    assert len(actual) == len(expected) == 3
    for a, e in zip(actual, expected):
        _close(a, e)


class _RowsWeighted(torch.nn.Module):
    def forward(self, x):
        total = torch.zeros(x.size(1))
        for i in range(x.size(0)):  # the count, a Python number: the trace unrolls 4 steps
            total = total + x[i] * i
        return total


def test_a_dynamic_axis_the_trace_fixed_silently_is_kept_static_with_a_warning():
    # torch.onnx exports this with the axis dynamic and 4 steps unrolled: wrong values at
    # every other size. The traced graph is checked at a larger size when tracing fixed a
    # value; it differs there, so the axis is static and ONNX Runtime refuses other sizes.
    from onnxport.errors import DynamicDimensionFixedWarning

    model = _RowsWeighted()
    x = torch.randn(4, 3)
    with pytest.warns(DynamicDimensionFixedWarning, match="axis 0 \\('n'\\).*kept at .* 4"):
        program = onnxport.export(model, (x,), dynamo=False, input_names=["x"],
                                  dynamic_axes={"x": {0: "n", 1: "m"}})
    assert str(program.model.graph.inputs[0].shape) == "[4,m]"
    other = torch.randn(4, 6)
    _close(program(other)[0], model(other))


class _RolledByHalf(torch.nn.Module):
    def forward(self, x):
        # (flattened: the tracer keeps the shift, and warns of nothing)
        return x.roll(x.size(1) // 2) * 2


class _RolledByHalfAlongDims(torch.nn.Module):
    def forward(self, x):
        return x.roll(x.size(1) // 2, 1) * 2 + x.roll((-x.size(0), 1 - x.size(1)), (0, 1))


def test_a_number_the_tracer_keeps_silently_is_warned_of_and_its_axis_kept_static():
    # roll took the traced size // 2 as the example's 2 (found by differential fuzzing: the
    # ONNX model rolled by 2 at every size, silently; torch.onnx's too).
    from onnxport.errors import DynamicDimensionFixedWarning, TracingWarning

    model, x = _RolledByHalf(), torch.randn(3, 5)
    with pytest.warns(DynamicDimensionFixedWarning, match="axis 1 \\('m'\\).*kept at .* 5"), \
            pytest.warns(TracingWarning, match="roll took a traced number"):
        program = onnxport.export(model, (x,), dynamo=False, input_names=["x"],
                                  dynamic_axes={"x": {0: "n", 1: "m"}})
    assert str(program.model.graph.inputs[0].shape) == "[n,5]"
    other = torch.randn(6, 5)
    _close(program(other)[0], model(other))


def test_a_roll_by_a_traced_number_along_dims_follows_the_size():
    # x.roll(x.size(1) // 2, 1) kept the example's shift (warned of, the axis static); along
    # named dims it is a gather of the positions shifted, which the trace records.
    import warnings

    from onnxport.errors import TracingWarning

    model = _RolledByHalfAlongDims()
    with warnings.catch_warnings():
        warnings.simplefilter("error", TracingWarning)
        program = onnxport.export(model, (torch.randn(3, 5),), dynamo=False, input_names=["x"],
                                  dynamic_axes={"x": {0: "n", 1: "m"}})
    assert str(program.model.graph.inputs[0].shape) == "[n,m]"
    for shape in ((3, 5), (6, 4), (1, 9), (2, 1), (0, 3)):
        other = torch.randn(shape)
        _close(program(other)[0], model(other))


def test_an_op_given_a_run_time_number_it_takes_as_a_constant_says_so():
    # torch.diagonal's offset from a dynamic size failed with a bare TypeError ("'>' not
    # supported between instances of 'Value' and 'int").
    from onnxport.errors import TranslationError

    class Diagonal(torch.nn.Module):
        def forward(self, x):
            return torch.diagonal(x, x.size(1) // 2 - 1) * 2

    with pytest.raises(TranslationError, match="aten::diagonal.*known only at run time.*static"):
        onnxport.export(Diagonal(), (torch.randn(3, 5),), dynamo=False, input_names=["x"],
                        dynamic_axes={"x": {0: "n", 1: "m"}})


def test_numbers_the_tracer_records_are_not_warned_of():
    class Sized(torch.nn.Module):
        def forward(self, x):
            return x.narrow(1, 0, x.size(1) // 2).view(x.size(0), -1) * x.size(0)

    import warnings

    from onnxport.errors import TracingWarning

    with warnings.catch_warnings():
        warnings.simplefilter("error", TracingWarning)
        program = onnxport.export(Sized(), (torch.randn(3, 6),), dynamo=False,
                                  input_names=["x"], dynamic_axes={"x": {0: "n", 1: "m"}})
    other = torch.randn(5, 8)
    _close(program(other)[0], Sized()(other))


class _NarrowedToTheSmaller(torch.nn.Module):
    def forward(self, x):
        return x.narrow(1, 0, min(x.size(0), x.size(1))) * 2


def test_a_relation_between_sizes_the_trace_fixed_keeps_the_axes_static():
    # min() of two sizes is the size of axis 1 in the trace (3 < 5 in the example): right
    # while both grow by half, wrong where axis 0 becomes the smaller (found by fuzzing).
    from onnxport.errors import DynamicDimensionFixedWarning

    model, x = _NarrowedToTheSmaller(), torch.randn(5, 3)
    with pytest.warns(DynamicDimensionFixedWarning) as record:
        program = onnxport.export(model, (x,), dynamo=False, input_names=["x"],
                                  dynamic_axes={"x": {0: "n", 1: "m"}})
    fixed = " ".join(str(w.message) for w in record)
    assert "axis 0 ('n')" in fixed and "axis 1 ('m')" in fixed
    assert str(program.model.graph.inputs[0].shape) == "[5,3]"
    _close(program(x)[0], model(x))


class _RowsNarrowedToTheWidth(torch.nn.Module):
    def forward(self, x):
        x = x.narrow(0, 0, min(x.size(0), x.size(1)))
        return (x @ x.transpose(0, 1)).roll(1, 1).sum(0)


def test_a_relation_whose_graph_narrows_past_the_end_keeps_the_axes_static():
    # The trace narrows the 4 rows to the width (3 < 4): where the width grows past the rows,
    # the graph narrows past the end. That failure was counted as loud (a graph that cannot
    # run), while ONNX's Slice clamps and the roll read the width: silently wrong values at
    # (3, 4) (fuzz seed 24087). As for _NarrowedToTheSmaller, both axes are kept static.
    from onnxport.errors import DynamicDimensionFixedWarning

    model = _RowsNarrowedToTheWidth()
    with pytest.warns(DynamicDimensionFixedWarning, match="axis 1 \\('m'\\)"):
        program = onnxport.export(model, (torch.randn(4, 3),), dynamo=False,
                                  input_names=["x"], dynamic_axes={"x": {0: "n", 1: "m"}})
    assert str(program.model.graph.inputs[0].shape) == "[4,3]"  # the relation: both static
    x = torch.randn(4, 3)
    _close(program(x)[0], model(x))


class _SlicedLists(torch.nn.Module):
    def forward(self, x):
        a, b, c = x.split(1, 0)[:3]
        middle = x.chunk(4, 1)[1:3]
        every_other = x.unbind(0)[::2]
        return a + b + c + middle[0] + middle[-1] + every_other[0] + every_other[1]


@pytest.mark.parametrize("dynamo", [None, False])
def test_a_slice_of_a_list_of_pieces_in_scripted_code(dynamo):
    # aten::slice.t of the pieces a split returns: the fake run gave torch's list op a
    # Python list, which it refused.
    x = torch.randn(3, 4)
    scripted = torch.jit.script(_SlicedLists())
    program = onnxport.export(scripted, (x,), dynamo=dynamo)
    _close(program(x)[0], scripted(x))


class _WrittenBiasThenBatchedMatmul(torch.nn.Module):
    """A write into a view of a weight's clone (the program is functionalized, which traces
    it again), then a matmul over the dynamic batch: swin_v2's attention."""

    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(8))

    def forward(self, x):
        bias = self.bias.clone()
        bias[2:4].zero_()
        q = (x + bias).unsqueeze(1)
        return q @ q.transpose(-1, -2)


def test_a_dynamic_batch_of_one_stays_dynamic_through_functionalization():
    # The second trace (functionalizing the write) fixed the batch to the example's 1 in the
    # matmul's shapes: the file declared static shapes that ONNX Runtime's optimizer trusts
    # (swin_v2_t then failed at batch 2 in a Reshape it had folded). (On torch 2.11 the fake
    # matmul's C++ kernel fixed it too, until composite ops ran through the Python
    # dispatcher in the fake pass: a210aa1.)
    model = _WrittenBiasThenBatchedMatmul().eval()
    program = onnxport.export(model, (torch.randn(1, 4, 8),), input_names=["x"],
                              dynamic_axes={"x": {0: "b"}}, dynamo=False)
    assert str(program.model.graph.outputs[0].shape) == "[b,1,4,4]"
    for batch in (1, 3):
        x = torch.randn(batch, 4, 8)
        _close(program(x)[0], model(x))


def test_swin_v2_attention_from_a_batch_of_one_runs_at_other_batches():
    models = pytest.importorskip("torchvision.models.swin_transformer")
    torch.manual_seed(0)
    block = models.ShiftedWindowAttentionV2(96, [8, 8], [4, 4], 3).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TracingWarning)
        program = onnxport.export(block, (torch.randn(1, 8, 8, 96),), input_names=["x"],
                                  dynamic_axes={"x": {0: "b"}}, dynamo=False)
    for batch in (1, 2):
        x = torch.randn(batch, 8, 8, 96)
        _close(program(x)[0], block(x))


def _bart(transformers):
    torch.manual_seed(0)
    config = transformers.BartConfig(
        vocab_size=100, d_model=32, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
        decoder_ffn_dim=64)
    bart = transformers.BartModel(config).eval()

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bart = bart

        def forward(self, ids, mask):
            return self.bart(input_ids=ids, attention_mask=mask).last_hidden_state

    return Model().eval()


def test_bart_from_a_batch_of_one():
    # Its embedding scale (a 0-d float64 tensor) broadcast a batch of 1 to 1, a guard that
    # fixed the dim without replacing it: the file had static batch shapes and failed at
    # batch 2 in ONNX Runtime; then the export was refused. From a batch of 1, the fake run
    # also guarded on a layout (the copy into a slice of shift_tokens_right's ids holds a
    # batch of 1 whatever its stride): the traced graph is now propagated from a batch of 2.
    transformers = pytest.importorskip("transformers")
    model = _bart(transformers)
    ids = torch.randint(3, 100, (1, 7))
    axes = {0: "batch", 1: "sequence"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TracingWarning)
        program = onnxport.export(model, (ids, torch.ones_like(ids)), dynamo=False,
                                  input_names=["ids", "mask"],
                                  dynamic_axes={"ids": axes, "mask": axes})
    assert [d.value for d in program.model.graph.inputs[0].shape] == ["batch", "sequence"]
    for shape in ((1, 7), (3, 9), (2, 4)):
        ids = torch.randint(3, 100, shape)
        _close(program(ids, torch.ones_like(ids))[0], model(ids, torch.ones_like(ids)))


def test_bart_with_dynamic_batch_and_sequence():
    # bart writes into views (shift_tokens_right), so its program is functionalized, which
    # traces it again: there each sequence length read back from a tensor was a new unknown
    # number, which sdpa's check against the mask's length could not decide (the export
    # failed). The reads propagation proved to be the input's sequence length read it now.
    model = _bart(pytest.importorskip("transformers"))
    ids = torch.randint(3, 100, (2, 7))
    axes = {0: "batch", 1: "sequence"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TracingWarning)
        program = onnxport.export(model, (ids, torch.ones_like(ids)), dynamo=False,
                                  input_names=["ids", "mask"],
                                  dynamic_axes={"ids": axes, "mask": axes})
    for shape in ((2, 7), (3, 11)):
        ids = torch.randint(3, 100, shape)
        mask = torch.ones_like(ids)
        mask[0, -2:] = 0
        _close(program(ids, mask)[0], model(ids, mask))


class _ScaledByStride(torch.nn.Module):
    def forward(self, x):
        return x.view(-1) * x.stride(0)


def test_a_stride_read_as_a_number_is_named_in_a_warning():
    # The tracer cannot trace strides: the example's is a constant, which it recorded silently
    # (torch.onnx too); the warning names the line.
    x = torch.randn(3, 4)
    with pytest.warns(TracingWarning, match="stride") as caught:
        program = onnxport.export(_ScaledByStride(), (x,), dynamo=False)
    assert __file__ in {w.filename for w in caught if w.category is TracingWarning}
    _close(program(x)[0], _ScaledByStride()(x))


class _ReadThroughData(torch.nn.Module):
    def forward(self, x):
        return x.data * 2 + x.data[1:].sum(), x[0] + x[0].data


def test_an_input_read_through_data_stays_the_input():
    # The tracer records x.data as a constant holding the example (torch.onnx exports that
    # constant); the whole tensor is the input again, a part of it gets a warning.
    x = torch.randn(3, 4)
    with pytest.warns(TracingWarning, match=r"\.data"):
        program = onnxport.export(_ReadThroughData(), (x,), dynamo=False,
                                  input_names=["x"], dynamic_axes={"x": {0: "n"}})
    other = torch.randn(5, 4)
    _close(program(other)[0], _ReadThroughData()(other)[0])


class _FilledAndReturned(torch.nn.Module):
    def forward(self, x):
        return x.new_empty(x.shape).fill_(2), torch.empty(3, 4).fill_(3) + x


@pytest.mark.parametrize("dynamo", [None, False])
def test_a_fresh_tensor_filled_in_place_and_read_is_its_value(dynamo):
    # The fill folded to a constant, but the in-place call's result (read by the output and by
    # the Add) was erased with it: "Tried to erase Node fill__scalar but it still had 1 users".
    x = torch.randn(3, 4)
    program = onnxport.export(_FilledAndReturned(), (x,), dynamo=dynamo)
    for actual, expected in zip(program(x), _FilledAndReturned()(x)):
        _close(actual, expected)


class _SqueezedThenNumbered(torch.nn.Module):
    def forward(self, x):
        x = (x.narrow(1, 0, 1).expand(x.shape) + x).squeeze(0)
        x = x + torch.arange(x.numel(), dtype=x.dtype).view(x.shape)
        return x.repeat(2)


def test_a_trace_whose_sizes_read_back_fail_at_two_is_a_capture_error():
    # Traced at a batch of 1, the graph's view to the size it read back fails where the batch
    # is 2: that run, made to read the sizes, escaped as torch's RuntimeError ("shape '[2]' is
    # invalid for input of size 6", fuzz seed 27267) instead of the capture's error.
    with pytest.raises(CaptureError, match="reads them back as Python numbers"):
        onnxport.export(_SqueezedThenNumbered(), (torch.randn(1, 3),), dynamo=False,
                        input_names=["x"], dynamic_axes={"x": {0: "a", 1: "b"}})


class _SummedPairsOfRows(torch.nn.Module):
    def forward(self, x):
        res: List[torch.Tensor] = []
        for piece in x.split(2, 0):
            res.append(piece.sum(0))
        return torch.stack(res)


class _FirstRowsOfThirds(torch.nn.Module):
    def forward(self, x):
        res = torch.zeros_like(x[:1])
        for piece in x.chunk(3, 0):
            res = res + piece[:1]
        return res


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "dynamo=False"])
@pytest.mark.parametrize("model", [_SummedPairsOfRows, _FirstRowsOfThirds],
                         ids=["split", "chunk"])
def test_a_scripted_loop_over_the_pieces_of_a_static_axis(model, dynamo):
    # The count of the loop, len(x.split(2)), was a run-time count even where no axis is
    # dynamic: the capture refused the loop. It is the example's count, as len(x.unbind(0))'s.
    x = torch.randn(7, 3)
    program = onnxport.export(torch.jit.script(model()), (x,), dynamo=dynamo)
    _close(program(x)[0], model()(x))


class _OneCellTwice(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = torch.nn.LSTMCell(4, 5)
        self.linear = torch.nn.Linear(5, 5)

    def forward(self, x, h):
        first, _ = self.cell(x, (h, h))
        return self.linear(self.linear(first)), self.cell(x)[0]


@pytest.mark.parametrize("dynamo", [None, False])
def test_a_scripted_submodule_called_twice_has_its_weights_once(dynamo):
    # Scripted, each call of the cell (with and without a state) had its own copy of the
    # weights, under one name: translation failed ("Initializer 'cell.weight_ih' is already
    # registered").
    torch.manual_seed(0)
    model = torch.jit.script(_OneCellTwice().eval())
    x, h = torch.randn(3, 4), torch.randn(3, 5)
    program = onnxport.export(model, (x, h), dynamo=dynamo)
    names = set(program.model.graph.initializers)
    assert {"linear.weight", "linear.bias"} <= names and "linear.weight_1" not in names
    for inputs in [(x, h), (torch.randn(3, 4), torch.randn(3, 5))]:
        for actual, expected in zip(program(*inputs), model(*inputs), strict=True):
            torch.testing.assert_close(actual, expected, rtol=1e-3, atol=1e-4)


class _WhileOnATensorCondition(torch.jit.ScriptModule):
    # PyTorch's suite (test_while_cond): the condition is a bool tensor, and the body adds it
    # in the input's dtype. The body's read of a.dtype was a Python call of torch's converter,
    # which no ExportedProgram holds: the graph went to torch.export, which cannot loop on a
    # tensor's value (GuardOnDataDependentSymNode on both paths).
    @torch.jit.script_method
    def forward(self, x, a):
        b = a < 4
        while b:
            a += b.to(a.dtype)
            b = a < 4
        return x + a


@pytest.mark.parametrize("dynamo", [None, False])
def test_a_while_loop_on_a_tensor_condition_whose_body_reads_a_dtype(dynamo):
    x = torch.zeros(1, 2, 3, dtype=torch.long)
    program = onnxport.export(_WhileOnATensorCondition(), (x, torch.tensor([0])), dynamo=dynamo)
    assert "Loop" in [node.op_type for node in program.model.graph]
    for start in (0, 2, 7):
        a = torch.tensor([start])
        torch.testing.assert_close(program(x, a.clone())[0],
                                   _WhileOnATensorCondition()(x, a.clone()))


class _IfView(torch.nn.Module):
    def forward(self, x, y, cond):
        bs, seq = y.shape[:2]
        if cond:
            res = x.view(bs, seq, -1)
        else:
            res = y
        return res.transpose(1, 2)


@pytest.mark.parametrize("dynamo", [None, False])
def test_a_branch_that_returns_an_input_unchanged(dynamo):
    # PyTorch's suite (test_if_view): torch's converter looked the branch's result up among
    # the values the branch makes ("Output y.1 not found"); every axis is dynamic.
    model = torch.jit.script(_IfView())
    x, y = torch.randn(2, 16, 2, 2), torch.randn(2, 16, 8)
    program = onnxport.export(model, (x, y, torch.tensor([True])), dynamo=dynamo,
                              input_names=["x", "y", "cond"],
                              dynamic_axes={"x": [0, 1, 2, 3], "y": [0, 1, 2]})
    assert "If" in [node.op_type for node in program.model.graph]
    for inputs in [(x, y, torch.tensor([True])), (x, y, torch.tensor([False])),
                   (torch.randn(3, 5, 2, 2), torch.randn(3, 5, 4), torch.tensor([True]))]:
        torch.testing.assert_close(program(*inputs)[0], model(*inputs))


class _MaskedWritesTwice(torch.nn.Module):
    def forward(self, x, m):
        y = x.clone()
        y[m] = y[m] * 2
        y[:, 0][m[:, 0]] = -1
        return y


@pytest.mark.parametrize("axes", [None, {"x": [0], "m": [0]}], ids=["static", "dynamic"])
def test_traced_masked_writes_into_a_view_replayed_by_torch_export(axes):
    # Writes by mask read back sizes, so torch.export replays the traced graph; its constants
    # were buffers under "graph.", which unlifting them (functionalization) took for the
    # GraphModule's FX graph: "references nonexistent attribute".
    model = _MaskedWritesTwice()
    x, m = torch.randn(4, 3), torch.randn(4, 3) > 0
    program = onnxport.export(model, (x, m), dynamo=False, input_names=["x", "m"],
                              dynamic_axes=axes)
    others = [(x, m)] + ([(torch.randn(6, 3), torch.randn(6, 3) > 0)] if axes else [])
    for a, b in others:
        torch.testing.assert_close(program(a, b)[0], model(a, b))


class _TracedLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(10, 20)

    def forward(self, x):
        return self.lin(x)


class _TracedInBothBranches(torch.jit.ScriptModule):
    def __init__(self):
        super().__init__()
        self.traced = torch.jit.trace(_TracedLinear(), torch.randn(2, 10))

    @torch.jit.script_method
    def forward(self, x):
        if bool(x.sum() > 0):
            return self.traced(x)
        return self.traced(x) * 2


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_a_traced_submodule_called_only_in_scripted_branches(dynamo):
    # Its weights are read only inside the branches: torch's converter looked them up in the
    # top-level graph and failed ("Attribute traced.lin.weight not found").
    model = _TracedInBothBranches()
    program = onnxport.export(model, (torch.randn(2, 10).abs(),), input_names=["x"],
                              dynamic_axes={"x": [0]}, dynamo=dynamo)
    for x in (torch.randn(2, 10).abs(), -torch.randn(5, 10).abs()):
        torch.testing.assert_close(program(x)[0], model(x), rtol=1e-3, atol=1e-4)


class _SizesReturned(torch.jit.ScriptModule):
    @torch.jit.script_method
    def forward(self, x):
        return x.size(0) * 2, x.shape[1] + 0.5


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_numbers_computed_from_sizes_returned(dynamo, dynamic):
    # With dynamic axes the float had no declared shape (the checker refused the file). A
    # Python float is returned as a 0-d double, static or not: TorchScript's float, what
    # torch.onnx's TorchScript exporter gives (and NumPy's float, to compare with).
    axes = {"x": [0, 1]} if dynamic else None
    program = onnxport.export(_SizesReturned(), (torch.randn(4, 3),), input_names=["x"],
                              dynamic_axes=axes, dynamo=dynamo)
    x = torch.randn(7, 2) if dynamic else torch.randn(4, 3)
    count, half = program(x)
    assert count.shape == () and count.dtype == torch.int64 and int(count) == 2 * x.shape[0]
    assert half.shape == () and half.dtype == torch.float64 and float(half) == x.shape[1] + 0.5


class _OneResultBranch(torch.nn.Module):
    def forward(self, x, mask):
        if bool(x.sum() > 0):
            extra = torch.zeros_like(mask, dtype=x.dtype).masked_fill(mask, -5.0)
        else:
            extra = mask.to(x.dtype)
        return x + extra


@pytest.mark.parametrize("dynamo", [None, False])
def test_a_one_result_branch_runs_in_pytorch_as_the_program_says(dynamo):
    # The converter's one-result branch returned its value bare while the program took the
    # cond's [0]: run in PyTorch (capture's grown-size checks), the program added the mask's
    # first row instead of the mask (or failed on a 0-d result), and the checks compared
    # garbage. The branches return a tuple, as torch's cond's do.
    model = torch.jit.script(_OneResultBranch())
    x, mask = torch.randn(3, 4), torch.rand(3, 4) > 0.5
    program = onnxport.export(model, (x, mask), dynamo=dynamo, input_names=["x", "mask"],
                              dynamic_axes={"x": {0: "n"}, "mask": {0: "n"}})
    from onnxport.capture.program_run import run_program

    for rows, sign in ((3, 1), (5, 1), (5, -1)):
        x, mask = torch.randn(rows, 4).abs() * sign, torch.rand(rows, 4) > 0.5
        (ran,) = run_program(program.exported_program, (x, mask))
        _close(ran, model(x, mask))
        _close(program(x, mask)[0], model(x, mask))


class _HalfTheColumns(torch.nn.Module):
    def forward(self, x, scale: float):
        return x * scale, x.shape[1] / 2


@pytest.mark.parametrize("scripted", [False, True], ids=["traced", "scripted"])
@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_a_python_float_returned_is_a_double(dynamo, scripted):
    # (float32 before on every path: NumPy's float of the number, which PyTorch's exporter
    # tests compare with, is a double, as torch.onnx's TorchScript exporter gives it)
    model = torch.jit.script(_HalfTheColumns()) if scripted else _HalfTheColumns()
    x = torch.randn(2, 3)
    product, half = onnxport.export(model, (x, 2.5), dynamo=dynamo)(x, 2.5)
    _close(product, x * 2.5)
    # (Traced, the tracer computes x.shape[1] / 2 as a float32 tensor, not a Python float.)
    traced_number = dynamo is False and not scripted
    assert half.dtype == (torch.float32 if traced_number else torch.float64)
    assert half.shape == () and float(half) == 1.5


class _CompareNumbers(torch.nn.Module):
    def forward(self, x: int, y: int):
        return x == y


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_a_scripted_model_of_number_inputs_only(dynamo):
    # No tensor input: torch.export was given a dynamic-shapes spec of one entry for none.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the numbers computed with as the example's)
        program = onnxport.export(torch.jit.script(_CompareNumbers()), (3, 2), dynamo=dynamo)
    (equal,) = program(3, 2)
    assert equal.dtype == torch.bool and not bool(equal)


class _StateSetInBranches(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.state = torch.ones(2, 3)
        self.steps = 1

    def forward(self, x):
        if x.sum() > 0:
            self.state = x * 2
            self.steps = 5
        elif x.mean() < -0.5:
            self.state = x * 7
        return self.state + x, self.steps


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_attributes_set_in_branches_are_read_after_them(dynamo):
    # SILENT before: the writes in the branches were dropped, later reads took the
    # attribute's value at export (a constant: the input unread, the output ones).
    x = torch.randn(2, 3).abs()
    program = onnxport.export(torch.jit.script(_StateSetInBranches()), (x,), dynamo=dynamo)
    for inputs in (x, -torch.randn(2, 3).abs() - 1, torch.full((2, 3), -0.1)):
        state, steps = program(inputs)
        expected = _StateSetInBranches()(inputs)  # (a fresh module: the state changes)
        _close(state, expected[0])
        assert int(steps) == expected[1]


class _StateSetInALoop(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.total = torch.zeros(3)

    def forward(self, x):
        self.total = torch.zeros(3)
        for i in range(x.size(0)):
            self.total = self.total + x[i]
        return self.total


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_an_attribute_set_in_a_loop_of_a_run_time_count_is_refused(dynamo):
    with pytest.raises(CaptureError, match="sets self.total in a loop"):
        onnxport.export(torch.jit.script(_StateSetInALoop()), (torch.randn(4, 3),),
                        dynamo=dynamo, input_names=["x"], dynamic_axes={"x": [0]})


def _doubled(x: torch.Tensor) -> torch.Tensor:
    return x * 2


class _Forked(torch.nn.Module):
    def forward(self, x):
        future = torch.jit.fork(_doubled, x)
        return torch.jit.wait(future) + x.sum(0)


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_a_call_forked_and_waited_for_in_scripted_code(dynamo):
    # torch's converter has no prim::fork: the call runs in place, as torch.onnx inlines it.
    model = torch.jit.script(_Forked())
    program = onnxport.export(model, (torch.randn(2, 3),), dynamo=dynamo, input_names=["x"],
                              dynamic_axes={"x": [0]})
    for x in (torch.randn(2, 3), torch.randn(5, 3)):
        _close(program(x)[0], model(x))


class _MovedToTheCpu(torch.nn.Module):
    def forward(self, x):
        return x.cpu() * 2, x.to(x.device) + 1


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_scripted_x_cpu(dynamo):
    # (aten::cpu, which scripting records for x.cpu(), had no translation)
    model = torch.jit.script(_MovedToTheCpu())
    x = torch.randn(2, 3)
    for actual, expected in zip(onnxport.export(model, (x,), dynamo=dynamo)(x), model(x)):
        _close(actual, expected)


def _scaled_by(x: torch.Tensor, factor: Union[torch.Tensor, List[float]]) -> torch.Tensor:
    if isinstance(factor, torch.Tensor):
        return x * factor
    return x * factor[0]


class _CallsAFunctionOfAUnion(torch.nn.Module):
    def forward(self, x, factor):
        return _scaled_by(x, factor)


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_isinstance_of_an_inlined_function_s_union_parameter(dynamo):
    # Inlined with a tensor, the function's isinstance(factor, Tensor) stays in the graph
    # (pack_padded_sequence's lengths), which torch's converter has no conversion for.
    model = torch.jit.script(_CallsAFunctionOfAUnion())
    x, factor = torch.randn(2, 3), torch.tensor(2.5)
    _close(onnxport.export(model, (x, factor), dynamo=dynamo)(x, factor)[0], model(x, factor))


class _Prints(torch.nn.Module):
    def forward(self, x):
        print("shape", x.shape)
        return x * 2


@pytest.mark.parametrize("dynamo", [None, False])
def test_a_scripted_print_is_dropped(dynamo, capsys):
    # prim::Print reached torch.export as a call ("pop() called on empty stack").
    model = torch.jit.script(_Prints())
    program = onnxport.export(model, (torch.randn(2, 3),), dynamo=dynamo, input_names=["x"],
                              dynamic_axes={"x": [0]})
    x = torch.randn(4, 3)
    _close(program(x)[0], x * 2)


def _small_net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4),
                               torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                               torch.nn.Flatten(), torch.nn.Linear(4, 2)).eval()


@pytest.mark.parametrize("dynamo", [None, False])
@pytest.mark.parametrize("make", ["scripted", "traced"])
def test_a_frozen_script_module(make, dynamo):
    # torch.jit.freeze drops the modules' training flag, which the export read to put the
    # mode back ("'RecursiveScriptModule' object has no attribute 'training'").
    model = _small_net()
    example = torch.randn(1, 3, 8, 8)
    source = torch.jit.script(model) if make == "scripted" else torch.jit.trace(model, example)
    frozen = torch.jit.freeze(source)
    program = onnxport.export(frozen, (example,), dynamo=dynamo, input_names=["x"],
                              dynamic_axes={"x": [0, 2, 3]})
    x = torch.randn(2, 3, 10, 12)
    _close(program(x)[0], model(x))
    with pytest.raises(InvalidExportOptionsError, match="frozen"):
        onnxport.export(frozen, (example,), dynamo=dynamo,
                        training=onnxport.TrainingMode.TRAINING)


@pytest.mark.parametrize("dynamo", [None, False])
def test_a_module_optimized_for_inference_is_refused(dynamo):
    # Its MKLDNN constants and kernels crashed the process (a segmentation fault).
    optimized = torch.jit.optimize_for_inference(torch.jit.script(_small_net()))
    with pytest.raises(CaptureError, match="optimize_for_inference"):
        onnxport.export(optimized, (torch.randn(1, 3, 8, 8),), dynamo=dynamo)


class _SizedByStrides(torch.nn.Module):
    def forward(self, x):
        return x.new_zeros(x.stride(0), x.stride(1)) + x.sum()


class _StrideOfATranspose(torch.nn.Module):
    def forward(self, x):
        return x * x.t().stride(1)


@pytest.mark.parametrize("dynamo", [None, False])
def test_a_scripted_stride_of_a_contiguous_tensor(dynamo):
    # aten::sym_stride had no translation ("its decomposition calls it again").
    model = torch.jit.script(_SizedByStrides())
    program = onnxport.export(model, (torch.randn(2, 8),), dynamo=dynamo, input_names=["x"],
                              dynamic_axes={"x": [0, 1]})
    for x in (torch.randn(2, 8), torch.randn(3, 5)):
        _close(program(x)[0], model(x))
    with pytest.raises(Exception, match="not laid out contiguously"):
        onnxport.export(torch.jit.script(_StrideOfATranspose()), (torch.randn(2, 3),),
                        dynamo=dynamo, input_names=["x"], dynamic_axes={"x": [0, 1]})
