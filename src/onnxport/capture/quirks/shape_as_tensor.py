"""``torch._shape_as_tensor`` (``torch.onnx.operators.shape_as_tensor``: code written for the
TorchScript exporter) as a stack of its sizes while torch.export runs the model: its kernel
makes a tensor of the sizes, which a fake tensor with symbolic ones cannot (non-strict
torch.export failed), and strict torch.export returned the sizes themselves, so that the file
had one output per axis where the model returns one tensor."""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch


@contextlib.contextmanager
def shape_as_tensor_stacked() -> Iterator[None]:
    original = torch._shape_as_tensor

    def shape_as_tensor(x):
        if not isinstance(x, torch.Tensor):
            return original(x)
        if x.dim() == 0:
            return torch.zeros(0, dtype=torch.int64, device=x.device)
        return torch.stack([torch.scalar_tensor(size, dtype=torch.int64, device=x.device)
                            for size in x.shape])

    torch._shape_as_tensor = shape_as_tensor
    try:
        yield
    finally:
        torch._shape_as_tensor = original
