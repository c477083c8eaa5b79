"""``JitScalarType`` (compat/jit_scalar_type.py), checked against torch.onnx's own (which the
tests, never the product, may call)."""

import pytest
import torch

from onnxport import JitScalarType
from onnxport.errors import OnnxExporterError


def test_jit_scalar_type_matches_torch_onnx():
    reference = torch.onnx.JitScalarType
    assert [m.name for m in JitScalarType] == [m.name for m in reference]
    for ours in JitScalarType:
        theirs = reference[ours.name]
        assert int(ours) == int(theirs)
        assert ours.scalar_name() == theirs.scalar_name()
        assert ours.onnx_compatible() == theirs.onnx_compatible()
        assert int(ours.onnx_type()) == int(theirs.onnx_type())
        if ours is not JitScalarType.UNDEFINED:
            assert ours.torch_name() == theirs.torch_name()
            assert ours.dtype() == theirs.dtype()
            assert JitScalarType.from_dtype(ours.dtype()) is ours
        assert JitScalarType._from_name(ours.scalar_name()) is ours


def test_jit_scalar_type_from_value():
    assert JitScalarType.from_value(torch.ones(1, dtype=torch.int64)) is JitScalarType.INT64
    assert JitScalarType.from_value(None, JitScalarType.FLOAT) is JitScalarType.FLOAT
    with pytest.raises(OnnxExporterError, match="default"):
        JitScalarType.from_value(None)
    with pytest.raises(OnnxExporterError, match="Unknown dtype"):
        JitScalarType.from_dtype("float32")
