"""Ops whose implementation torch.export cannot trace because it reads data (a tensor where an
int is meant, a size or a check read from the values), or that reach custom ops no graph can
call: while torch.export traces (non-strict), their calls take an equivalent formulation."""

from __future__ import annotations

import math

import torch
from torch.overrides import TorchFunctionMode

from onnxport.errors import CaptureError


def _narrow(original, input, dim, start, length):
    if not isinstance(start, torch.Tensor):
        return NotImplemented
    # torch's kernel reads start.item() into a size it then loses track of
    # (PendingUnbackedSymbolNotFound); read here, the size stays in the graph.
    return original(input, dim, start.item(), length)


def _one_hot(original, input, num_classes=-1):
    if num_classes != -1:
        return NotImplemented
    # The class count read from the values cannot be one_hot's int argument; a comparison
    # with a range of that symbolic size captures it.
    count = input.max().item() + 1
    torch._check(count >= 1)
    classes = torch.arange(count, device=input.device, dtype=input.dtype)
    return (input.unsqueeze(-1) == classes).to(torch.int64)


def _tensor_split(original, input, indices_or_sections, dim=0):
    if isinstance(indices_or_sections, torch.Tensor) and indices_or_sections.dim() == 0:
        raise CaptureError(
            "tensor_split with the number of sections in a 0-d tensor: the number of outputs "
            "would depend on the tensor's value, and an ONNX graph has a fixed number of "
            "outputs; pass the number of sections as an int")
    return NotImplemented


def _cov(original, input, correction=1, fweights=None, aweights=None):
    # torch's kernel checks the weights and the degrees of freedom on their values; here the
    # checks of invalid weights are left out and a non-positive normalization becomes 0
    # (what torch does after its warning) in the graph.
    x = input.reshape(1, -1) if input.dim() < 2 else input
    count = x.shape[1]
    weights = fweights
    if aweights is not None:
        weights = aweights if weights is None else weights * aweights
    if weights is None:
        mean = x.sum(1) / count
        norm = max(count - correction, 0)
    else:
        total = weights.sum()
        mean = (x * weights).sum(1) / total
        if correction == 0:
            norm = total
        elif aweights is None:
            norm = total - correction
        elif fweights is None and count == 1 and correction == 1:
            norm = torch.zeros((), dtype=torch.int64)
        else:
            norm = total - correction * (weights * aweights).sum() / total
        norm = torch.where(norm <= 0, torch.zeros_like(norm), norm)
    if count == 1 and (fweights is None) != (aweights is None):
        # One observation and one kind of weights: torch zeroes the centered values outright.
        centered = torch.zeros_like(x, dtype=x.dtype if x.is_floating_point()
                                    else torch.get_default_dtype())
    else:
        centered = x - mean.unsqueeze(1)
    weighted = centered if weights is None else centered * weights
    return torch.true_divide(torch.mm(centered, weighted.t().conj()), norm).squeeze()


def _corrcoef(original, input):
    c = _cov(None, input)
    if c.dim() == 0:
        return c / c
    deviation = torch.sqrt(c.diagonal())
    c = c / deviation.view(-1, 1) / deviation.view(1, -1)
    return c.clip(-1, 1)




def _gaussian_nll_loss(original, input, target, var, full=False, eps=1e-6, reduction="mean"):
    if not isinstance(var, torch.Tensor) or reduction not in ("none", "mean", "sum"):
        return NotImplemented
    # As torch's, without its check that no variance is negative (a branch on the values).
    if var.shape != input.shape:
        if var.shape == input.shape[:-1]:
            var = var.unsqueeze(-1)
        elif var.dim() != input.dim() or sum(
                v for i, v in zip(input.shape, var.shape) if i != v) != 1:
            return NotImplemented  # torch says what is wrong with the size
    var = var.clamp(min=eps)
    loss = 0.5 * (torch.log(var) + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


def _linear_cross_entropy(original, input, linear_weight, target, **kwargs):
    if kwargs.get("options") is None:
        return NotImplemented
    # The options choose how torch computes the loss (batch chunks, to save memory), through
    # custom ops no graph can call; the graph computes the unchunked loss, the same value.
    return original(input, linear_weight, target, **{**kwargs, "options": None})


def _functions() -> dict:
    functional = torch.nn.functional
    rewrites = {torch.narrow: _narrow, torch.Tensor.narrow: _narrow,
                functional.one_hot: _one_hot,
                torch.tensor_split: _tensor_split, torch.Tensor.tensor_split: _tensor_split,
                torch.cov: _cov, torch.Tensor.cov: _cov,
                torch.corrcoef: _corrcoef, torch.Tensor.corrcoef: _corrcoef,
                functional.gaussian_nll_loss: _gaussian_nll_loss}
    if hasattr(functional, "linear_cross_entropy"):  # torch >= 2.12
        rewrites[functional.linear_cross_entropy] = _linear_cross_entropy
    return rewrites


class DataDependentArguments(TorchFunctionMode):
    """The rewrites above, active around a non-strict torch.export call."""

    def __init__(self):
        super().__init__()
        self.rewrites = _functions()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        rewrite = self.rewrites.get(func)
        if rewrite is not None:
            result = rewrite(func, *args, **kwargs)
            if result is not NotImplemented:
                return result
        return func(*args, **kwargs)
