"""export_modules_as_functions (SPEC A11, C7): chosen modules become ONNX local functions, on
both capture paths, checked by onnx.checker, run in ONNX Runtime and compared with eager."""

import onnx
import onnxruntime as ort
import pytest
import torch
from torch import nn

import onnxport
from onnxport.errors import InvalidExportOptionsError


class Block(nn.Module):
    def __init__(self, width=4):
        super().__init__()
        self.fc1 = nn.Linear(width, 8)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(8, width)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x))) + x


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(Block(), Block())
        self.head = nn.Linear(4, 2, bias=False)  # a Gemm without C: a different body

    def forward(self, x):
        return self.head(self.blocks(x))


def _run(program, *inputs):
    proto = program.model_proto
    onnx.checker.check_model(proto, full_check=True)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return [torch.from_numpy(a) for a in
            session.run(None, {n: t.numpy() for n, t in zip(names, inputs)})]


def _calls(program):
    return [(n.domain, n.op_type) for n in program.model.graph]


@pytest.mark.parametrize("dynamo", [True, False])
def test_chosen_class_becomes_one_function_called_at_each_instance(dynamo):
    torch.manual_seed(0)
    model, x = Net().eval(), torch.randn(3, 4)
    program = onnxport.export(model, (x,), dynamo=dynamo, export_modules_as_functions={Block})

    assert _calls(program) == [(Block.__module__, "Block")] * 2 + [("", "Gemm")]
    assert list(program.model.functions) == [(Block.__module__, "Block", "")]
    function = program.model.functions[(Block.__module__, "Block", "")]
    assert [n.op_type for n in function] == ["Gemm", "Relu", "Gemm", "Add"]
    assert len(function.inputs) == 5  # x and the four weights: a function holds none
    torch.testing.assert_close(_run(program, x)[0], model(x).detach(), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("dynamo", [True, False])
def test_true_nests_functions_and_splits_different_bodies(dynamo):
    torch.manual_seed(0)
    model, x = Net().eval(), torch.randn(3, 4)
    program = onnxport.export(model, (x,), dynamo=dynamo, export_modules_as_functions=True)

    functions = program.model.functions
    linear = "torch.nn.modules.linear"
    # Linear with a bias (Gemm with C) and without one: two bodies.
    assert {(d, n) for d, n, _ in functions if d == linear} == {(linear, "Linear"),
                                                                (linear, "Linear_1")}
    block = functions[(Block.__module__, "Block", "")]
    assert [(n.domain, n.op_type) for n in block] == [
        (linear, "Linear"), ("torch.nn.modules.activation", "ReLU"), (linear, "Linear"),
        ("", "Add")]
    assert block.opset_imports[linear] == 1
    assert [n.op_type for n in program.model.graph] == ["Sequential", "Linear_1"]
    torch.testing.assert_close(_run(program, x)[0], model(x).detach(), rtol=1e-3, atol=1e-4)


def test_module_attributes_are_the_call_attributes():
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding="same"), nn.Conv2d(4, 2, (1, 3), stride=2))
    x = torch.randn(1, 3, 8, 8)
    program = onnxport.export(model.eval(), (x,), export_modules_as_functions={nn.Conv2d})

    first, second = list(program.model.graph)
    assert first.attributes["in_channels"].value == 3
    assert first.attributes["padding"].value == "same"
    assert list(second.attributes["kernel_size"].value) == [1, 3]
    assert list(second.attributes["stride"].value) == [2, 2]
    function = program.model.functions[(first.domain, first.op_type, "")]
    assert {"in_channels", "out_channels", "kernel_size", "padding"} <= set(function.attributes)
    torch.testing.assert_close(_run(program, x)[0], model(x).detach(), rtol=1e-3, atol=1e-4)


def test_dynamo_page_mlp_shows_each_linear_as_a_function():
    from test_dynamo_doc_examples import MLPModel

    model, x = MLPModel(), torch.rand((97, 8))
    options = onnxport.ExportOptions(dynamic_shapes=True)
    program = onnxport.dynamo_export(model, x, export_options=options)

    linears = [n for n in program.model.graph if n.op_type == "Linear"]
    assert [n.name for n in linears] == ["fc0/Linear", "fc1/Linear", "fc2/Linear", "fc3/Linear"]
    assert [(n.attributes["in_features"].value, n.attributes["out_features"].value)
            for n in linears] == [(8, 8), (8, 4), (4, 2), (2, 2)]
    assert len(program.model.functions) == 1  # one body, four calls
    for batch in (97, 5):  # exported with a dynamic batch: a second size
        x = torch.rand((batch, 8))
        torch.testing.assert_close(_run(program, x)[0], model(x).detach(), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("dynamo", [True, False])
def test_a_module_called_twice_is_two_calls(dynamo):
    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            return self.fc(torch.tanh(self.fc(x)))

    model, x = Twice().eval(), torch.randn(2, 4)
    program = onnxport.export(model, (x,), dynamo=dynamo, export_modules_as_functions={nn.Linear})
    assert [n.op_type for n in program.model.graph] == ["Linear", "Tanh", "Linear"]
    torch.testing.assert_close(_run(program, x)[0], model(x).detach(), rtol=1e-3, atol=1e-4)


def test_below_opset_15_is_a_clear_error():
    with pytest.raises(InvalidExportOptionsError, match="opset_version >= 15"):
        onnxport.export(Net(), (torch.randn(3, 4),), opset_version=14,
                        export_modules_as_functions=True)


def test_not_module_classes_are_refused():
    with pytest.raises(InvalidExportOptionsError, match="torch.nn.Module classes"):
        onnxport.export(Net(), (torch.randn(3, 4),), export_modules_as_functions={"Linear"})


def test_passes_run_again_keep_functions_valid():
    # The passes run before the outlining; run again (a user's optimize), they see calls of
    # custom domains in the main graph and must leave the functions whole.
    from onnxport import passes

    torch.manual_seed(0)
    model, x = Net().eval(), torch.randn(3, 4)
    program = onnxport.export(model, (x,), export_modules_as_functions=True)
    before = {key: [n.op_type for n in f] for key, f in program.model.functions.items()}
    passes.optimize(program.model)
    assert {key: [n.op_type for n in f] for key, f in program.model.functions.items()} == before
    torch.testing.assert_close(_run(program, x)[0], model(x).detach(), rtol=1e-3, atol=1e-4)


def test_nodes_a_pass_made_belong_to_the_module_around_their_readers():
    # SharedMaskBias makes one mask bias (nodes without a module) that every layer reads; it
    # stood between the LlamaModel's nodes, which then could not become one call.
    import model_zoo

    model, args, kwargs = model_zoo.build("llama", batch=1)
    program = onnxport.dynamo_export(model, *args, **kwargs)

    assert not program.diagnostics.of_rule("OPX0008")
    # The head's Linear may be numbered (Linear_3): its body, on 2-D rows, differs from those
    # of the Linears inside the layers.
    calls = [n.op_type for n in program.model.graph if n.domain]
    assert len(calls) == 2 and calls[0] == "LlamaModel" and calls[1].startswith("Linear"), calls
    with torch.no_grad():
        expected = model(*args, **kwargs)[0]  # the logits
    torch.testing.assert_close(_run(program, *args, *kwargs.values())[0], expected,
                               rtol=1e-3, atol=1e-4)
