"""F.max_unpool1d/2d/3d's check of the output size (``_check_unpool_output_size``) skipped
while the tracer runs the model: under the tracer the sizes are traced values, and the check's
``torch._check`` refuses a tensor for its condition, so tracing any model that unpools failed
(torch.onnx's TorchScript exporter fails there too). The check holds on the example, which
PyTorch ran before capture; the graph computes the sizes, not the check."""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch.nn.functional as F


@contextlib.contextmanager
def unpool_output_size_unchecked() -> Iterator[None]:
    original = getattr(F, "_check_unpool_output_size", None)
    if original is None:  # (a torch without the check)
        yield
        return
    F._check_unpool_output_size = lambda *args, **kwargs: None
    try:
        yield
    finally:
        F._check_unpool_output_size = original
