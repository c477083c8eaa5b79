"""CastUnsupportedTypes: an op given a dtype its schema lacks at the model's opset computes in
float32 between Casts, and the model becomes valid; ops that accept the dtype are untouched."""

import onnx
import onnx_ir
import torch

import onnxport
from onnxport.passes import CastUnsupportedTypes


def _sin_cos(x):
    return torch.sin(x) + torch.cos(x).relu()


def _trig(program):
    nodes = [node for node in program.model.graph if node.op_type in ("Sin", "Cos")]
    assert len(nodes) == 2
    return nodes


def test_bfloat16_sin_before_opset_22_is_widened_and_valid():
    x = torch.randn(3, 4).bfloat16()
    program = onnxport.export(_sin_cos, (x,), opset_version=18)
    # Sin and Cos take bfloat16 from opset 22 only: they read float32 Casts. (Add is cast too,
    # by the builder, for ONNX Runtime's lack of a bfloat16 Add kernel: not this pass.)
    for node in _trig(program):
        assert node.inputs[0].producer().op_type == "Cast"
        assert node.inputs[0].dtype == onnx_ir.DataType.FLOAT
    onnx.checker.check_model(program.model_proto, full_check=True)
    assert not CastUnsupportedTypes()(program.model).modified  # a fixed point


def test_nothing_changes_where_the_schema_accepts_the_dtype():
    for x, opset in ((torch.randn(3, 4).bfloat16(), 22), (torch.randn(3, 4).half(), 18)):
        program = onnxport.export(_sin_cos, (x,), opset_version=opset)
        given = program.model.graph.inputs[0].dtype
        assert given in (onnx_ir.DataType.BFLOAT16, onnx_ir.DataType.FLOAT16)
        assert [node.inputs[0].dtype for node in _trig(program)] == [given, given]
        onnx.checker.check_model(program.model_proto, full_check=True)
