"""``torch.unique``'s indices on fake tensors: the fake kernel of ``aten::_unique2`` of older
torch (2.11) gives its inverse indices and counts the input's dtype where the op returns
int64, so a float input's inverse was declared float while ONNX Unique computes int64, and
onnx.checker refused the file. Where the installed torch's kernel does so, capture gives the
op a fake kernel with int64 indices; elsewhere torch's own stays."""

from __future__ import annotations

import contextlib
import functools

import torch

from onnxport.capture.quirks.fake_kernels import fake_kernels


def _unique2(self, sorted=True, return_inverse=False, return_counts=False):
    count = torch.library.get_ctx().new_dynamic_size()
    values = self.new_empty((count,))
    inverse = self.new_empty(self.shape if return_inverse else (0,), dtype=torch.int64)
    counts = self.new_empty((count,) if return_counts else (0,), dtype=torch.int64)
    return values, inverse, counts


@functools.cache
def _torch_gives_the_input_dtype() -> bool:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    try:
        with FakeTensorMode(shape_env=ShapeEnv()):
            _, inverse, _ = torch.ops.aten._unique2.default(torch.empty(3), True, True, True)
    except Exception:  # noqa: BLE001 - a kernel that fails differently: torch's own stays
        return False
    return inverse.dtype != torch.int64


def unique_indices_of_int64() -> contextlib.AbstractContextManager:
    """While active, ``aten::_unique2``'s fake indices are int64 (where torch's are not)."""
    if not _torch_gives_the_input_dtype():
        return contextlib.nullcontext()
    return fake_kernels({"aten::_unique2": _unique2})
