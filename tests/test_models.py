"""Every model issue 2 names exports with static and with dynamic batch, runs in ONNX Runtime
and matches PyTorch (fp32: rtol 1e-3, atol 1e-4)."""

from __future__ import annotations

import pytest
import torch

import model_zoo
import onnxport
from onnxport.capture import parameter_names

ALL_MODELS = ["mlp"] + model_zoo.TORCHVISION_MODELS + model_zoo.TRANSFORMERS_MODELS


def assert_matches_eager(program, model, args, kwargs):
    with torch.no_grad():
        expected = model(*args, **kwargs)
    expected = [t for t in torch.utils._pytree.tree_leaves(expected) if isinstance(t, torch.Tensor)]
    actual = program(*args, **kwargs)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("name", ALL_MODELS)
def test_static_shapes(name):
    model, args, kwargs = model_zoo.build(name)
    program = onnxport.export(model, args, kwargs=kwargs)
    assert_matches_eager(program, model, args, kwargs)
    for value in program.model.graph.inputs:
        assert all(isinstance(d, int) for d in value.shape), value


def _resized(name, args, kwargs, batch, sequence):
    """The same inputs at another batch size (and sequence length for the transformers)."""
    def resize(t, key=None):
        if name in model_zoo.TRANSFORMERS_MODELS:
            length = sequence // 2 if key == "decoder_input_ids" else sequence
            if t.dtype == torch.long and key != "attention_mask":
                return torch.randint(0, 100, (batch, length))
            return torch.ones(batch, length, dtype=t.dtype)
        return torch.randn(batch, *t.shape[1:], dtype=t.dtype)

    return tuple(resize(a) for a in args), {k: resize(v, k) for k, v in kwargs.items()}


@pytest.mark.parametrize("name", ALL_MODELS)
def test_dynamic_batch(name):
    model, args, kwargs = model_zoo.build(name)
    axes = model_zoo.dynamic_axes_for(name, args, kwargs, parameter_names(model))
    program = onnxport.export(model, args, kwargs=kwargs, dynamic_axes=axes)
    first = program.model.graph.inputs[0]
    assert first.shape[0] == onnxport_dim("batch"), first
    # Another batch size (and sequence length) than the example the model was captured with.
    new_args, new_kwargs = _resized(name, args, kwargs, batch=3, sequence=11)
    assert_matches_eager(program, model, new_args, new_kwargs)


def onnxport_dim(name):
    import onnx_ir as ir

    return ir.SymbolicDim(name)
