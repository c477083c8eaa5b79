"""max_pool1d run as max_pool2d over an axis of one: torch's own max_pool1d (a composite of ATen
ops) reads the input's length as a number, so a dynamic length became the example's, static,
on both paths (torch.export specializes it; the tracer's replay too), where max_pool2d
computes its output size from symbols. The values are the same: each window's maximum."""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch


def _single(value, default):
    """An int[1] argument (an int, a one-item list or tuple, or empty) as its one int."""
    if isinstance(value, (list, tuple)):
        return value[0] if value else default
    return value


@contextlib.contextmanager
def max_pool1d_as_2d() -> Iterator[None]:
    original = torch.max_pool1d

    def max_pool1d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
        if not isinstance(input, torch.Tensor) or input.dim() not in (2, 3):
            return original(input, kernel_size, stride, padding, dilation, ceil_mode)
        kernel = _single(kernel_size, None)
        pooled = torch.max_pool2d(
            input.unsqueeze(-2), (1, kernel), (1, _single(stride, kernel)),
            (0, _single(padding, 0)), (1, _single(dilation, 1)), ceil_mode)
        return pooled.squeeze(-2)

    torch.max_pool1d = max_pool1d
    try:
        yield
    finally:
        torch.max_pool1d = original
