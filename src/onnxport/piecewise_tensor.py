"""PiecewiseTensor: a weight that passes compute from other weights (a transposed or rescaled
copy) and that is written to the file a slice at a time, so no whole copy is ever held."""

from __future__ import annotations

from typing import Callable

import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import TorchTensor

# Bytes computed at once when the tensor is written: small next to any weight worth streaming.
_PIECE_BYTES = 1 << 20


class PiecewiseTensor(ir.LazyTensor):
    """``compute(rows)`` gives the tensor's slice ``rows`` of its first axis. Reading the whole
    tensor (``numpy()``, ``tobytes()``) computes it at once; ``tofile`` writes it in pieces."""

    def __init__(self, compute: Callable[[slice], torch.Tensor], *, dtype: ir.DataType,
                 shape: ir.Shape, name: str):
        super().__init__(lambda: TorchTensor(compute(slice(None)).contiguous()),
                         dtype=dtype, shape=shape, name=name)
        self._compute = compute

    def tofile(self, file) -> None:
        rows = self.shape[0] if len(self.shape) else 0
        if rows == 0:
            super().tofile(file)
            return
        step = max(1, _PIECE_BYTES // max(1, self.nbytes // rows))
        for start in range(0, rows, step):
            TorchTensor(self._compute(slice(start, start + step)).contiguous()).tofile(file)
