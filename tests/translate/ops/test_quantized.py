"""Quantized models (ops/quantized.py, capture/quirks/quantized_modules.py): torch.ao dynamic and
eager-mode static quantization, and PT2E's quantize/dequantize calls, exported as ONNX Q/DQ,
run in ONNX Runtime and compared with eager's quantized kernels within quantization error."""

from __future__ import annotations

import os
import tempfile
import warnings

import onnx
import onnxruntime as ort
import pytest
import torch

import onnxport
import onnxport.errors
import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers quantized_decomposed)
from op_check import check, op_types

quantization = torch.ao.quantization


def _ort_optimized_op_types(program) -> list[str]:
    """The node types of the graph ONNX Runtime runs after its own fusions."""
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "model.onnx")
        program.save(path)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.optimized_model_filepath = os.path.join(directory, "optimized.onnx")
        ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        return [n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node]


def _quantize_dynamic(model):
    with warnings.catch_warnings():  # torch.ao's notice that it moves to torchao
        warnings.simplefilter("ignore")
        return quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)


def _activation_steps(x: torch.Tensor, levels: int) -> float:
    """The step of a dynamic per-tensor uint8 grid over ``x``'s range (widened to hold 0)."""
    return float(x.max().clamp(min=0) - x.min().clamp(max=0)) / levels


def test_dynamic_linear_within_activation_rounding():
    torch.manual_seed(0)
    # quantize_dynamic swaps submodules only: the Linear sits in a Sequential.
    model = _quantize_dynamic(torch.nn.Sequential(torch.nn.Linear(32, 16))).eval()
    batch = torch.export.Dim("batch", min=1, max=64)
    x = torch.randn(8, 32)
    program = onnxport.export(model, (x,), dynamic_shapes=({0: batch},))
    # ONNX Runtime's quantize_dynamic form: the product computed on the integers.
    assert op_types(program)[:2] == ["DynamicQuantizeLinear", "MatMulInteger"], \
        op_types(program)
    assert "Gemm" not in op_types(program)
    weight = model[0].weight().dequantize()
    for inputs in (x, torch.randn(3, 32) * 4):
        actual = program(inputs)[0]
        expected = model(inputs)
        # The weights are the same integers on both sides; only the input's rounding differs:
        # eager's fbgemm kernel quantizes it to 0..127 (reduce_range), DynamicQuantizeLinear
        # to 0..255. Each side is off by at most half its step per input element, so an
        # output differs by at most sum|w| * (step_eager + step_onnx) / 2 (+ float rounding).
        step = (_activation_steps(inputs, 127) + _activation_steps(inputs, 255)) / 2
        bound = weight.abs().sum(1) * step + 1e-5
        assert ((actual - expected).abs() <= bound).all(), (actual - expected).abs().max()


def test_dynamic_linear_stack_runs_at_a_second_batch():
    torch.manual_seed(1)
    model = _quantize_dynamic(torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))).eval()
    batch = torch.export.Dim("batch", min=1, max=64)
    program = onnxport.export(model, (torch.randn(4, 16),), dynamic_shapes=({0: batch},))
    assert op_types(program).count("DynamicQuantizeLinear") == 2
    assert op_types(program).count("MatMulInteger") == 2
    for x in (torch.randn(4, 16), torch.randn(9, 16)):
        # Two layers of activation rounding (see above); 2 % of the outputs' range covers both
        # for these sizes (measured: under 1 %), a wrong weight or scale is off by far more.
        expected = model(x)
        torch.testing.assert_close(program(x)[0], expected, rtol=0,
                                   atol=0.02 * float(expected.abs().max()))


class _ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.quant = quantization.QuantStub()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.relu1 = torch.nn.ReLU()
        self.conv2 = torch.nn.Conv2d(8, 8, 3, groups=2)
        self.relu2 = torch.nn.ReLU()
        self.skip = torch.nn.quantized.FloatFunctional()
        self.fc = torch.nn.Linear(8 * 10 * 10, 5)
        self.dequant = quantization.DeQuantStub()

    def forward(self, x):
        x = self.relu1(self.conv1(self.quant(x)))
        y = self.relu2(self.conv2(x))
        y = self.skip.add(y, x[:, :, 1:-1, 1:-1])
        return self.dequant(self.fc(torch.flatten(y, 1)))


def _quantize_static(backend: str):
    torch.manual_seed(0)
    model = _ConvNet().eval()
    model = quantization.fuse_modules(model, [["conv1", "relu1"], ["conv2", "relu2"]])
    model.qconfig = quantization.get_default_qconfig(backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prepared = quantization.prepare(model)
        for _ in range(8):  # calibration
            prepared(torch.randn(4, 3, 12, 12))
        return quantization.convert(prepared)


@pytest.mark.parametrize("backend", ["x86", "fbgemm"])
def test_static_conv_net_within_two_output_steps(backend):
    model = _quantize_static(backend)
    x = torch.randn(4, 3, 12, 12)
    program = onnxport.export(model, (x,))
    types = op_types(program)
    assert types.count("QuantizeLinear") == 5 and "Conv" in types, types
    assert "QLinearConv" in _ort_optimized_op_types(program)
    actual, expected = program(x)[0], model(x)
    # Eager accumulates in int32 and requantizes; ONNX Runtime (or a float Conv between DQ
    # and Q) rounds the same sums: an element may land on the neighbouring grid point when
    # its sum sits at a rounding tie (one step), and a step taken inside the net can move a
    # later sum across one more rounding point: two steps of the output's grid at most here,
    # with most elements equal. A wrong scale, zero point or weight is off by many steps.
    step = model.fc.scale
    assert (actual - expected).abs().max() <= 2 * step * 1.001
    assert ((actual - expected).abs() < 1e-6).float().mean() > 0.9


def test_weights_stay_integers_behind_dequantize_linear():
    """FoldConstants must not fold DequantizeLinear(int8 weight) into a float weight."""
    program = onnxport.export(_quantize_static("x86"), (torch.randn(1, 3, 12, 12),))
    graph = program.model.graph
    weights = [node.inputs[0] for node in graph if node.op_type == "DequantizeLinear"
               and node.inputs[0].const_value is not None]
    assert len(weights) == 3
    assert all(w.dtype == onnx_ir_int8() for w in weights)
    per_channel = [node for node in graph if node.op_type == "DequantizeLinear"
                   and node.attributes.get("axis") is not None]
    assert len(per_channel) == 3  # the x86 qconfig quantizes weights per output channel
    # Nothing float32 of a weight's size is stored.
    assert all(init.dtype != onnx_ir_float() or init.const_value.size < 64
               for init in graph.initializers.values())


def onnx_ir_int8():
    import onnx_ir as ir

    return ir.DataType.INT8


def onnx_ir_float():
    import onnx_ir as ir

    return ir.DataType.FLOAT


class _PT2EStyle(torch.nn.Module):
    """The graph convert_pt2e makes (int8 activations, per-channel int8 weights, Q/DQ around
    a float linear), written out: torch 2.15 ships no prepare_pt2e and torchao is not a
    dependency, but its ops are torch's quantized_decomposed ones."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        weight = torch.randn(6, 10)
        self.register_buffer("scales", weight.abs().amax(1) / 127)
        self.register_buffer("zero_points", torch.zeros(6, dtype=torch.int64))
        self.register_buffer("weight", torch.round(weight / self.scales[:, None]).to(torch.int8))

    def forward(self, x):
        q = torch.ops.quantized_decomposed
        x = q.quantize_per_tensor(x, 0.02, -3, -128, 127, torch.int8)
        x = q.dequantize_per_tensor(x, 0.02, -3, -128, 127, torch.int8)
        w = q.dequantize_per_channel(self.weight, self.scales, self.zero_points, 0, -128, 127,
                                     torch.int8)
        y = torch.nn.functional.linear(x, w)
        y = q.quantize_per_tensor(y, 0.05, 4, -128, 127, torch.int8)
        return q.dequantize_per_tensor(y, 0.05, 4, -128, 127, torch.int8)


@pytest.mark.parametrize("opset", [13, 18, 21])
def test_pt2e_quantize_dequantize_calls(opset):
    model = _PT2EStyle()
    x = torch.randn(5, 10)
    program = onnxport.export(model, (x,), opset_version=opset)
    assert op_types(program).count("QuantizeLinear") == 2
    # Both sides round the same float sums to the same grid: equal up to one step at a tie.
    actual, expected = program(x)[0], model(x)
    assert (actual - expected).abs().max() <= 0.05 * 1.001
    assert ((actual - expected).abs() < 1e-6).float().mean() > 0.9


def test_reduce_range_dynamic_quantization_is_a_clear_error():
    def f(x):
        q = torch.ops.quantized_decomposed
        scale, zero_point = q.choose_qparams.tensor(x, 0, 127, 1e-7, torch.uint8)
        return q.quantize_per_tensor.tensor(x, scale, zero_point, 0, 127, torch.uint8)

    with pytest.raises(onnxport.errors.OnnxExporterError, match="DynamicQuantizeLinear"):
        onnxport.export(f, (torch.randn(3, 4),))


def test_the_users_quantized_model_is_not_changed():
    model = _quantize_dynamic(torch.nn.Sequential(torch.nn.Linear(4, 4)))
    before = type(model[0])
    onnxport.export(model, (torch.randn(2, 4),))
    assert type(model[0]) is before


def _dequantized_float_lstm(quantized, like: torch.nn.LSTM) -> torch.nn.LSTM:
    """A float LSTM holding the quantized LSTM's weights, dequantized."""
    import copy

    float_lstm = copy.deepcopy(like)
    parameters = quantized._weight_bias()
    with torch.no_grad():
        for name, weight in {**parameters["weight"], **parameters["bias"]}.items():
            getattr(float_lstm, name).copy_(weight.dequantize() if weight.is_quantized
                                            else weight)
    return float_lstm


@pytest.mark.parametrize("bidirectional", [False, True])
def test_dynamic_lstm_with_dynamic_batch_and_sequence(bidirectional):
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(8, 16, num_layers=2, batch_first=True, bidirectional=bidirectional)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = quantization.quantize_dynamic(torch.nn.Sequential(lstm), {torch.nn.LSTM},
                                              dtype=torch.qint8).eval()
    reference = _dequantized_float_lstm(model[0], lstm).eval()
    dims = {0: torch.export.Dim("batch", min=1, max=64), 1: torch.export.Dim("seq", min=2,
                                                                             max=100)}
    program = onnxport.export(model, (torch.randn(3, 7, 8),), dynamic_shapes=(dims,))
    types = op_types(program)
    assert types.count("LSTM") == 2 and types.count("DequantizeLinear") == 4 * (
        2 if bidirectional else 1), types
    for x in (torch.randn(3, 7, 8), torch.randn(5, 11, 8)):
        actual = program(x)
        with torch.no_grad():
            expected_float = reference(x)
            output, (h, c) = model(x)
        # The graph is torch's LSTM on the int8 weights, dequantized: float rounding only.
        for a, e in zip(actual, [expected_float[0], *expected_float[1]]):
            torch.testing.assert_close(a, e, rtol=1e-3, atol=1e-4)
        # Eager's kernel also rounds each step's input to a dynamic uint8 grid (ONNX LSTM has
        # no integer form): measured 1-3e-3 on the outputs and up to 1.2e-2 on the cell state
        # (unbounded), the size of eager's own distance from the float LSTM.
        for a, e in zip(actual, [output, h, c]):
            torch.testing.assert_close(a, e, rtol=0, atol=3e-2)


def test_the_torchscript_path_exports_the_same_reference_form():
    static = _quantize_static("x86")
    x = torch.randn(2, 3, 12, 12)
    program = onnxport.export(static, (x,), dynamo=False)
    assert op_types(program).count("QuantizeLinear") == 5
    assert (program(x)[0] - static(x)).abs().max() <= 2 * static.fc.scale * 1.001
    dynamic = _quantize_dynamic(torch.nn.Sequential(torch.nn.Linear(16, 8))).eval()
    x = torch.randn(4, 16)
    program = onnxport.export(dynamic, (x,), dynamo=False)
    assert op_types(program)[:2] == ["DynamicQuantizeLinear", "MatMulInteger"]
    step = (_activation_steps(x, 127) + _activation_steps(x, 255)) / 2  # as above
    bound = dynamic[0].weight().dequantize().abs().sum(1) * step + 1e-5
    assert ((program(x)[0] - dynamic(x)).abs() <= bound).all()


class _ActivationNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.quant, self.dequant = quantization.QuantStub(), quantization.DeQuantStub()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.activations = torch.nn.Sequential(torch.nn.Hardswish(), torch.nn.LeakyReLU(0.1),
                                               torch.nn.ELU(), torch.nn.ReLU6())

    def forward(self, x):
        return self.dequant(self.activations(self.conv(self.quant(x))))


def test_quantized_activations():
    # convert() makes these nnq.Hardswish/LeakyReLU/ELU/ReLU6: the float op, each (but ReLU6,
    # which keeps its input's grid) rounded to its own output grid.
    torch.manual_seed(0)
    model = _ActivationNet().eval()
    model.qconfig = quantization.get_default_qconfig("x86")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prepared = quantization.prepare(model)
        for _ in range(4):
            prepared(torch.randn(2, 3, 8, 8))
        model = quantization.convert(prepared)
    x = torch.randn(2, 3, 8, 8)
    program = onnxport.export(model, (x,))
    types = op_types(program)
    assert {"HardSwish", "LeakyRelu", "Elu"} <= set(types) and types.count("QuantizeLinear") == 5
    # As for the conv net: a rounding tie may land one step away, twice on the way.
    step = float(model.activations[2].scale)
    assert (program(x)[0] - model(x)).abs().max() <= 2 * step * 1.001


# Fake quantization: values spread over more than the range, so that clamping and the mask
# are exercised; halves (2.5 / scale) check round-half-to-even.
_SCALES = torch.tensor([0.1, 0.2, 0.05])
_ZERO_POINTS = torch.tensor([0, 3, -2], dtype=torch.int32)
FAKE_QUANTIZE = {
    "per tensor": lambda x: torch.fake_quantize_per_tensor_affine(x, 0.1, 3, 0, 255),
    "per tensor, signed, narrow": lambda x: torch.fake_quantize_per_tensor_affine(
        x, 0.25, -1, -8, 7),
    "per tensor qparams as tensors": lambda x: torch.fake_quantize_per_tensor_affine(
        x, torch.tensor(0.1), torch.tensor(3, dtype=torch.int32), 0, 255),
    "per channel": lambda x: torch.fake_quantize_per_channel_affine(
        x, _SCALES, _ZERO_POINTS, 1, -128, 127),
    "per tensor cachemask": lambda x: torch.ops.aten.fake_quantize_per_tensor_affine_cachemask(
        x, 0.1, 3, 0, 255),
    "per channel cachemask": lambda x: torch.ops.aten.fake_quantize_per_channel_affine_cachemask(
        x, _SCALES, _ZERO_POINTS, 1, -128, 127),
    # LSQ's learnable observers: a float zero point, rounded half to even and clamped first.
    "learnable per tensor": lambda x: torch._fake_quantize_learnable_per_tensor_affine(
        x, torch.tensor([0.1]), torch.tensor([2.5]), 0, 255),
    "learnable per channel": lambda x: torch._fake_quantize_learnable_per_channel_affine(
        x, _SCALES, torch.tensor([0.5, 3.5, -300.0]), 1, -128, 127),
}


@pytest.mark.parametrize("dynamo", [None, False, True], ids=["default", "torchscript", "dynamo"])
@pytest.mark.parametrize("function", FAKE_QUANTIZE.values(), ids=FAKE_QUANTIZE.keys())
def test_fake_quantize(function, dynamo):
    x = torch.randn(4, 3, 5) * 10
    x[0, 0, :3] = torch.tensor([0.25, 0.35, -0.05])  # halves of a step of 0.1
    check(function, x, dynamo=dynamo)


@pytest.mark.parametrize("dynamo", [None, False, True], ids=["default", "torchscript", "dynamo"])
@pytest.mark.parametrize("function", FAKE_QUANTIZE.values(), ids=FAKE_QUANTIZE.keys())
def test_fake_quantize_with_a_dynamic_batch_and_length(function, dynamo):
    # torch has no fake kernels for the family: every path failed at symbolic sizes
    # (capture/quirks/fake_quantize_shapes.py).
    x = torch.randn(4, 3, 5) * 10
    check(function, x, dynamo=dynamo, input_names=["x"],
          dynamic_axes={"x": {0: "batch", 2: "length"}},
          run_with=[(torch.randn(2, 3, 7) * 10,)])


def _round_trip(x):
    q = torch.quantize_per_tensor(x, 0.05, 10, torch.quint8)
    s = torch.quantize_per_tensor(x * 2, 0.1, -3, torch.qint8)
    return q.dequantize(), s.dequantize() + 1


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_torch_quantize_per_tensor_round_trip(dynamo):
    # torch.quantize_per_tensor then dequantize: QuantizeLinear and
    # DequantizeLinear with the call's scale and zero point (an unsupported op before; on
    # the TorchScript path the fake run could not make a quantized tensor). The default path:
    # torch.export before 2.14 cannot run it on meta tensors ("quantized nyi"), and traces.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", onnxport.errors.FallbackWarning)
        program = check(_round_trip, torch.randn(3, 8) * 4, dynamo=dynamo)
    assert {"QuantizeLinear", "DequantizeLinear"} <= set(op_types(program))


def _integers_and_values(x):
    q = torch.quantize_per_tensor(x, 0.1, 10, torch.quint8)
    return q.int_repr(), q.dequantize()


def _sigmoid_of_quantized(x):
    return torch.sigmoid(torch.quantize_per_tensor(x, 0.1, 10, torch.quint8)).dequantize()


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_integers_of_a_quantized_tensor_the_model_makes(dynamo):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", onnxport.errors.FallbackWarning)
        check(_integers_and_values, torch.randn(3, 8) * 4, dynamo=dynamo)


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_other_ops_of_a_quantized_tensor_the_model_makes_are_refused(dynamo):
    # The sigmoid ran on the integers as on floats, and dequantize took its result for a
    # dequantized float: silently wrong by up to 0.6.
    with warnings.catch_warnings(), pytest.raises(onnxport.errors.TranslationError,
                                                  match="aten::sigmoid of a quantized tensor"):
        warnings.simplefilter("ignore", onnxport.errors.FallbackWarning)
        check(_sigmoid_of_quantized, torch.randn(3, 8), dynamo=dynamo)
