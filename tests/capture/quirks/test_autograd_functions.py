"""torch.autograd.Function on both paths: its static ``symbolic`` is what the graph gets, a
``prim::PythonOp`` registration sees every Function, one without either is inlined, and
operator_export_type=ONNX_FALLTHROUGH / ONNX_ATEN_FALLBACK keeps it as one node."""

import numpy as np
import onnxruntime as ort
import pytest
import torch

import onnxport
from onnxport.errors import TranslationError


class ReluThroughNeg(torch.autograd.Function):
    """A symbolic that cannot come from the forward's ops: Relu, Neg, Neg."""

    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return input.clamp(min=0)

    @staticmethod
    def backward(ctx, grad):
        (input,) = ctx.saved_tensors
        return grad * (input > 0)

    @staticmethod
    def symbolic(g, input):
        return g.op("Neg", g.op("Neg", g.op("Relu", input)))


class ScaleAndSplit(torch.autograd.Function):
    """Two outputs and a non-tensor argument."""

    @staticmethod
    def forward(ctx, input, scale: float):
        return input * scale, input - scale

    @staticmethod
    def symbolic(g, input, scale):
        factor = g.op("Constant", value_t=torch.tensor(scale, dtype=torch.float))
        return g.op("Mul", input, factor), g.op("Sub", input, factor)


class LogExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return input.exp().log().log()


class Model(torch.nn.Module):
    def __init__(self, function, *constants):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.function = function
        self.constants = constants

    def forward(self, x):
        return self.function.apply(self.linear(x), *self.constants)


def _run(program, *inputs):
    session = ort.InferenceSession(program.model_proto.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    feeds = {i.name: t.numpy() for i, t in zip(session.get_inputs(), inputs)}
    return session.run(None, feeds)


def _op_types(program):
    return [node.op_type for node in program.model.graph]


@pytest.mark.parametrize("dynamo", [True, False])
def test_static_symbolic_is_used(dynamo):
    model = Model(ReluThroughNeg)
    x = torch.randn(3, 4)
    program = onnxport.export(model, (x,), dynamo=dynamo)
    assert _op_types(program) == ["Gemm", "Relu", "Neg", "Neg"]
    (actual,) = _run(program, x)
    np.testing.assert_allclose(actual, model(x).detach().numpy(), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("dynamo", [True, False])
def test_symbolic_with_two_outputs_and_a_constant_argument(dynamo):
    model = Model(ScaleAndSplit, 1.5)
    x = torch.randn(3, 4)
    program = onnxport.export(model, (x,), dynamo=dynamo)
    assert {"Mul", "Sub"} <= set(_op_types(program))
    for actual, expected in zip(_run(program, x), model(x)):
        np.testing.assert_allclose(actual, expected.detach().numpy(), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("dynamo", [True, False])
def test_function_without_symbolic_is_inlined(dynamo):
    model = Model(LogExp)
    x = torch.rand(2, 4) + 2  # log(log(exp(y))) needs y > 1... for the linear's output too
    with torch.no_grad():
        model.linear.weight.copy_(torch.eye(4))
        model.linear.bias.fill_(1.0)
    program = onnxport.export(model, (x,), dynamo=dynamo)
    assert [t for t in _op_types(program) if t in ("Exp", "Log")] == ["Exp", "Log", "Log"]
    (actual,) = _run(program, x)
    np.testing.assert_allclose(actual, model(x).detach().numpy(), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("dynamo", [True, False])
def test_python_op_registration_sees_every_function(registrations, dynamo):
    seen = []

    def symbolic_python_op(g, *args, **kwargs):
        seen.append(kwargs["name"])
        return g.op("Sigmoid", args[0])

    registrations("prim::PythonOp", symbolic_python_op, 9)
    model = Model(LogExp)
    x = torch.randn(2, 4)
    program = onnxport.export(model, (x,), dynamo=dynamo)
    assert seen == ["LogExp"]
    assert _op_types(program) == ["Gemm", "Sigmoid"]
    (actual,) = _run(program, x)
    np.testing.assert_allclose(actual, torch.sigmoid(model.linear(x)).detach().numpy(),
                               rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("export_type", ["ONNX_FALLTHROUGH", "ONNX_ATEN_FALLBACK"])
@pytest.mark.parametrize("dynamo", [True, False])
def test_fallthrough_keeps_the_function_as_one_node(dynamo, export_type):
    model = Model(LogExp)
    x = torch.randn(2, 4)
    program = onnxport.export(model, (x,), dynamo=dynamo,
                              operator_export_type=getattr(onnxport.OperatorExportTypes,
                                                           export_type))
    # ONNX Runtime has no prim::PythonOp kernel: the graph is what is checked.
    nodes = list(program.model.graph)
    assert [(n.domain, n.op_type) for n in nodes] == [("", "Gemm"), ("prim", "PythonOp")]
    assert nodes[1].attributes["name"].value == "LogExp"
    assert program.model.opset_imports["prim"] == 1


def test_function_is_only_wrapped_during_an_export():
    model = Model(ReluThroughNeg)
    x = torch.randn(2, 4)
    original = torch.autograd.Function.__dict__["apply"]
    onnxport.export(model, (x,))
    assert torch.autograd.Function.__dict__["apply"] is original
    y = ReluThroughNeg.apply(x.requires_grad_())
    y.sum().backward()  # still an autograd Function after the export
    torch.testing.assert_close(x.grad, (x > 0).float())


class ReturnsWrongCount(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        return input + 1, input - 1

    @staticmethod
    def symbolic(g, input):
        return g.op("Relu", input)


class ReturnsNotAValue(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        return input + 1

    @staticmethod
    def symbolic(g, input):
        return 3


class Raises(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        return input + 1

    @staticmethod
    def symbolic(g, input):
        raise KeyError("no such attribute")


@pytest.mark.parametrize("function, message", [
    (ReturnsWrongCount, r"ReturnsWrongCount.*returned 1 value\(s\), but the op has 2 output"),
    (ReturnsNotAValue, r"ReturnsNotAValue.*returned int"),
    (Raises, r"Raises.*raised KeyError: 'no such attribute'"),
])
def test_bad_symbolic_results_are_named(function, message):
    with pytest.raises(TranslationError, match=message):
        onnxport.export(Model(function), (torch.randn(2, 4),))


@pytest.mark.parametrize("dynamo", [True, False])
def test_symbolic_with_a_dynamic_batch(dynamo):
    model = Model(ReluThroughNeg)
    x = torch.randn(3, 4)
    program = onnxport.export(model, (x,), dynamo=dynamo, input_names=["x"],
                              dynamic_axes={"x": {0: "batch"}})
    assert "Neg" in _op_types(program)
    for rows in (3, 7):
        other = torch.randn(rows, 4)
        (actual,) = _run(program, other)
        np.testing.assert_allclose(actual, model(other).detach().numpy(), rtol=1e-3, atol=1e-4)


class CallsTorchOnnx(torch.autograd.Function):
    """Like transformers' XSoftmax: a symbolic made of torch.onnx's own symbolic functions."""

    @staticmethod
    def forward(ctx, input):
        return input * 2

    @staticmethod
    def symbolic(g, input):
        from torch.onnx import symbolic_opset9

        return symbolic_opset9.mul(g, input, input)


@pytest.mark.parametrize("dynamo", [True, False])
def test_symbolic_calling_torch_onnx_is_replaced_by_the_forward(dynamo):
    model = Model(CallsTorchOnnx)
    x = torch.randn(2, 4)
    with pytest.warns(UserWarning, match="CallsTorchOnnx.symbolic calls torch.onnx"):
        program = onnxport.export(model, (x,), dynamo=dynamo)
    (actual,) = _run(program, x)
    np.testing.assert_allclose(actual, model(x).detach().numpy(), rtol=1e-3, atol=1e-4)


class MatMulReadingCtx(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        assert ctx.needs_input_grad == (False, True)  # forwards may read it
        ctx.save_for_backward(x, w)
        return x @ w


class ScaleWithSetupContext(torch.autograd.Function):
    @staticmethod
    def forward(x, k):
        return x * k

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass


class Inlined(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        return ScaleWithSetupContext.apply(MatMulReadingCtx.apply(x, self.w), 3.0)


@pytest.mark.parametrize("dynamo", [True, False])
def test_functions_without_symbolic_inline_both_styles(dynamo):
    # The tracer records a Function as one prim::PythonOp, which torch's TorchScript-to-FX
    # converter crashed on (a segmentation fault): its forward is traced instead.
    model, x = Inlined(), torch.randn(2, 4)
    program = onnxport.export(model, (x,), dynamo=dynamo)
    assert _op_types(program) == ["MatMul", "Mul"]
    (actual,) = _run(program, x)
    np.testing.assert_allclose(actual, model(x).detach().numpy(), rtol=1e-3, atol=1e-4)
