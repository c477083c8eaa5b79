"""Fake kernels for the fake-quantize family (quantization-aware training's observers): torch
registers none (``aten::fake_quantize_per_tensor_affine_cachemask`` and the others raise
UnsupportedOperatorException on fake tensors), so a QAT model with a dynamic axis failed on
every path; with static shapes only the trace's recorded types carried it. Each output has the
input's shape; the masks are bool."""

from __future__ import annotations

import contextlib

from onnxport.capture.quirks.fake_kernels import fake_kernels


def _output_and_mask(self, *args, **kwargs):
    import torch

    return torch.empty_like(self), torch.empty_like(self, dtype=torch.bool)


def _output(self, *args, **kwargs):
    import torch

    return torch.empty_like(self)


_KERNELS = {
    "aten::fake_quantize_per_tensor_affine_cachemask": _output_and_mask,
    "aten::_fake_quantize_per_tensor_affine_cachemask_tensor_qparams": _output_and_mask,
    "aten::fake_quantize_per_channel_affine_cachemask": _output_and_mask,
    "aten::_fake_quantize_learnable_per_tensor_affine": _output,
    "aten::_fake_quantize_learnable_per_channel_affine": _output,
}


def fake_quantize_shapes() -> contextlib.AbstractContextManager:
    """While active, the fake-quantize ops run on fake tensors (their input's shape)."""
    return fake_kernels(_KERNELS)
