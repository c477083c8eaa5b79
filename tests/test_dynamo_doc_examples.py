"""The examples of torch.onnx's TorchDynamo-exporter page, with ``torch.onnx`` replaced by
``onnxport`` and nothing else changed, each run in ONNX Runtime against eager PyTorch."""

import onnx
import pytest
import onnxruntime as ort
import torch
import torch.nn as nn

import onnxport


# The page's model, as written there.
class MLPModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc0 = nn.Linear(8, 8, bias=True)
        self.fc1 = nn.Linear(8, 4, bias=True)
        self.fc2 = nn.Linear(4, 2, bias=True)
        self.fc3 = nn.Linear(2, 2, bias=True)

    def forward(self, tensor_x: torch.Tensor):
        tensor_x = self.fc0(tensor_x)
        tensor_x = torch.sigmoid(tensor_x)
        tensor_x = self.fc1(tensor_x)
        tensor_x = torch.sigmoid(tensor_x)
        tensor_x = self.fc2(tensor_x)
        tensor_x = torch.sigmoid(tensor_x)
        output = self.fc3(tensor_x)
        return output


def _run_file(path, tensor_x):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (name,) = [i.name for i in session.get_inputs()]
    return torch.from_numpy(session.run(None, {name: tensor_x.numpy()})[0])


def test_simple_example_mlp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the page saves to a relative path
    model = MLPModel()
    tensor_x = torch.rand((97, 8), dtype=torch.float32)
    onnx_program = onnxport.dynamo_export(model, tensor_x)

    assert isinstance(onnx_program, onnxport.ONNXProgram)
    onnx_program.save("mlp.onnx")
    torch.testing.assert_close(_run_file(tmp_path / "mlp.onnx", tensor_x), model(tensor_x).detach(),
                               rtol=1e-3, atol=1e-4)


def test_model_proto_is_an_onnx_model_proto():
    model = MLPModel()
    tensor_x = torch.rand((97, 8), dtype=torch.float32)
    onnx_program = onnxport.dynamo_export(model, tensor_x)

    proto = onnx_program.model_proto
    assert isinstance(proto, onnx.ModelProto)
    onnx.checker.check_model(proto, full_check=True)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    (name,) = [i.name for i in session.get_inputs()]
    got = torch.from_numpy(session.run(None, {name: tensor_x.numpy()})[0])
    torch.testing.assert_close(got, model(tensor_x).detach(), rtol=1e-3, atol=1e-4)


def test_simple_example_with_dynamic_shapes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = MLPModel()
    tensor_x = torch.rand((97, 8), dtype=torch.float32)
    export_options = onnxport.ExportOptions(dynamic_shapes=True)
    onnx_program = onnxport.dynamo_export(model, tensor_x, export_options=export_options)
    onnx_program.save("my_simple_model.onnx")

    for batch in (97, 5):
        x = torch.rand((batch, 8), dtype=torch.float32)
        torch.testing.assert_close(_run_file(tmp_path / "my_simple_model.onnx", x),
                                   model(x).detach(), rtol=1e-3, atol=1e-4)


# The examples of the API reference on that page (the docstrings of dynamo_export and
# enable_fake_mode), which save to relative paths too.
class MyModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(2, 2)

    def forward(self, x, bias=None):
        out = self.linear(x)
        out = out + bias
        return out


def test_dynamo_export_docstring_example(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = MyModel()
    kwargs = {"bias": 3.0}
    args = (torch.randn(2, 2, 2),)
    onnx_program = onnxport.dynamo_export(
        model,
        *args,
        **kwargs).save("my_simple_model.onnx")

    export_options = onnxport.ExportOptions(dynamic_shapes=True)
    onnx_program = onnxport.dynamo_export(
        model,
        *args,
        **kwargs,
        export_options=export_options)
    onnx_program.save("my_dynamic_model.onnx")

    x = args[0]
    torch.testing.assert_close(_run_file(tmp_path / "my_simple_model.onnx", x),
                               model(x, 3.0).detach(), rtol=1e-3, atol=1e-4)
    for x in (args[0], torch.randn(3, 5, 2)):
        torch.testing.assert_close(_run_file(tmp_path / "my_dynamic_model.onnx", x),
                                   model(x, 3.0).detach(), rtol=1e-3, atol=1e-4)


class MyFakeModel(torch.nn.Module):  # Dummy model
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(2, 2)

    def forward(self, x):
        out = self.linear(x)
        return out


def test_enable_fake_mode_docstring_example(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with onnxport.enable_fake_mode() as fake_context:
        my_nn_module = MyFakeModel()
        arg1 = torch.randn(2, 2, 2)  # positional input 1
    export_options = onnxport.ExportOptions(fake_context=fake_context)
    onnx_program = onnxport.dynamo_export(
        my_nn_module,
        arg1,
        export_options=export_options
    )
    # Saving model WITHOUT initializers
    with pytest.warns(UserWarning, match="without weights"):
        onnx_program.save("my_model_without_initializers.onnx")
    # Saving model WITH initializers
    real = MyFakeModel()
    onnx_program.save("my_model_with_initializers.onnx", model_state=real.state_dict())

    without = onnx.load(tmp_path / "my_model_without_initializers.onnx")
    assert len(without.graph.initializer) == 0
    assert len(without.graph.node) > 0
    x = torch.randn(2, 2, 2)
    torch.testing.assert_close(_run_file(tmp_path / "my_model_with_initializers.onnx", x),
                               real(x).detach(), rtol=1e-3, atol=1e-4)


def test_serializer_protocol_example(tmp_path):
    # The page's ONNXProgramSerializer: serialize(exported_program, destination) writes to a
    # binary stream.
    class ProtobufSerializer:
        def serialize(self, exported_program: onnxport.ONNXProgram, destination) -> None:
            destination.write(exported_program.model_proto.SerializeToString())

    serializer = ProtobufSerializer()
    assert isinstance(serializer, onnxport.ONNXProgramSerializer)
    model = MLPModel()
    tensor_x = torch.rand((97, 8), dtype=torch.float32)
    onnx_program = onnxport.dynamo_export(model, tensor_x)
    onnx_program.save(str(tmp_path / "mlp.onnx"), serializer=serializer)
    torch.testing.assert_close(_run_file(tmp_path / "mlp.onnx", tensor_x),
                               model(tensor_x).detach(), rtol=1e-3, atol=1e-4)
