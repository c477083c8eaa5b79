"""``onnxport.symbolic_helper``, which torch.onnx users' symbolic functions import:
``parse_args`` and its descriptors, the constant readers, and the opset-aware helpers."""

import pytest
import torch

import onnxport
from onnxport import JitScalarType, symbolic_helper
from onnxport.errors import OnnxExporterError, TranslationError


@torch.library.custom_op("onnxport_test::pick", mutates_args=())
def pick(x: torch.Tensor, dims: list[int], keepdim: bool, mode: str, weights: list[float],
         unused: float = 0.0) -> torch.Tensor:
    reduced = x.amax(dims, keepdim) if mode == "max" else x.sum(dims, keepdim)
    return reduced * weights[0] + weights[1]


@pick.register_fake
def _(x, dims, keepdim, mode, weights, unused=0.0):
    return x.amax(dims, keepdim)


class Pick(torch.nn.Module):
    def __init__(self, dims, keepdim, mode, weights):
        super().__init__()
        self.arguments = (dims, keepdim, mode, weights)

    def forward(self, x):
        return torch.ops.onnxport_test.pick(x, *self.arguments)


def _check(program, model, *inputs):
    (actual,) = program(*inputs)
    torch.testing.assert_close(actual, model(*inputs), rtol=1e-3, atol=1e-4)


# -- parse_args ---------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["max", "sum"])
def test_parse_args_converts_every_kind(registrations, mode):
    seen = {}

    @symbolic_helper.parse_args("v", "is", "b", "s", "fs", "none")
    def symbolic(g, x, dims, keepdim, mode, weights, unused):
        seen.update(dims=dims, keepdim=keepdim, mode=mode, weights=weights)
        op = "ReduceMax" if mode == "max" else "ReduceSum"
        if g.opset >= 18 or op == "ReduceSum":
            reduced = g.op(op, x, g.op("Constant", value_t=torch.tensor(dims)), keepdims_i=keepdim)
        else:
            reduced = g.op(op, x, axes_i=dims, keepdims_i=keepdim)
        return g.op("Add", g.op("Mul", reduced, torch.tensor(weights[0])), torch.tensor(weights[1]))

    registrations("onnxport_test::pick", symbolic)
    model = Pick([1], True, mode, [0.5, 2.0])
    x = torch.randn(3, 4, 5)
    _check(onnxport.export(model, (x,)), model, x)
    assert seen == {"dims": [1], "keepdim": True, "mode": mode, "weights": [0.5, 2.0]}
    assert all(type(v) is int for v in seen["dims"]) and type(seen["keepdim"]) is bool


def test_parse_args_reads_constant_values_and_refuses_computed_ones():
    from onnxport.compat.symbolic_graph import SymbolicValue

    graph = _graph()
    constant = graph.op("Constant", value_t=torch.tensor([2, 3]))
    assert symbolic_helper._parse_arg(constant, "is") == [2, 3]
    assert symbolic_helper._maybe_get_const(graph.op("Constant", value_t=torch.tensor(1.5)), "f") == 1.5
    computed = graph.op("Shape", SymbolicValue(graph.builder.graph.inputs[0]))
    assert symbolic_helper._maybe_get_const(computed, "is") is computed
    with pytest.raises(TranslationError, match="must be a constant"):
        symbolic_helper._get_const(computed, "i", "dim")
    assert symbolic_helper._get_const(4, "f", "alpha") == 4.0
    assert symbolic_helper._is_none(None) and not symbolic_helper._is_none(computed)
    assert symbolic_helper._is_value(computed) and not symbolic_helper._is_value(3)
    assert symbolic_helper._scalar(torch.tensor([2.5])) == 2.5


def test_parse_args_refuses_an_unknown_descriptor():
    with pytest.raises(OnnxExporterError, match="unknown descriptor 'x'"):
        symbolic_helper.parse_args("v", "x")


def _graph(opset=18):
    import onnx_ir as ir

    from onnxport.translate.builder import GraphBuilder
    from onnxport.compat.symbolic_graph import SymbolicGraph

    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT),
                 shape=ir.Shape([2, ir.SymbolicDim("n")]))
    graph = ir.Graph([x], [], nodes=[], opset_imports={"": opset})
    return SymbolicGraph(GraphBuilder(graph, opset))


@torch.library.custom_op("onnxport_test::slice_scale", mutates_args=())
def slice_scale(x: torch.Tensor) -> torch.Tensor:
    return x[:, 1:3].unsqueeze(0).squeeze(0).reshape(-1) * x.shape[0]


@slice_scale.register_fake
def _(x):
    return x.new_empty(x.shape[0] * 2)


@pytest.mark.parametrize("opset", [13, 18])
def test_opset_aware_helpers(registrations, opset):
    def symbolic(g, x):
        h = symbolic_helper
        sliced = h._slice_helper(g, x, axes=[1], starts=[1], ends=[3])
        same = h._squeeze_helper(g, h._unsqueeze_helper(g, sliced, [0]), [0])
        flat = h._reshape_helper(g, same, [-1])
        size = g.op("Cast", h._size_helper(g, x, 0), to_i=JitScalarType.FLOAT.onnx_type())
        assert h._is_fp(flat) and not h._is_bool(flat)
        assert h._if_scalar_type_as(2, x).dtype == torch.float32
        return g.op("Mul", flat, size)

    registrations("onnxport_test::slice_scale", symbolic)

    class Model(torch.nn.Module):
        def forward(self, x):
            return torch.ops.onnxport_test.slice_scale(x)

    model = Model()
    x = torch.randn(3, 5)
    _check(onnxport.export(model, (x,), opset_version=opset), model, x)


def test_helpers_use_attributes_before_opset_13():
    # export starts at opset 13, but symbolics registered from 7 on may be given such a g.
    from onnxport.compat.symbolic_graph import SymbolicValue

    g = _graph(opset=11)
    x = SymbolicValue(g.builder.graph.inputs[0])
    unsqueezed = symbolic_helper._unsqueeze_helper(g, x, [0])
    assert list(unsqueezed.node()["axes"]) == [0] and len(unsqueezed.node().inputs()) == 1
    reshaped = symbolic_helper._reshape_helper(g, x, [-1])
    assert "allowzero" not in reshaped.ir_value.producer().attributes
