"""The ``g`` and the values a torch.onnx symbolic function sees (compat/symbolic_graph.py):
``g.op`` and its attribute suffixes, the values' ``type()``/``node()``/``setType()``."""

import pytest
import torch

import onnxport
from onnxport import JitScalarType, symbolic_helper
from onnxport.errors import TranslationError


def _check(program, model, *inputs):
    (actual,) = program(*inputs)
    torch.testing.assert_close(actual, model(*inputs), rtol=1e-3, atol=1e-4)


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
