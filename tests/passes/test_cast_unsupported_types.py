"""CastUnsupportedTypes: an op given a dtype its schema lacks at the model's opset computes in
float32 between Casts, and the model becomes valid; ops that accept the dtype are untouched."""

import onnx
import torch

import onnxport
from onnxport.passes import CastUnsupportedTypes


def _sin_cos(x):
    return torch.sin(x) + torch.cos(x).relu()


def test_bfloat16_sin_before_opset_22_is_widened_and_valid():
    x = torch.randn(3, 4).bfloat16()
    program = onnxport.export(_sin_cos, (x,), opset_version=18)
    types = [node.op_type for node in program.model.graph]
    # Sin and Cos take bfloat16 from opset 22 only; Relu and Add take it at 18.
    assert types.count("Cast") == 4, types
    onnx.checker.check_model(program.model_proto, full_check=True)
    assert not CastUnsupportedTypes()(program.model).modified  # a fixed point


def test_nothing_changes_where_the_schema_accepts_the_dtype():
    for x, opset in ((torch.randn(3, 4).bfloat16(), 22), (torch.randn(3, 4).half(), 18)):
        program = onnxport.export(_sin_cos, (x,), opset_version=opset)
        assert "Cast" not in [node.op_type for node in program.model.graph]
        onnx.checker.check_model(program.model_proto, full_check=True)
