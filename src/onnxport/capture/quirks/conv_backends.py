"""The fake convolution picks the CPU backend that eager would (for the result's memory format),
and that choice reads the batch size (NNPACK from a batch of 16): on fake tensors a guard on a
dynamic batch, which bounded it to 15 on the TorchScript path, so the bound's checks ran
resnet18 at batches of 16 and 31 (seconds of an export). The choice changes no value; it is
made at the example's sizes without recording a guard."""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch
from torch._guards import detect_fake_mode


@contextlib.contextmanager
def backend_choice_without_guards() -> Iterator[None]:
    original = torch._C._select_conv_backend

    def select(*args, **kwargs):
        mode = detect_fake_mode((args, kwargs))
        shape_env = mode.shape_env if mode is not None else None
        with shape_env.suppress_guards() if shape_env is not None else contextlib.nullcontext():
            return original(*args, **kwargs)

    torch._C._select_conv_backend = select
    try:
        yield
    finally:
        torch._C._select_conv_backend = original
