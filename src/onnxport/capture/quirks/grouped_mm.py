"""``aten::_grouped_mm`` on fake tensors: transformers' mixture-of-experts layers (Mixtral,
Qwen2-MoE...) multiply each expert's rows with ``torch.nn.functional.grouped_mm``, which the
CPU runs in float32, but whose meta kernel follows CUDA's rule and refuses anything but
bfloat16 and float16. While capture runs, its fake kernel gives the result's shape alone, by
the op's layouts (the meta kernel's)."""

from __future__ import annotations

import contextlib

from onnxport.capture.quirks.fake_kernels import fake_kernels


def _grouped_mm_shape(mat_a, mat_b, offs=None, bias=None, out_dtype=None):
    if mat_a.dim() == 2 and mat_b.dim() == 2:  # groups along K: one [M, N] per group
        size = (offs.shape[0], mat_a.shape[0], mat_b.shape[1])
    elif mat_a.dim() == 2:  # rows grouped over experts [E, K, N]
        size = (mat_a.shape[0], mat_b.shape[-1])
    elif mat_b.dim() == 2:  # [E, M, K] times columns grouped along N
        size = (mat_a.shape[1], mat_b.shape[1])
    else:  # a batched product
        size = (mat_a.shape[0], mat_a.shape[1], mat_b.shape[-1])
    return mat_a.new_empty(size, dtype=out_dtype or mat_a.dtype)


def grouped_mm_of_any_float() -> contextlib.AbstractContextManager:
    """While active, ``aten::_grouped_mm`` runs on fake tensors of any floating dtype."""
    return fake_kernels({"aten::_grouped_mm": _grouped_mm_shape})
