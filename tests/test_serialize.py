"""serialize.write_model: the streamed single file reads back as the model ir.to_proto makes,
runs in ONNX Runtime with eager's numbers, and keeps ir's own path for string tensors."""

from __future__ import annotations

import io

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import torch

import onnxport
from onnxport.serialize import write_model


class ConvNormLinear(torch.nn.Module):
    """Conv + BatchNorm (a folded, piecewise weight), Linear on a 3-D input (a transposed,
    piecewise weight), a bf16 parameter and a tiny int64 constant."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.norm = torch.nn.BatchNorm2d(8)
        self.linear = torch.nn.Linear(6, 5)
        self.scale = torch.nn.Parameter(torch.randn(5).to(torch.bfloat16))
        with torch.no_grad():
            self.norm.running_mean.uniform_(-1, 1)
            self.norm.running_var.uniform_(0.5, 2)
            self.norm.weight.uniform_(0.5, 2)

    def forward(self, x):
        y = self.norm(self.conv(x)).flatten(2)[..., :6]
        return self.linear(y) * self.scale.float()


def _exported():
    torch.manual_seed(0)
    model = ConvNormLinear().eval()
    x = torch.randn(2, 3, 8, 8)
    return model, x, onnxport.export(model, (x,))


def _without_initializer_value_info(proto: onnx.ModelProto) -> onnx.ModelProto:
    names = {t.name for t in proto.graph.initializer}
    kept = [v for v in proto.graph.value_info if v.name not in names]
    del proto.graph.value_info[:]
    proto.graph.value_info.extend(kept)
    return proto


def test_streamed_file_reads_back_as_the_model():
    model, x, program = _exported()
    stream = io.BytesIO()
    write_model(program.model, stream)
    streamed = onnx.load_from_string(stream.getvalue())
    expected = _without_initializer_value_info(program.model_proto)
    # Only the (redundant) value_info of initializers is left out of the streamed file.
    assert streamed.SerializeToString(deterministic=True) == \
        expected.SerializeToString(deterministic=True)
    onnx.checker.check_model(streamed, full_check=True)
    session = ort.InferenceSession(stream.getvalue(), providers=["CPUExecutionProvider"])
    (actual,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    with torch.no_grad():
        np.testing.assert_allclose(actual, model(x).numpy(), rtol=1e-3, atol=1e-4)


def test_writing_leaves_the_model_as_it_was():
    _, _, program = _exported()
    before = [(v.name, v.const_value) for v in program.model.graph.initializers.values()]
    write_model(program.model, io.BytesIO())
    after = [(v.name, v.const_value) for v in program.model.graph.initializers.values()]
    assert before == after
    assert all(program.model.graph.initializers[name].is_initializer() for name, _ in after)


def test_without_initializers():
    _, _, program = _exported()
    stream = io.BytesIO()
    write_model(program.model, stream, include_initializers=False)
    proto = onnx.load_from_string(stream.getvalue())
    assert len(proto.graph.initializer) == 0
    assert len(proto.graph.node) == len(program.model.graph)


def _model_with_string_initializer() -> ir.Model:
    words = ir.Value(name="words", type=ir.TensorType(ir.DataType.STRING), shape=ir.Shape([2]),
                     const_value=ir.StringTensor([b"ab", b"c"], shape=ir.Shape([2]),
                                                 name="words"))
    weight = ir.Value(name="w", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([3]),
                      const_value=ir.tensor(np.arange(3, dtype=np.float32), name="w"))
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([3]))
    node = ir.node("Add", [x, weight])
    node.outputs[0].name = "y"
    graph = ir.Graph([x], node.outputs, nodes=[node], initializers=[words, weight],
                     opset_imports={"": 18})
    return ir.Model(graph, ir_version=8)


def test_string_initializer_keeps_ir_serialization():
    stream = io.BytesIO()
    write_model(_model_with_string_initializer(), stream)
    proto = onnx.load_from_string(stream.getvalue())
    by_name = {t.name: t for t in proto.graph.initializer}
    assert list(by_name["words"].string_data) == [b"ab", b"c"]
    assert onnx.numpy_helper.to_array(by_name["w"]).tolist() == [0.0, 1.0, 2.0]


def test_without_initializers_drops_string_initializers_too():
    model = _model_with_string_initializer()
    stream = io.BytesIO()
    write_model(model, stream, include_initializers=False)
    assert len(onnx.load_from_string(stream.getvalue()).graph.initializer) == 0
    assert list(model.graph.initializers) == ["words", "w"]  # the model itself keeps them
