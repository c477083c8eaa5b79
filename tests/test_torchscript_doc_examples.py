"""The examples of the TorchScript-based exporter page and of torch.onnx 1.x's API page, each as
written there with ``torch.onnx`` replaced by ``onnxport`` (random weights instead of pretrained
ones, CPU instead of CUDA, files in tmp_path). Their symbolic-function examples (elu, the
custom op foo_forward, the onnxscript Selu) are in compat/test_custom_symbolics.py.
"""

import os
import sys
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
import torchvision

import onnxport
from onnxport import symbolic_helper


def _session(path):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


# -- Example: AlexNet from PyTorch to ONNX ------------------------------------------------------
@pytest.mark.parametrize("dynamo", [True, False])
def test_alexnet_names_inputs_and_parameters(tmp_path, capsys, dynamo):
    torch.manual_seed(0)
    dummy_input = torch.randn(2, 3, 224, 224)
    model = torchvision.models.alexnet(weights=None).eval()
    input_names = ["actual_input_1"] + ["learned_%d" % i for i in range(16)]
    output_names = ["output1"]
    path = tmp_path / "alexnet.onnx"
    onnxport.export(model, dummy_input, path, verbose=True, input_names=input_names,
                    output_names=output_names, dynamo=dynamo)
    assert "actual_input_1" in capsys.readouterr().out  # verbose prints the graph

    model_proto = onnx.load(path)
    onnx.checker.check_model(model_proto)
    onnx.helper.printable_graph(model_proto.graph)
    # The extra names went to the 16 parameters, in the order the traced graph takes them.
    initializers = {i.name: tuple(i.dims) for i in model_proto.graph.initializer}
    parameters = list(model.state_dict().values())
    assert {f"learned_{i}": tuple(p.shape) for i, p in enumerate(parameters)} == initializers
    assert [i.name for i in model_proto.graph.input] == ["actual_input_1"]

    ort_session = _session(path)
    x = np.random.randn(2, 3, 224, 224).astype(np.float32)
    outputs = ort_session.run(None, {"actual_input_1": x})
    assert ort_session.get_outputs()[0].name == "output1"
    np.testing.assert_allclose(outputs[0], model(torch.from_numpy(x)).detach().numpy(),
                               rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("dynamo", [True, False])
def test_parameter_names_with_initializers_as_inputs(dynamo):
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4),
                                torch.nn.Flatten(), torch.nn.Linear(36, 2)).eval()
    x = torch.randn(1, 3, 5, 5)
    names = ["image"] + [f"w{i}" for i in range(5)]
    program = onnxport.export(model, (x,), input_names=names, keep_initializers_as_inputs=True,
                              dynamo=dynamo)
    graph = program.model.graph
    state = model.state_dict()
    expected = dict(zip(names[1:], state.values()))  # conv w, b; bn weight, bias, running_mean
    for name, tensor in expected.items():
        assert graph.initializers[name].const_value.numpy().shape == tuple(tensor.shape)
        np.testing.assert_array_equal(graph.initializers[name].const_value.numpy(),
                                      tensor.numpy())
    assert [v.name for v in graph.inputs][:6] == names
    (actual,) = program(x)
    torch.testing.assert_close(actual, model(x), rtol=1e-3, atol=1e-4)


def test_weight_names_taken_by_other_weights_are_refused():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
    with pytest.raises(onnxport.InvalidExportOptionsError, match=r"\['1.weight'\]"):
        onnxport.export(model, (torch.randn(1, 2),), input_names=["x", "1.weight"])


def test_more_names_than_inputs_and_weights_is_refused():
    with pytest.raises(onnxport.InvalidExportOptionsError, match="at most 3 names"):
        onnxport.export(torch.nn.Linear(2, 2), (torch.randn(1, 2),),
                        input_names=["x", "w", "b", "extra"])


# -- Avoiding pitfalls ------------------------------------------------------------------------
class ReshapeByTensor(torch.nn.Module):
    def forward(self, x, y):
        # Good! y will be preserved as a variable during tracing.
        return x.reshape(y, -1)


@pytest.mark.parametrize("dynamo", [None, False])  # None: the default path (torch.export)
def test_reshape_by_a_tensor_traces_the_value(dynamo):
    x, y = torch.randn(6, 4), torch.tensor(3)
    # torch.export asserts the value is not 0 with torch.sym_not, which emits nothing in ONNX.
    program = onnxport.export(ReshapeByTensor(), (x, y), dynamo=dynamo)
    session = ort.InferenceSession(program.model_proto.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    for rows in (3, 8):  # y is an input of the graph, not this run's 3
        (actual,) = session.run(None, dict(zip(names, [x.numpy(), np.array(rows)])))
        assert actual.shape == (rows, 24 // rows)
        np.testing.assert_allclose(actual, x.reshape(rows, -1).numpy(), rtol=1e-3, atol=1e-4)


class InPlaceOnShape(torch.nn.Module):
    def forward(self, states):
        batch_size, seq_length = states.shape[:2]
        real_seq_length = seq_length
        real_seq_length = real_seq_length + 2  # the document's rewrite of += 2
        return real_seq_length + seq_length


def test_shape_arithmetic_without_in_place():
    states = torch.randn(2, 5, 3)
    program = onnxport.export(InPlaceOnShape(), (states,), dynamo=False)
    (actual,) = program(states)
    assert int(actual) == 12


def test_numpy_free_concatenation():
    class Cat(torch.nn.Module):
        def forward(self, x, y):
            return torch.cat((x, y), dim=1)

    x, y = torch.randn(1, 2), torch.randn(1, 2)
    (actual,) = onnxport.export(Cat(), (x, y))(x, y)
    torch.testing.assert_close(actual, torch.cat((x, y), dim=1))


# -- Unsupported Tensor Indexing Patterns (unsupported by torch.onnx; onnxport exports them) ---
class ReadNegative(torch.nn.Module):
    def forward(self, data):
        # Tensor indices that includes negative values.
        return data[torch.tensor([[1, 2], [2, -3]]), torch.tensor([-2, 3])]


class WriteRank2Index(torch.nn.Module):
    def forward(self, data, new_data):
        data = data.clone()
        # Multiple tensor indices if any has rank >= 2
        data[torch.tensor([[1, 2], [2, 3]]), torch.tensor([2, 3])] = new_data
        return data


class WriteNonConsecutive(torch.nn.Module):
    def forward(self, data, new_data):
        data = data.clone()
        # Multiple tensor indices that are not consecutive
        data[torch.tensor([2, 3]), :, torch.tensor([1, 2])] = new_data
        return data


class WriteNegative(torch.nn.Module):
    def forward(self, data, new_data):
        data = data.clone()
        # Tensor indices that includes negative values.
        data[torch.tensor([1, -2]), torch.tensor([-2, 3])] = new_data
        return data


class WriteBroadcast(torch.nn.Module):
    def forward(self, data, new_data):
        data = data.clone()
        # Implicit broadcasting required for new_data.
        data[torch.tensor([[0, 2], [1, 1]]), 1:3] = new_data
        return data


@pytest.mark.parametrize("dynamo", [True, False])
@pytest.mark.parametrize("model, shapes", [
    (ReadNegative(), [(4, 5)]),
    (WriteRank2Index(), [(4, 5), (2, 2)]),
    (WriteNonConsecutive(), [(4, 3, 5), (2, 3)]),
    (WriteNegative(), [(4, 5), (2,)]),
    (WriteBroadcast(), [(3, 4, 5), (5,)]),
], ids=lambda v: type(v).__name__ if isinstance(v, torch.nn.Module) else "")
def test_indexing_patterns(model, shapes, dynamo):
    args = tuple(torch.randn(*shape) for shape in shapes)
    (actual,) = onnxport.export(model, args, dynamo=dynamo)(*args)
    torch.testing.assert_close(actual, model(*args))


# -- torch.autograd.Functions ------------------------------------------------------------------
class MyRelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(input)
        return input.clamp(min=0)

    @staticmethod
    def symbolic(g: torch.Graph, input: torch.Value) -> torch.Value:
        return g.op("Clip", input, g.op("Constant", value_t=torch.tensor(0, dtype=torch.float)))


class MyLogExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(input)
        h = input.exp()
        return h.log().log()


class Applies(torch.nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, x):
        return self.function.apply(x)


@pytest.mark.parametrize("dynamo", [True, False])
def test_my_relu_static_symbolic_is_called(monkeypatch, dynamo):
    calls = []
    symbolic = MyRelu.symbolic

    def spy(g, input):
        calls.append(input)
        return symbolic(g, input)

    monkeypatch.setattr(MyRelu, "symbolic", staticmethod(spy))
    x = torch.randn(3, 4)
    program = onnxport.export(Applies(MyRelu), (x,), dynamo=dynamo)
    assert len(calls) == 1
    assert [n.op_type for n in program.model.graph] == ["Constant", "Clip"]
    (actual,) = program(x)
    torch.testing.assert_close(actual, x.clamp(min=0))


@pytest.mark.parametrize("dynamo", [True, False])
def test_my_log_exp_is_inlined(dynamo):
    x = torch.rand(1) + 1.5
    program = onnxport.export(Applies(MyLogExp), (x,), dynamo=dynamo)
    assert [n.op_type for n in program.model.graph] == ["Exp", "Log", "Log"]
    (actual,) = program(x)
    torch.testing.assert_close(actual, MyLogExp.apply(x), rtol=1e-3, atol=1e-4)


def test_my_log_exp_kept_whole_with_fallthrough():
    program = onnxport.export(Applies(MyLogExp), (torch.rand(1) + 1.5,),
                              operator_export_type=onnxport.OperatorExportTypes.ONNX_FALLTHROUGH)
    # One node that a runtime with a MyLogExp kernel would run (ONNX Runtime has none).
    assert [(n.domain, n.op_type) for n in program.model.graph] == [("prim", "PythonOp")]


# -- Discovering all unconvertible ATen ops at once --------------------------------------------
class TwoUnconvertible(torch.nn.Module):
    # geqrf has no decomposition; as_strided_scatter's is prims::as_strided_scatter, which has
    # no translation either.
    def forward(self, x):
        return torch.geqrf(x)[0], torch.as_strided_scatter(x, x[0], (3,), (1,)) * x


def test_unconvertible_ops_lists_all_of_them(untranslated):
    model, args, opset_version = TwoUnconvertible(), (torch.rand(3, 3) + 0.5,), 17
    torch_script_graph, unconvertible_ops = onnxport.utils.unconvertible_ops(
        model, args, opset_version=opset_version
    )
    assert set(unconvertible_ops) == {"aten::geqrf", "prims::as_strided_scatter"}
    assert len(unconvertible_ops) == 2
    assert any(n.op == "call_function" for n in torch_script_graph.nodes)
    # The export fails naming both, and how to get past them.
    with pytest.raises(onnxport.UnsupportedOpsError) as failure:
        onnxport.export(model, args, opset_version=opset_version, dynamo=False)
    message = str(failure.value)
    assert message.startswith("2 unsupported op(s)")
    assert "aten::geqrf" in message and "prims::as_strided_scatter" in message
    assert "register_custom_op_symbolic" in message and "ONNX_FALLTHROUGH" in message


def test_unconvertible_ops_is_empty_for_a_convertible_model():
    _, ops = onnxport.utils.unconvertible_ops(torch.nn.Linear(2, 2), (torch.randn(1, 2),))
    assert ops == []


def test_registering_the_unconvertible_op_makes_the_export_pass(registrations, untranslated):
    def geqrf(g, x):  # not the function: a stand-in that ONNX Runtime can run
        return g.op("Identity", x), g.op("ReduceMax", x, keepdims_i=0)

    registrations("aten::geqrf", geqrf, 9)
    _, ops = onnxport.utils.unconvertible_ops(TwoUnconvertible(), (torch.rand(3, 3),))
    assert ops == ["prims::as_strided_scatter"]


# -- operator_export_type ------------------------------------------------------------------
@pytest.mark.parametrize("dynamo", [True, False])
def test_aten_fallback_and_fallthrough_keep_unconvertible_ops(dynamo, untranslated):
    args = (torch.rand(3, 3) + 0.5,)
    kinds = onnxport.OperatorExportTypes
    program = onnxport.export(TwoUnconvertible(), args, dynamo=dynamo,
                              operator_export_type=kinds.ONNX_ATEN_FALLBACK)
    # as_strided_scatter has a decomposition, but into prims::as_strided_scatter, which has no
    # translation either: the op of the model is what is kept, as torch.onnx does.
    nodes = [(n.domain, n.op_type) for n in program.model.graph]
    assert ("", "Mul") in nodes
    operators = {n.attributes["operator"].value for n in program.model.graph
                 if n.op_type == "ATen"}
    assert operators == {"geqrf", "as_strided_scatter"}
    assert all(domain in ("", "org.pytorch.aten") for domain, _ in nodes)
    program = onnxport.export(TwoUnconvertible(), args, dynamo=dynamo,
                              operator_export_type=kinds.ONNX_FALLTHROUGH)
    nodes = [(n.domain, n.op_type) for n in program.model.graph]
    assert ("aten", "geqrf") in nodes and ("aten", "as_strided_scatter") in nodes
    assert ("", "Mul") in nodes
    # ONNX Runtime has no kernel for these: the graph is what is checked.


def test_fallback_still_decomposes_what_decomposes_fully(untranslated):
    class Mixed(torch.nn.Module):
        def forward(self, x):  # addcmul decomposes into ops with translations
            return torch.geqrf(x)[0] + torch.addcmul(x, x, x, value=0.5)

    x = torch.rand(3, 3) + 0.5
    program = onnxport.export(
        Mixed(), (x,), operator_export_type=onnxport.OperatorExportTypes.ONNX_FALLTHROUGH)
    assert [n.op_type for n in program.model.graph if n.domain] == ["geqrf"]


def test_onnx_aten_exports_every_aten_op_as_an_aten_node():
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())
    program = onnxport.export(model, (torch.randn(2, 3),),
                              operator_export_type=onnxport.OperatorExportTypes.ONNX_ATEN)
    nodes = list(program.model.graph)
    assert {(n.domain, n.op_type) for n in nodes} == {("org.pytorch.aten", "ATen")}
    assert [n.attributes["operator"].value for n in nodes] == ["linear", "relu"]


def test_onnx_aten_keeps_registered_symbolics(registrations):
    registrations("aten::relu", lambda g, input: g.op("Sigmoid", input), 9)
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())
    program = onnxport.export(model, (torch.randn(2, 3),),
                              operator_export_type=onnxport.OperatorExportTypes.ONNX_ATEN)
    assert [n.op_type for n in program.model.graph] == ["ATen", "Sigmoid"]


# -- training modes -----------------------------------------------------------------------
class TrainSensitive(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4)
        self.dropout = torch.nn.Dropout(0.5)

    def forward(self, x):
        return self.dropout(self.bn(self.conv(x)))


@pytest.mark.parametrize("dynamo", [True, False])
def test_training_mode_exports_train_behaviour(dynamo):
    torch.manual_seed(0)
    model = TrainSensitive().eval()
    with torch.no_grad():  # running statistics far from the batch's: eval and train differ
        model.bn.running_mean.fill_(3.0)
        model.bn.running_var.fill_(9.0)
    x = torch.randn(2, 3, 6, 6)
    program = onnxport.export(model, (x,), training=onnxport.TrainingMode.TRAINING,
                              dynamo=dynamo)
    assert not model.training  # the model's mode is given back
    dropout = [n for n in program.model.graph if n.op_type == "Dropout"]
    assert len(dropout) == 1
    assert dropout[0].inputs[2].const_value.numpy().item() is True  # training_mode
    # Batch statistics, checked without the random dropout: ratio 0 is the identity.
    model.dropout.p = 0.0
    program = onnxport.export(model, (x,), training=onnxport.TrainingMode.TRAINING,
                              dynamo=dynamo)
    (actual,) = program(x)
    with onnxport.select_model_mode_for_export(model, onnxport.TrainingMode.TRAINING):
        expected = model(x)
    assert not model.training
    torch.testing.assert_close(actual, expected, rtol=1e-3, atol=1e-4)
    assert not torch.allclose(expected, model(x), atol=1e-2)  # eval would differ


def test_eval_and_preserve_modes():
    model = TrainSensitive().train()
    x = torch.randn(2, 3, 6, 6)
    program = onnxport.export(model, (x,), training=onnxport.TrainingMode.EVAL)
    assert model.training
    assert "Dropout" not in [n.op_type for n in program.model.graph]
    with torch.no_grad():
        (actual,) = program(x)
        torch.testing.assert_close(actual, model.eval()(x), rtol=1e-3, atol=1e-4)
    model.train()
    model.dropout.p = 0.0
    program = onnxport.export(model, (x,), training=onnxport.TrainingMode.PRESERVE)
    (actual,) = program(x)
    torch.testing.assert_close(actual, model(x), rtol=1e-3, atol=1e-4)
    model.eval()
    program = onnxport.export(model, (x,), training=onnxport.TrainingMode.PRESERVE)
    (actual,) = program(x)
    torch.testing.assert_close(actual, model(x), rtol=1e-3, atol=1e-4)


def test_is_in_onnx_export_only_during_an_export():
    seen = []

    class Probe(torch.nn.Module):
        def forward(self, x):
            seen.append(onnxport.is_in_onnx_export())
            return x + 1

    assert not onnxport.is_in_onnx_export()
    onnxport.export(Probe(), (torch.randn(2),))
    assert seen and all(seen) and not onnxport.is_in_onnx_export()


# -- The 1.x page ------------------------------------------------------------------------
class LoopModel(torch.nn.Module):
    def forward(self, x, y):
        for i in range(y):
            x = x + i
        return x


def test_1x_loop_model_traced_unrolls_the_loop(tmp_path):
    model = LoopModel()
    dummy_input = torch.ones(2, 3, dtype=torch.long)
    loop_count = torch.tensor(5, dtype=torch.long)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer says the loop count is fixed
        onnxport.export(model, (dummy_input, loop_count), tmp_path / "loop.onnx", verbose=True,
                        dynamo=False)
    session = _session(tmp_path / "loop.onnx")
    feeds = {i.name: v for i, v in zip(session.get_inputs(),
                                       [dummy_input.numpy(), loop_count.numpy()])}
    (actual,) = session.run(None, feeds)
    np.testing.assert_array_equal(actual, model(dummy_input, loop_count).numpy())


def test_1x_loop_model_through_the_default_path(tmp_path):
    # The page's call as written (no dynamo=): torch.export cannot loop over a tensor's value,
    # so the export goes on by tracing, as torch.onnx's TorchScript exporter did, and says so.
    from onnxport.errors import FallbackWarning

    model = LoopModel()
    dummy_input = torch.ones(2, 3, dtype=torch.long)
    loop_count = torch.tensor(5, dtype=torch.long)
    with pytest.warns(FallbackWarning, match=r"range\(y\)"):
        program = onnxport.export(model, (dummy_input, loop_count), tmp_path / "loop.onnx",
                                  verbose=True)
    assert program.capture_strategy == "tracing" and program.capture_attempts
    session = _session(tmp_path / "loop.onnx")
    for x in (dummy_input, torch.arange(6).reshape(2, 3)):
        feeds = {i.name: v for i, v in zip(session.get_inputs(), [x.numpy(), loop_count.numpy()])}
        (actual,) = session.run(None, feeds)
        np.testing.assert_array_equal(actual, model(x, loop_count).numpy())


@torch.jit.script
def loop(x, y):
    for i in range(int(y)):
        x = x + i
    return x


class LoopModel2(torch.nn.Module):
    def forward(self, x, y):
        return loop(x, y)


def test_1x_loop_model2_scripted_loop_stays_dynamic(tmp_path):
    model = LoopModel2()
    dummy_input = torch.ones(2, 3, dtype=torch.long)
    loop_count = torch.tensor(5, dtype=torch.long)
    onnxport.export(model, (dummy_input, loop_count), tmp_path / "loop.onnx", verbose=True,
                    input_names=["input_data", "loop_range"], dynamo=False)
    ort_sess = _session(tmp_path / "loop.onnx")
    outputs = ort_sess.run(None, {"input_data": dummy_input.numpy(),
                                  "loop_range": np.array(9).astype(np.int64)})
    np.testing.assert_array_equal(outputs[0], np.full((2, 3), 37))


class InPlaceIndexedAssignmentONNX(torch.nn.Module):
    def forward(self, data, index, new_data):
        new_data = new_data.unsqueeze(0)
        index = index.expand(1, new_data.size(1))
        data.scatter_(0, index, new_data)
        return data


@pytest.mark.parametrize("dynamo", [True, False])
def test_1x_in_place_scatter(tmp_path, dynamo):
    data = torch.zeros(3, 4)
    index = torch.tensor(1)
    new_data = torch.arange(4).to(torch.float32)
    out = InPlaceIndexedAssignmentONNX()(data, index, new_data)
    onnxport.export(InPlaceIndexedAssignmentONNX(), (data, index, new_data),
                    tmp_path / "inplace_assign.onnx", dynamo=dynamo)
    sess = _session(tmp_path / "inplace_assign.onnx")
    out_ort = sess.run(None, {
        sess.get_inputs()[0].name: torch.zeros(3, 4).numpy(),
        sess.get_inputs()[1].name: index.numpy(),
        sess.get_inputs()[2].name: new_data.numpy(),
    })
    assert torch.all(torch.eq(out, torch.tensor(out_ort[0])))


class AnotherModel(torch.nn.Module):
    def forward(self, x):
        return [torch.squeeze(out, 0) for out in torch.split(x, [1, 1, 1], dim=0)]


class Unbind(torch.nn.Module):
    def forward(self, x):
        return x.unbind(0)


@pytest.mark.parametrize("model", [AnotherModel(), Unbind()], ids=["split", "unbind"])
def test_1x_lists_of_tensors(model):
    x = torch.tensor([[1., 2., 3.], [4., 5., 6.], [7., 8., 9.]])
    outputs = onnxport.export(model, (x,))(x)
    for actual, expected in zip(outputs, model(x)):
        torch.testing.assert_close(actual, expected)


def test_1x_lstm_dynamic_axes(tmp_path):
    layer_count = 4
    model = torch.nn.LSTM(10, 20, num_layers=layer_count, bidirectional=True)
    model.eval()
    with torch.no_grad():
        input = torch.randn(5, 3, 10)
        h0 = torch.randn(layer_count * 2, 3, 20)
        c0 = torch.randn(layer_count * 2, 3, 20)
        output, (hn, cn) = model(input, (h0, c0))

        path = tmp_path / "lstm.onnx"
        onnxport.export(model, (input, (h0, c0)), path)
        onnx_model = onnx.load(path)
        dims = [d.dim_value for d in onnx_model.graph.input[0].type.tensor_type.shape.dim]
        assert dims == [5, 3, 10]

        onnxport.export(model, (input, (h0, c0)), path,
                        input_names=["input", "h0", "c0"],
                        output_names=["output", "hn", "cn"],
                        dynamic_axes={"input": {0: "sequence"}, "output": {0: "sequence"}})
        onnx_model = onnx.load(path)
        first = onnx_model.graph.input[0].type.tensor_type.shape.dim[0]
        assert first.dim_param == "sequence"
        session = _session(path)
        longer = torch.randn(8, 3, 10)  # a second sequence length
        actual = session.run(None, {"input": longer.numpy(), "h0": h0.numpy(),
                                    "c0": c0.numpy()})
        expected = model(longer, (h0, c0))
        np.testing.assert_allclose(actual[0], expected[0].numpy(), rtol=1e-3, atol=1e-4)


class ImplicitCastType(torch.jit.ScriptModule):
    @torch.jit.script_method
    def forward(self, x):
        # Exporter knows x is float32, will export '2' as float32 as well.
        y = x + 2
        return y + 3


def test_1x_implicit_cast_with_example_outputs(tmp_path):
    x = torch.tensor([1.0], dtype=torch.float32)
    with pytest.warns(FutureWarning, match="example_outputs"):
        onnxport.export(ImplicitCastType(), x, tmp_path / "implicit_cast.onnx",
                        example_outputs=ImplicitCastType()(x))
    (actual,) = _session(tmp_path / "implicit_cast.onnx").run(None, {"x": x.numpy()})
    assert actual.dtype == np.float32
    np.testing.assert_allclose(actual, [6.0])


def test_1x_export_options_are_accepted_with_a_warning():
    model, x = torch.nn.Linear(3, 2), torch.randn(2, 3)
    with pytest.warns(FutureWarning, match="strip_doc_string"):
        program = onnxport.export(model, (x,), strip_doc_string=True, _retain_param_name=True,
                                  do_constant_folding=False)
    (actual,) = program(x)
    torch.testing.assert_close(actual, model(x), rtol=1e-3, atol=1e-4)
    with pytest.warns(FutureWarning, match="aten"):
        program = onnxport.export(model, (x,), aten=True)
    assert {n.op_type for n in program.model.graph} == {"ATen"}
    with pytest.raises(onnxport.InvalidExportOptionsError, match="export_raw_ir"):
        onnxport.export(model, (x,), export_raw_ir=True)


def test_1x_shape_as_tensor():
    class ShapeSum(torch.nn.Module):
        def forward(self, x):
            return x.sum() + onnxport.operators.shape_as_tensor(x).sum()

    x = torch.randn(2, 3)
    assert onnxport.operators.shape_as_tensor(x).tolist() == [2, 3]
    for dynamo in (True, False):
        (actual,) = onnxport.export(ShapeSum(), (x,), dynamo=dynamo)(x)
        torch.testing.assert_close(actual, x.sum() + 5)


@pytest.mark.parametrize("dynamo", [True, False])
def test_1x_shape_as_tensor_stays_computed(dynamo):
    class ReshapeLike(torch.nn.Module):
        def forward(self, x, y):
            shape = onnxport.operators.shape_as_tensor(y)
            return onnxport.operators.reshape_from_tensor_shape(x, shape) * 2

    model = ReshapeLike()
    x, y = torch.randn(2, 6), torch.randn(3, 4)
    program = onnxport.export(model, (x, y), dynamo=dynamo, input_names=["x", "y"],
                              dynamic_axes={"x": {0: "r", 1: "c"}, "y": {0: "a", 1: "b"}})
    for x, y in ((x, y), (torch.randn(4, 6), torch.randn(6, 4))):  # a second size
        (actual,) = program(x, y)
        torch.testing.assert_close(actual, model(x, y))


def test_1x_set_training():
    model = torch.nn.Dropout(0.5).eval()
    with onnxport.set_training(model, True):
        assert model.training
    assert not model.training
    with onnxport.set_training(model, None):  # None: no change
        assert not model.training


def test_1x_register_custom_op_symbolic_with_parse_args(registrations):
    # The 1.x page's foo_forward with a symbolic ONNX Runtime can run (its g.op("Foo") has no
    # domain and is refused: compat/test_custom_symbolics.py).
    @symbolic_helper.parse_args("v", "v", "f", "i")
    def symbolic_foo_forward(g, input1, input2, attr1, attr2):
        return g.op("Add", g.op("Mul", input1, torch.tensor(attr1)),
                    g.op("Mul", input2, torch.tensor(float(attr2))))

    registrations("custom_ops::foo_forward", symbolic_foo_forward, 9)
    # (pytest imports tests/compat's modules under their own names, as this does)
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "compat"))
    import test_custom_symbolics  # defines custom_ops::foo_forward and the document's FooModel

    model = test_custom_symbolics.FooModel(2.0, 3)
    dummy_input1, dummy_input2 = torch.randn(2, 3), torch.randn(2, 3)
    (actual,) = onnxport.export(model, (dummy_input1, dummy_input2), dynamo=False)(
        dummy_input1, dummy_input2)
    torch.testing.assert_close(actual, model(dummy_input1, dummy_input2))


# -- Frequently Asked Questions ----------------------------------------------------------
class ScaleBy(torch.nn.Module):
    def forward(self, x, factor: float, offset: int):
        return x * factor + offset


@pytest.mark.parametrize("dynamo", [True, False])
def test_faq_primitive_type_inputs(dynamo):
    x = torch.randn(2, 3)
    program = onnxport.export(ScaleBy(), (x, 2.5, 3), dynamo=dynamo)
    (actual,) = program(x, 2.5, 3)
    torch.testing.assert_close(actual, x * 2.5 + 3)


class SumOfList(torch.nn.Module):
    def forward(self, tensors: list[torch.Tensor]):
        return torch.stack(tensors).sum(0), [t * 2 for t in tensors]


@pytest.mark.parametrize("dynamo", [True, False])
def test_faq_lists_of_tensors(dynamo):
    tensors = [torch.randn(2, 3) for _ in range(3)]
    program = onnxport.export(SumOfList(), (tensors,), dynamo=dynamo, opset_version=13)  # ONNX sequences since 11; onnxport starts at 13
    actual = program(tensors)
    expected = SumOfList()(tensors)
    torch.testing.assert_close(actual[0], expected[0])
    for got, want in zip(actual[1:], expected[1]):
        torch.testing.assert_close(got, want)


# -- Python API (the page's list) --------------------------------------------------------
def test_python_api_names_exist():
    for name in ("export", "export_to_pretty_string", "register_custom_op_symbolic",
                 "unregister_custom_op_symbolic", "select_model_mode_for_export",
                 "is_in_onnx_export", "enable_log", "disable_log", "JitScalarType"):
        assert callable(getattr(onnxport, name)), name
    for name in ("find_mismatch", "GraphInfo", "VerificationOptions"):
        assert callable(getattr(onnxport.verification, name)), name
    text = onnxport.export_to_pretty_string(torch.nn.ReLU(), (torch.randn(2),))
    assert "Relu" in text
