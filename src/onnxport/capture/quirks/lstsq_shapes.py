"""A fake kernel for ``linalg_lstsq`` while torch.export traces: torch tags the op as having
data-dependent output shapes (gelss/gelsd return residuals only for full-rank inputs), so its
capture fails for every driver, though with the others every output's shape is static."""

from __future__ import annotations

import contextlib

import torch
from torch._subclasses.fake_tensor import DynamicOutputShapeException

from onnxport.capture.quirks.fake_kernels import fake_kernels


def _lstsq_shapes(A, B, rcond=None, *, driver=None):
    """Empty outputs of the shapes eager ``linalg_lstsq`` returns for ``driver``."""
    rows, columns = A.shape[-2], A.shape[-1]
    vector = B.dim() == A.dim() - 1
    batch = torch.broadcast_shapes(A.shape[:-2], B.shape[:-1] if vector else B.shape[:-2])
    driver = driver or ("gelsy" if A.device.type == "cpu" else "gels")
    right = 1 if vector else B.shape[-1]
    solution = A.new_empty((*batch, columns) if vector else (*batch, columns, right))
    if driver in ("gelss", "gelsd") and rows > columns:
        # Residuals exist only when every matrix is full-rank: a property of the data.
        raise DynamicOutputShapeException(torch.ops.aten.linalg_lstsq.default)
    has_residuals = rows > columns and driver == "gels"
    residuals = A.new_empty((*batch, right) if has_residuals else (0,))
    rank = A.new_empty((0,) if driver == "gels" else batch, dtype=torch.int64)
    singular = A.new_empty((*batch, min(rows, columns)) if driver in ("gelss", "gelsd")
                           else (0,))
    return solution, residuals, rank, singular


def static_lstsq_shapes() -> contextlib.AbstractContextManager:
    """While active, fake calls of ``linalg_lstsq`` get the kernel above."""
    return fake_kernels({"aten::linalg_lstsq": _lstsq_shapes})
