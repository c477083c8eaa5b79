"""Fake kernels given to ATen ops while capture runs: torch consults a fake implementation
registered in Python before its own (which refuses some ops, or has none)."""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator


@contextlib.contextmanager
def fake_kernels(kernels: dict[str, Callable]) -> Iterator[None]:
    """While active, each op named in ``kernels`` ("aten::name") runs its function on fake
    tensors."""
    from torch._library import simple_registry
    from torch._library.fake_impl import Kernel

    added = []
    for name, function in kernels.items():
        holder = simple_registry.singleton.find(name).fake_impl
        kernel = Kernel(function, f"onnxport.capture.quirks ({name})")
        holder.kernels.append(kernel)
        added.append((holder, kernel))
    try:
        yield
    finally:
        for holder, kernel in added:
            holder.kernels.remove(kernel)
