"""float16 and bfloat16 models: float16 ones run in ONNX Runtime on the CPU; bfloat16 ones (ONNX
Runtime's CPU has no bfloat16 Gemm, MatMul or Conv kernels) pass the full checker and run in
onnx's reference evaluator. Both are compared with eager in float32 on the same weights."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
import torch
from onnx.reference import ReferenceEvaluator

import onnxport
from op_check import op_types


def _float32_reference(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Eager in float32 on the (already rounded) low-precision weights and input: the exact
    result the low-precision graph approximates."""
    import copy

    with torch.no_grad():
        return copy.deepcopy(model).float()(x.float())


def _reference_run(program, x: torch.Tensor) -> torch.Tensor:
    """The model in onnx's reference evaluator; bfloat16 travels as ml_dtypes' bfloat16."""
    proto = program.model_proto
    feed = x.view(torch.int16).numpy().view(ml_dtypes.bfloat16) \
        if x.dtype == torch.bfloat16 else x.numpy()
    out = ReferenceEvaluator(proto).run(None, {proto.graph.input[0].name: feed})[0]
    return torch.from_numpy(np.asarray(out, dtype=np.float32))


def _transformer_layer():
    torch.manual_seed(0)
    return torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, dropout=0.0).eval()


def _conv_net():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.AvgPool2d(2), torch.nn.Flatten(), torch.nn.Linear(8 * 3 * 3, 4),
        torch.nn.Softmax(-1)).eval()


def test_float16_resnet18_in_onnx_runtime():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval().half()
    x = torch.randn(1, 3, 64, 64).half()
    program = onnxport.export(model, (x,))
    onnx.checker.check_model(program.model_proto, full_check=True)
    actual = program(x)[0]
    assert actual.dtype == torch.float16
    expected = _float32_reference(model, x)
    # float16 keeps 11 significant bits (relative step 2^-11 ~ 5e-4); ORT and eager round
    # differently inside 20 layers (eager's CPU kernels accumulate in float32): a few steps of
    # the output's magnitude. Measured: 1.1e-3 at |y| <= 2.
    torch.testing.assert_close(actual.float(), expected, rtol=0,
                               atol=5e-3 * float(expected.abs().max()))


def test_float16_transformer_layer_in_onnx_runtime():
    model = _transformer_layer().half()
    x = torch.randn(2, 5, 32).half()
    program = onnxport.export(model, (x,))
    actual = program(x)[0]
    expected = _float32_reference(model, x)
    # As above; layer norm at the end brings |y| to ~3. Measured: 1.6e-3.
    torch.testing.assert_close(actual.float(), expected, rtol=0, atol=1e-2)


@pytest.mark.parametrize("make, atol", [
    # bfloat16 keeps 8 significant bits (relative step 2^-8 ~ 4e-3): each rounding of an
    # intermediate moves it by up to that much. Measured: 1.1e-3 (conv net, |y| <= 1) and
    # 2.4e-2 (transformer layer, |y| ~ 3).
    (_conv_net, 1e-2),
    (_transformer_layer, 6e-2),
], ids=["conv_net", "transformer_layer"])
@pytest.mark.parametrize("opset", [18, 22])
def test_bfloat16_model_is_valid_and_matches_reference_evaluator(make, atol, opset):
    model = make().bfloat16()
    x = torch.randn(2, 3, 14, 14) if make is _conv_net else torch.randn(2, 5, 32)
    x = x.bfloat16()
    program = onnxport.export(model, (x,), opset_version=opset)
    # Conv and MaxPool accept bfloat16 from opset 22: before it they compute in float32
    # between Casts (a bfloat16 Conv is invalid ONNX, which the checker and runtimes reject).
    onnx.checker.check_model(program.model_proto, full_check=True)
    if make is _conv_net:
        assert ("Cast" in op_types(program)) == (opset < 22), op_types(program)
    assert program.model_proto.graph.output[0].type.tensor_type.elem_type == \
        onnx.TensorProto.BFLOAT16
    torch.testing.assert_close(_reference_run(program, x), _float32_reference(model, x),
                               rtol=0, atol=atol)

