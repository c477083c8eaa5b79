"""The symbolic-function API torch.onnx users write against: ``g.op`` and its attribute
suffixes, the values' ``type()``/``node()``/``setType()``, ``symbolic_helper``, and the
``JitScalarType`` / ``OperatorExportTypes`` / ``TrainingMode`` enums (checked against
torch.onnx's own, which the tests, never the product, may call)."""

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


# -- g.op and the values ------------------------------------------------------------------------
def _graph(opset=18):
    import onnx_ir as ir

    from onnxport.translate.builder import GraphBuilder
    from onnxport.compat.symbolic_graph import SymbolicGraph

    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT),
                 shape=ir.Shape([2, ir.SymbolicDim("n")]))
    graph = ir.Graph([x], [], nodes=[], opset_imports={"": opset})
    return SymbolicGraph(GraphBuilder(graph, opset))


def test_values_answer_torchs_value_api(registrations):
    seen = {}

    def symbolic(g, input):
        t = input.type()
        seen.update(scalar=t.scalarType(), sizes=t.sizes(), dim=t.dim(), dtype=t.dtype(),
                    rank=symbolic_helper._get_tensor_rank(input),
                    dim1=symbolic_helper._get_tensor_dim_size(input, 1),
                    kind=input.node().kind(), complete=t.isCompleteTensor())
        out = g.op("Relu", input).setType(input.type())
        seen["out_kind"] = out.node().kind()
        seen["promoted"] = symbolic_helper._type_promote_from_values(input, out)
        return out

    registrations("aten::relu", symbolic)
    model = torch.nn.ReLU()
    x = torch.randn(2, 3)
    _check(onnxport.export(model, (x,)), model, x)
    assert seen == {"scalar": "Float", "sizes": [2, 3], "dim": 2, "dtype": torch.float32,
                    "rank": 2, "dim1": 3, "kind": "prim::Param", "complete": True,
                    "out_kind": "onnx::Relu", "promoted": JitScalarType.FLOAT}


def test_dynamic_sizes_are_none_in_varying_sizes_and_refused_by_sizes():
    g = _graph()
    from onnxport.compat.symbolic_graph import SymbolicValue

    x = SymbolicValue(g.builder.graph.inputs[0])
    assert x.type().varyingSizes() == [2, None]
    assert symbolic_helper._get_tensor_sizes(x, allow_nonstatic=False) is None
    with pytest.raises(TranslationError, match="varyingSizes"):
        x.type().sizes()


def test_g_op_attribute_suffixes_domains_and_outputs():
    g = _graph()
    from onnxport.compat.symbolic_graph import SymbolicValue

    x = SymbolicValue(g.builder.graph.inputs[0])
    first, second = g.op("Split", x, axis_i=0, num_outputs_i=2, outputs=2)
    node = first.node()
    assert node.kind() == "onnx::Split" and len(node.outputs()) == 2 and second.node() is not None
    custom = g.op("my_domain::MyOp", x, ratio_f=1, sizes_is=None, names_s="a", ints_i=[1, 2],
                  floats_f=[1, 2], value_t=torch.ones(2))
    attributes = custom.ir_value.producer().attributes
    assert custom.node().kind() == "my_domain::MyOp"
    assert attributes["ratio"].value == 1.0 and isinstance(attributes["ratio"].value, float)
    assert list(attributes["ints"].value) == [1, 2] and list(attributes["floats"].value) == [1.0, 2.0]
    assert attributes["names"].value == "a" and attributes["value"].value.numpy().tolist() == [1, 1]
    assert g.builder.custom_opsets == {"my_domain": 1}
    constant = g.op("Constant", value_t=torch.tensor([1, 2, 3], dtype=torch.int32))
    assert constant.type().scalarType() == "Int" and constant.type().sizes() == [3]
    assert constant.node()["value"].tolist() == [1, 2, 3]


def test_g_at_fails_clearly():
    with pytest.raises(TranslationError, match="ATen fallback"):
        _graph().at("relu")


# -- enums ----------------------------------------------------------------------------------------
def test_jit_scalar_type_matches_torch_onnx():
    reference = torch.onnx.JitScalarType
    assert [m.name for m in JitScalarType] == [m.name for m in reference]
    for ours in JitScalarType:
        theirs = reference[ours.name]
        assert int(ours) == int(theirs)
        assert ours.scalar_name() == theirs.scalar_name()
        assert ours.onnx_compatible() == theirs.onnx_compatible()
        assert int(ours.onnx_type()) == int(theirs.onnx_type())
        if ours is not JitScalarType.UNDEFINED:
            assert ours.torch_name() == theirs.torch_name()
            assert ours.dtype() == theirs.dtype()
            assert JitScalarType.from_dtype(ours.dtype()) is ours
        assert JitScalarType._from_name(ours.scalar_name()) is ours


def test_jit_scalar_type_from_value():
    assert JitScalarType.from_value(torch.ones(1, dtype=torch.int64)) is JitScalarType.INT64
    assert JitScalarType.from_value(None, JitScalarType.FLOAT) is JitScalarType.FLOAT
    with pytest.raises(OnnxExporterError, match="default"):
        JitScalarType.from_value(None)
    with pytest.raises(OnnxExporterError, match="Unknown dtype"):
        JitScalarType.from_dtype("float32")


def test_export_enums_match_torch_onnx():
    for ours, theirs in ((onnxport.OperatorExportTypes, torch.onnx.OperatorExportTypes),
                         (onnxport.TrainingMode, torch.onnx.TrainingMode)):
        for member in ours:
            assert int(member) == int(getattr(theirs, member.name))
            assert str(member) == str(getattr(theirs, member.name))


def test_export_accepts_the_default_enum_values():
    model = torch.nn.Linear(3, 2)
    x = torch.randn(2, 3)
    program = onnxport.export(model, (x,), training=onnxport.TrainingMode.EVAL,
                              operator_export_type=onnxport.OperatorExportTypes.ONNX)
    _check(program, model, x)
    # torch.onnx's own enum members are taken too; anything else is refused, not ignored.
    program = onnxport.export(model, (x,), training=torch.onnx.TrainingMode.EVAL,
                              operator_export_type=torch.onnx.OperatorExportTypes.ONNX)
    _check(program, model, x)
    with pytest.raises(onnxport.InvalidExportOptionsError, match="training"):
        onnxport.export(model, (x,), training="train")
    with pytest.raises(onnxport.InvalidExportOptionsError, match="operator_export_type"):
        onnxport.export(model, (x,), operator_export_type=1)


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
