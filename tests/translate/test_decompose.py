"""Selective decomposition: ops without a translation are decomposed one node at a time, and
ops with one are left whole."""

import torch

import onnxport
from onnxport.translate.registry import default_registry


def test_op_without_translation_is_decomposed_in_place():
    def f(x, y, z):
        return torch.addcmul(x, y, z, value=0.5) + torch.lerp(x, y, 0.3)

    registry = default_registry()
    assert not registry.is_registered("aten::addcmul")
    assert not registry.is_registered("aten::lerp")
    args = (torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4))
    program = onnxport.export(f, args)
    torch.testing.assert_close(program(*args)[0], f(*args), rtol=1e-3, atol=1e-4)
    origins = {n.metadata_props.get("onnxport.decomposed_from") for n in program.model.graph}
    assert {"aten::addcmul", "aten::lerp.Scalar"} <= origins, origins


def test_decomposition_with_dynamic_shapes():
    def f(x):
        return torch.nn.functional.glu(x, dim=-1) + torch.nn.functional.hardshrink(x[..., :2], 0.3)

    x = torch.randn(3, 4)
    program = onnxport.export(f, (x,), dynamic_shapes={"x": {0: torch.export.Dim("n")}})
    x5 = torch.randn(5, 4)
    torch.testing.assert_close(program(x5)[0], f(x5), rtol=1e-3, atol=1e-4)


def test_known_ops_are_not_decomposed():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4), torch.nn.GELU())
    x = torch.randn(2, 4)
    program = onnxport.export(model, (x,), opset_version=20)
    assert [n.op_type for n in program.model.graph] == ["Gemm", "LayerNormalization", "Gelu"]
    torch.testing.assert_close(program(x)[0], model(x), rtol=1e-3, atol=1e-4)
