"""ShapeOfGraphInput: the shape of an intermediate value is read off a graph input with the same
named dimensions."""

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
from onnx import TensorProto, helper

from onnxport.passes import ShapeOfGraphInput


def _model(opset):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "sequence", 4])
    out = helper.make_tensor_value_info("out", TensorProto.INT64, [2])
    h = helper.make_tensor_value_info("h", TensorProto.FLOAT, ["batch", "sequence", 4])
    nodes = [helper.make_node("Relu", ["x"], ["h"]),
             helper.make_node("Shape", ["h"], ["out"], **({"end": -1} if opset >= 15 else {}))]
    if opset < 15:
        nodes[1] = helper.make_node("Shape", ["h"], ["out"])
        out = helper.make_tensor_value_info("out", TensorProto.INT64, [3])
    graph = helper.make_graph(nodes, "g", [x], [out], value_info=[h])
    # IR 10: onnx 1.23 writes 14 by default, which ONNX Runtime 1.30 does not read.
    return ir.serde.deserialize_model(helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10))


def _run(model, x):
    proto = ir.serde.serialize_model(model)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def test_shape_of_intermediate_reads_the_input():
    model = _model(18)
    assert ShapeOfGraphInput()(model).modified
    shape = next(n for n in model.graph if n.op_type == "Shape")
    assert shape.inputs[0].name == "x"
    assert (shape.attributes["start"].value, shape.attributes["end"].value) == (0, 2)
    ir.passes.common.RemoveUnusedNodesPass()(model)
    assert [n.op_type for n in model.graph] == ["Shape"]
    for size in [(3, 5, 4), (2, 7, 4)]:
        np.testing.assert_array_equal(_run(model, np.zeros(size, np.float32)), size[:2])


def test_before_opset_15_shape_stays():
    model = _model(14)
    assert not ShapeOfGraphInput()(model).modified
    onnx.checker.check_model(ir.serde.serialize_model(model))
