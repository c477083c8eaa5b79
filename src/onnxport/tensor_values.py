"""The one place onnxport reads the values of a tensor: on the CPU, whatever device the model
is on (a weight of a model on a GPU stays there until it is folded or written; on the CPU
nothing is copied). Stages never call ``.numpy()``, ``.cpu()``, ``.item()`` or ``.tolist()``
of a torch tensor themselves; tests/test_tensor_values.py checks that."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import TorchTensor


def on_cpu(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` detached and on the CPU: itself (a view) when it is there already."""
    return tensor.detach().cpu()


def as_numpy(tensor: torch.Tensor) -> np.ndarray:
    """``tensor``'s values as a numpy array (bfloat16 as ml_dtypes' bfloat16)."""
    tensor = on_cpu(tensor)
    if tensor.dtype == torch.bfloat16:
        import ml_dtypes

        return tensor.view(torch.uint16).numpy().view(ml_dtypes.bfloat16)
    return tensor.numpy()


def as_python(tensor: torch.Tensor):
    """A one-element tensor as a Python number, a larger one as a nested list."""
    tensor = on_cpu(tensor)
    return tensor.item() if tensor.numel() == 1 and tensor.dim() == 0 else tensor.tolist()


def torch_values(tensor: ir.TensorProtocol) -> torch.Tensor:
    """An onnx_ir tensor's values as a CPU torch tensor (a weight wrapped from torch: no copy
    on the CPU; from another device: brought over)."""
    if isinstance(tensor, TorchTensor):
        return on_cpu(tensor.raw)
    return torch.from_numpy(tensor.numpy().copy())


def device_of(tensor: ir.TensorProtocol) -> torch.device | None:
    """The device of the torch tensor an onnx_ir tensor wraps, None for other tensors."""
    return tensor.raw.device if isinstance(tensor, TorchTensor) else None


__all__ = ["as_numpy", "as_python", "device_of", "on_cpu", "torch_values"]
