"""nn.MultiheadAttention and nn.TransformerEncoder/Layer run fused inference kernels
(``_native_multi_head_attention``, ``_transformer_encoder_layer_fwd``, nested tensors) when
gradients are off, which an export under ``torch.no_grad()`` or ``torch.inference_mode()``
is: the tracer records that one call, which has no ONNX translation. While tracing, their
fast path is off (torch.backends.mha), so that the modules run their composed ops as they do
with gradients on."""

from __future__ import annotations

import contextlib
from typing import Iterator

from torch.backends import mha


@contextlib.contextmanager
def fast_path_off() -> Iterator[None]:
    enabled = mha.get_fastpath_enabled()
    mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        mha.set_fastpath_enabled(enabled)
