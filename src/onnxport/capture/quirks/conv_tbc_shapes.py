"""A fake kernel for ``aten::conv_tbc`` (a 1-d convolution of a time, batch, channel input):
torch's own fails on fake tensors of symbolic sizes, so capture fixed a dynamic time or
batch axis to the example's. Its output is [time + 2 * pad - kernel + 1, batch, out]."""

from __future__ import annotations

import contextlib

from onnxport.capture.quirks.fake_kernels import fake_kernels


def _conv_tbc(self, weight, bias, pad=0):
    time = self.shape[0] + 2 * pad - weight.shape[0] + 1
    return self.new_empty((time, self.shape[1], weight.shape[2]))


def conv_tbc_shapes() -> contextlib.AbstractContextManager:
    """While active, conv_tbc runs on fake tensors of any sizes."""
    return fake_kernels({"aten::conv_tbc": _conv_tbc})
