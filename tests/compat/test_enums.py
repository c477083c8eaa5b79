"""The ``OperatorExportTypes`` and ``TrainingMode`` enums (compat/enums.py), checked against
torch.onnx's own (which the tests, never the product, may call)."""

import pytest
import torch

import onnxport


def _check(program, model, *inputs):
    (actual,) = program(*inputs)
    torch.testing.assert_close(actual, model(*inputs), rtol=1e-3, atol=1e-4)


def test_export_enums_match_torch_onnx():
    for ours, theirs in ((onnxport.OperatorExportTypes, torch.onnx.OperatorExportTypes),
                         (onnxport.TrainingMode, torch.onnx.TrainingMode)):
        for member in ours:
            assert int(member) == int(getattr(theirs, member.name))
            assert str(member) == str(getattr(theirs, member.name))


def test_export_accepts_the_default_enum_values():
    model = torch.nn.Linear(3, 2)
    x = torch.randn(2, 3)
    program = onnxport.export(model, (x,), training=onnxport.TrainingMode.EVAL,
                              operator_export_type=onnxport.OperatorExportTypes.ONNX)
    _check(program, model, x)
    # torch.onnx's own enum members are taken too; anything else is refused, not ignored.
    program = onnxport.export(model, (x,), training=torch.onnx.TrainingMode.EVAL,
                              operator_export_type=torch.onnx.OperatorExportTypes.ONNX)
    _check(program, model, x)
    with pytest.raises(onnxport.InvalidExportOptionsError, match="training"):
        onnxport.export(model, (x,), training="train")
    with pytest.raises(onnxport.InvalidExportOptionsError, match="operator_export_type"):
        onnxport.export(model, (x,), operator_export_type=1)
