"""register_custom_op_symbolic: the documents' examples (only the import changed), overrides of
built-in translations, opset ranges, and the errors for bad registrations.

Mostly on the dynamo path; the TorchScript path (dynamo=False) hands translate/ the same ATen
graph, and the wrong-relu test checks that registrations apply there too.
"""

import pytest
import torch

import onnxport
from onnxport import symbolic_helper
from onnxport.errors import OnnxExporterError, TranslationError


# A custom op that torch.export keeps as one call (the documents' C++ op, defined in Python).
@torch.library.custom_op("custom_ops::foo_forward", mutates_args=())
def foo_forward(input1: torch.Tensor, input2: torch.Tensor, attr1: float, attr2: int) -> torch.Tensor:
    return input1 * attr1 + input2 * attr2


@foo_forward.register_fake
def _(input1, input2, attr1, attr2):
    return torch.empty_like(input1)


@torch.library.custom_op("onnxport_test::scale_shift", mutates_args=())
def scale_shift(x: torch.Tensor, scale: float = 2.0, shift: float = 0.5) -> torch.Tensor:
    return x * scale + shift


@scale_shift.register_fake
def _(x, scale=2.0, shift=0.5):
    return torch.empty_like(x)


class FooModel(torch.nn.Module):
    def __init__(self, attr1, attr2):
        super().__init__()
        self.attr1 = attr1
        self.attr2 = attr2

    def forward(self, input1, input2):
        return torch.ops.custom_ops.foo_forward(input1, input2, self.attr1, self.attr2)


def _check(program, model, *inputs):
    expected = model(*inputs)
    (actual,) = program(*inputs)
    torch.testing.assert_close(actual, expected, rtol=1e-3, atol=1e-4)


def _op_types(program):
    return [(node.domain, node.op_type) for node in program.model.graph]


# -- the documents' examples ------------------------------------------------------------------
def test_doc_relu_with_clip_symbolic(registrations):
    # The documents' symbolic for relu (written there as MyRelu.symbolic), registered for aten::relu.
    def symbolic(g, input):
        return g.op("Clip", input, g.op("Constant", value_t=torch.tensor(0, dtype=torch.float)))

    registrations("aten::relu", symbolic, 9)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU())
    x = torch.randn(5, 3)
    program = onnxport.export(model, (x,), optimize=False)
    assert ("", "Clip") in _op_types(program) and ("", "Relu") not in _op_types(program)
    _check(program, model, x)


def test_doc_elu_symbolic_with_fewer_parameters_than_the_schema(registrations):
    # The documents' elu(g, input, alpha, inplace=False); today's aten::elu has 4 arguments
    # (alpha, scale, input_scale): the trailing ones at their default are not passed.
    def elu(g, input, alpha, inplace=False):
        return g.op("Elu", input, alpha_f=alpha)

    registrations("aten::elu", elu, 9)
    model = torch.nn.ELU(alpha=0.7)
    x = torch.randn(4, 5)
    program = onnxport.export(model, (x,))
    (node,) = list(program.model.graph)
    assert node.op_type == "Elu" and node.attributes["alpha"].value == pytest.approx(0.7)
    _check(program, model, x)


def test_doc_elu_with_scalar_helper(registrations):
    # The 1.x page's version: alpha_f=_scalar(alpha).
    def elu(g, input, alpha, inplace=False):
        return g.op("Elu", input, alpha_f=symbolic_helper._scalar(alpha))

    registrations("aten::elu", elu, 9)
    model = torch.nn.ELU(alpha=1.5)
    x = torch.randn(3, 2)
    _check(onnxport.export(model, (x,)), model, x)


def test_doc_custom_op_foo_forward(registrations):
    @symbolic_helper.parse_args("v", "v", "f", "i")
    def symbolic_foo_forward(g, input1, input2, attr1, attr2):
        return g.op("custom_domain::Foo", input1, input2, attr1_f=attr1, attr2_i=attr2)

    registrations("custom_ops::foo_forward", symbolic_foo_forward, 9)
    x = torch.randn(2, 3)
    program = onnxport.export(FooModel(2.0, 3), (x, x), custom_opsets={"custom_domain": 2})
    (node,) = list(program.model.graph)
    # ONNX Runtime has no custom_domain::Foo kernel: the graph is what can be checked.
    assert (node.domain, node.op_type) == ("custom_domain", "Foo")
    assert node.attributes["attr1"].value == 2.0 and node.attributes["attr2"].value == 3
    assert program.model.graph.opset_imports["custom_domain"] == 2
    # Without custom_opsets the domain is imported at version 1 (as torch.onnx does).
    program = onnxport.export(FooModel(2.0, 3), (x, x))
    assert program.model.graph.opset_imports["custom_domain"] == 1


def test_custom_op_symbolic_made_of_onnx_ops_runs(registrations):
    # The same registration path with a symbolic ONNX Runtime can run: checked against eager.
    @symbolic_helper.parse_args("v", "v", "f", "i")
    def symbolic_foo_forward(g, input1, input2, attr1, attr2):
        return g.op("Add", g.op("Mul", input1, torch.tensor(attr1)),
                    g.op("Mul", input2, torch.tensor(float(attr2))))

    registrations("custom_ops::foo_forward", symbolic_foo_forward, 9)
    model = FooModel(1.5, 4)
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    _check(onnxport.export(model, (a, b)), model, a, b)


def test_doc_onnxscript_selu(registrations):
    onnxscript = pytest.importorskip("onnxscript")
    from onnxscript.onnx_opset import opset15 as op

    custom_opset = onnxscript.values.Opset(domain="onnx-script", version=1)

    @onnxscript.script(custom_opset)
    def Selu(X):  # noqa: N802, N803 (the document's names)
        alpha = 1.67326
        gamma = 1.0507
        alphaX = op.CastLike(alpha, X)  # noqa: N806
        gammaX = op.CastLike(gamma, X)  # noqa: N806
        neg = gammaX * (alphaX * op.Exp(X) - alphaX)
        pos = gammaX * X
        zero = op.CastLike(0, X)
        return op.Where(X <= zero, neg, pos)

    def custom_selu(g, X):  # noqa: N803
        return g.onnxscript_op(Selu, X).setType(X.type())

    registrations("aten::selu", custom_selu, 15)
    model = torch.nn.SELU()
    x = torch.randn(1, 2, 3, 4)
    program = onnxport.export(model, (x,), opset_version=15, custom_opsets={"onnx-script": 2})
    assert ("onnx-script", "Selu") in _op_types(program)
    assert program.model.graph.opset_imports["onnx-script"] == 2
    _check(program, model, x)


# -- overriding and opset ranges ---------------------------------------------------------------
@pytest.mark.parametrize("dynamo", [True, False])
def test_wrong_relu_symbolic_changes_the_graph(registrations, dynamo):
    # A deliberately wrong symbolic must be what is exported: the registry is really consulted,
    # on both capture paths.
    model = torch.nn.ReLU()
    x = torch.randn(4, 4)
    registrations("aten::relu", lambda g, input: g.op("Neg", input), 9)
    program = onnxport.export(model, (x,), dynamo=dynamo)
    assert _op_types(program) == [("", "Neg")]
    torch.testing.assert_close(program(x)[0], -x)


def test_unregister_restores_the_builtin_translation():
    model = torch.nn.ReLU()
    x = torch.randn(4, 4)
    onnxport.register_custom_op_symbolic("aten::relu", lambda g, input: g.op("Neg", input), 9)
    try:
        assert _op_types(onnxport.export(model, (x,))) == [("", "Neg")]
    finally:
        onnxport.unregister_custom_op_symbolic("aten::relu", 9)
    program = onnxport.export(model, (x,))
    assert _op_types(program) == [("", "Relu")]
    _check(program, model, x)


def test_registration_serves_its_opset_and_later_ones(registrations):
    model = torch.nn.ReLU()
    x = torch.randn(3)
    registrations("aten::relu", lambda g, input: g.op("Neg", input), 15)
    registrations("aten::relu", lambda g, input: g.op("Abs", input), 18)
    assert _op_types(onnxport.export(model, (x,), opset_version=14)) == [("", "Relu")]
    assert _op_types(onnxport.export(model, (x,), opset_version=17)) == [("", "Neg")]
    assert _op_types(onnxport.export(model, (x,), opset_version=20)) == [("", "Abs")]


def test_symbolic_receives_defaults_the_call_left_out(registrations):
    seen = []

    def symbolic(g, x, scale, shift):
        seen.append((scale, shift))
        return g.op("Add", g.op("Mul", x, torch.tensor(scale)), torch.tensor(shift))

    registrations("onnxport_test::scale_shift", symbolic, 9)

    class Model(torch.nn.Module):
        def forward(self, x):
            return torch.ops.onnxport_test.scale_shift(x, shift=0.25)

    model = Model()
    x = torch.randn(2, 3)
    _check(onnxport.export(model, (x,)), model, x)
    assert seen == [(2.0, 0.25)]


def test_symbolic_missing_a_non_default_argument_is_refused(registrations):
    registrations("onnxport_test::scale_shift", lambda g, x: g.op("Identity", x), 9)

    class Model(torch.nn.Module):
        def forward(self, x):
            return torch.ops.onnxport_test.scale_shift(x, 3.0)

    with pytest.raises(TranslationError, match="add the missing parameters"):
        onnxport.export(Model(), (torch.randn(2),))


def test_symbolic_returning_none_is_a_clear_error(registrations):
    registrations("aten::relu", lambda g, input: None, 9)
    with pytest.raises(TranslationError, match="returned None"):
        onnxport.export(torch.nn.ReLU(), (torch.randn(2),))


@pytest.mark.parametrize("dynamo", [True, False])
@pytest.mark.parametrize("symbolic, message", [
    (lambda g, input: (g.op("Relu", input), g.op("Relu", input)),
     r"aten::relu \(<lambda>\) returned 2 value\(s\), but the op has 1 output"),
    (lambda g, input: input.type(), r"aten::relu \(<lambda>\) returned SymbolicType"),
    (lambda g, input: 1 / 0, r"aten::relu \(<lambda>\) raised ZeroDivisionError"),
], ids=["count", "not-a-value", "raises"])
def test_bad_symbolic_results_name_the_op_and_function(registrations, dynamo, symbolic, message):
    registrations("aten::relu", symbolic, 9)
    with pytest.raises(TranslationError, match=message):
        onnxport.export(torch.nn.ReLU(), (torch.randn(2),), dynamo=dynamo)


@pytest.mark.parametrize("name", ["elu", "aten:elu", "aten::", "aten::1elu", "::"])
def test_malformed_name_is_refused(name):
    with pytest.raises(OnnxExporterError, match="namespace::name"):
        onnxport.register_custom_op_symbolic(name, lambda g, x: x, 9)


def test_onnx_namespace_is_refused():
    with pytest.raises(OnnxExporterError, match="'onnx' namespace"):
        onnxport.register_custom_op_symbolic("onnx::Relu", lambda g, x: x, 9)


@pytest.mark.parametrize("opset", [6, 24, "9", True])
def test_opset_outside_the_supported_range_is_refused(opset):
    with pytest.raises(OnnxExporterError, match="from 7 to 23"):
        onnxport.register_custom_op_symbolic("aten::relu", lambda g, x: x, opset)


def test_leading_colons_mean_aten(registrations):
    registrations("::relu", lambda g, input: g.op("Neg", input), 9)
    assert _op_types(onnxport.export(torch.nn.ReLU(), (torch.randn(2),))) == [("", "Neg")]


def test_utils_module_has_the_registration_functions():
    assert onnxport.utils.register_custom_op_symbolic is onnxport.register_custom_op_symbolic
    assert onnxport.utils.unregister_custom_op_symbolic is onnxport.unregister_custom_op_symbolic


def test_bad_custom_opsets_are_refused():
    with pytest.raises(onnxport.InvalidExportOptionsError, match="custom_opsets"):
        onnxport.export(torch.nn.ReLU(), (torch.randn(2),), custom_opsets={"custom_domain": "2"})


def test_python_number_inputs_take_the_tensors_type(registrations):
    # torch.onnx's symbolic for add: `other` arrives as a Python int here (x + 2); an int64
    # constant beside a float tensor would make ONNX Runtime refuse the Add.
    def add(g, self, other, alpha=None):
        return g.op("Add", self, other)

    registrations("aten::add", add, 9)

    class Model(torch.nn.Module):
        def forward(self, x):
            return x + 2

    model = Model()
    x = torch.randn(3)
    _check(onnxport.export(model, (x,)), model, x)


def test_registered_symbolic_with_dynamic_shapes(registrations):
    @symbolic_helper.parse_args("v", "v", "f", "i")
    def symbolic_foo_forward(g, input1, input2, attr1, attr2):
        assert input1.type().varyingSizes()[0] is None  # the batch dimension is dynamic
        return g.op("Add", g.op("Mul", input1, attr1), g.op("Mul", input2, float(attr2)))

    registrations("custom_ops::foo_forward", symbolic_foo_forward, 9)
    model = FooModel(0.5, 2)
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    program = onnxport.export(model, (a, b), input_names=["a", "b"],
                              dynamic_axes={"a": {0: "batch"}, "b": {0: "batch"}})
    _check(program, model, a, b)
    a, b = torch.randn(7, 4), torch.randn(7, 4)
    _check(program, model, a, b)


@pytest.mark.parametrize("dynamo", [None, False])
def test_doc_1x_custom_op_without_domain_is_written_as_asked(tmp_path, registrations, dynamo):
    # The 1.x page's g.op("Foo", ...) puts an op ONNX does not define in the default domain;
    # torch.onnx writes it so, and so does onnxport, with a warning that no runtime runs it.
    import onnx
    import onnxruntime as ort

    @symbolic_helper.parse_args("v", "v", "f", "i")
    def symbolic_foo_forward(g, input1, input2, attr1, attr2):
        return g.op("Foo", input1, input2, attr1_f=attr1, attr2_i=attr2)

    registrations("custom_ops::foo_forward", symbolic_foo_forward, 9)
    x = torch.randn(2, 3)
    with pytest.warns(UserWarning, match="'Foo' is not an ONNX operator; it is written in the "
                      "default ONNX domain.*custom_domain::Foo"):
        onnxport.export(FooModel(2.0, 3), (x, x), tmp_path / "model.onnx", dynamo=dynamo)
    proto = onnx.load(tmp_path / "model.onnx")
    [foo] = [n for n in proto.graph.node if n.op_type == "Foo"]
    assert foo.domain == ""
    assert {(a.name, onnx.helper.get_attribute_value(a)) for a in foo.attribute} == {
        ("attr1", 2.0), ("attr2", 3)}
    assert [d.domain for d in proto.opset_import] == [""]  # nothing else was added
    # What the warning says: ONNX Runtime has no such op.
    with pytest.raises(Exception, match="Foo"):
        ort.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"])


def test_an_invalid_op_of_the_exporters_own_still_fails_the_gate():
    # Only the nodes a symbolic function asked for are exempt from the checker's op lookup.
    import onnx_ir as ir
    from onnxport.errors import InvalidModelError
    from onnxport.verification.validity import check_model

    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([2]))
    node = ir.Node("", "Foo", [x], name="Foo_0")
    node.outputs[0].name = "y"
    node.outputs[0].type, node.outputs[0].shape = ir.TensorType(ir.DataType.FLOAT), ir.Shape([2])
    model = ir.Model(ir.Graph([x], node.outputs, nodes=[node], opset_imports={"": 18},
                              name="main"),
                     ir_version=8)
    with pytest.raises(InvalidModelError, match="Foo"):
        check_model(model, "a test")
    node.meta["onnxport.unregistered_default_domain_op"] = True
    check_model(model, "a test")


def test_registration_keeps_an_op_torch_would_decompose(registrations):
    # The library has no translation for glu, so torch decomposes it (Slice/Sigmoid/Mul);
    # once a symbolic is registered, capture keeps the call for it.
    @symbolic_helper.parse_args("v", "i")
    def glu(g, input, dim):
        first, second = g.op("Split", input, axis_i=dim, num_outputs_i=2, outputs=2)
        return g.op("Mul", first, g.op("Sigmoid", second))

    model = torch.nn.GLU(dim=1)
    x = torch.randn(2, 6)
    assert ("", "Split") not in _op_types(onnxport.export(model, (x,)))
    registrations("aten::glu", glu, 18)
    program = onnxport.export(model, (x,))
    assert ("", "Split") in _op_types(program)
    _check(program, model, x)
