"""``onnxport.operators``: torch.onnx.operators' helpers, which keep a shape as a tensor so that
tracing records it as computed from the input rather than as this run's numbers."""

from __future__ import annotations

import torch


def shape_as_tensor(x: torch.Tensor) -> torch.Tensor:
    """The shape of ``x`` as a 1-D int64 tensor."""
    if torch.jit.is_tracing() or torch.jit.is_scripting():
        return torch._shape_as_tensor(x)
    # torch.export's fake tensors have no data for aten._shape_as_tensor to read: built from
    # the sizes, which it follows.
    if x.dim() == 0:
        return torch.zeros(0, dtype=torch.long)
    return torch.stack([torch.scalar_tensor(size, dtype=torch.long) for size in x.shape])


def reshape_from_tensor_shape(x: torch.Tensor, shape: torch.Tensor) -> torch.Tensor:
    """``x`` reshaped to ``shape``, a 1-D int64 tensor."""
    if torch.jit.is_scripting():
        return torch._reshape_from_tensor(x, shape)
    if torch.jit.is_tracing():
        # Each size as a 0-d tensor: the tracer keeps them computed (as for x.reshape(y, -1));
        # aten._reshape_from_tensor would need the data torch.export's fake tensors lack.
        return x.reshape(tuple(shape.unbind(0)))
    return x.reshape(shape.tolist())


__all__ = ["reshape_from_tensor_shape", "shape_as_tensor"]
