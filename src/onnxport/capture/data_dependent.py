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
    if input.dim() > 2 or input.dtype == torch.bool:
        return NotImplemented  # torch says what is wrong
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
    if c is NotImplemented:
        return c
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


def _ctc_loss(original, log_probs, targets, input_lengths, target_lengths, blank=0,
              reduction="mean", zero_infinity=False):
    # torch's kernel sizes its alphas by the longest target, read from the values. Here the
    # forward recursion runs over the padded extended targets (blank, l1, blank, l2, ...,
    # blank), one time step after the other, each batch item frozen past its input length.
    if reduction not in ("none", "mean", "sum") or log_probs.dim() not in (2, 3):
        return NotImplemented
    unbatched = log_probs.dim() == 2
    if unbatched:
        log_probs = log_probs.unsqueeze(1)
        targets = targets.unsqueeze(0) if targets.dim() == 1 else targets
    steps, batch = log_probs.shape[0], log_probs.shape[1]
    device = log_probs.device
    input_lengths = torch.as_tensor(input_lengths, device=device).reshape(-1).long()
    target_lengths = torch.as_tensor(target_lengths, device=device).reshape(-1).long()
    if unbatched or targets.dim() == 2:
        padded = targets.reshape(batch, -1).long()
    else:  # concatenated targets: item n's start at the sum of the lengths before it
        longest = targets.shape[0]
        starts = torch.cumsum(target_lengths, 0) - target_lengths
        positions = (starts.unsqueeze(1) + torch.arange(longest, device=device)).clamp(
            max=max(longest - 1, 0))
        padded = targets.long()[positions] if longest else targets.long().reshape(batch, 0)
    length = padded.shape[1]
    labels = torch.full((batch, 2 * length + 1), blank, dtype=torch.long, device=device)
    labels[:, 1::2] = padded
    labels = labels.clamp(0, log_probs.shape[2] - 1)
    # A label (odd position past the first) may be reached from two back unless it repeats
    # the label there.
    skip = torch.zeros_like(labels, dtype=torch.bool)
    skip[:, 3::2] = labels[:, 3::2] != labels[:, 1:-2:2]
    minus_inf = torch.tensor(float("-inf"), dtype=log_probs.dtype, device=device)
    emitted = log_probs.gather(2, labels.unsqueeze(0).expand(steps, -1, -1))  # [T, N, 2L+1]
    index = torch.arange(2 * length + 1, device=device)
    alpha = torch.where(index <= 1, emitted[0], minus_inf)
    alpha = torch.where((index == 1) & (target_lengths.unsqueeze(1) == 0), minus_inf, alpha)
    for t in range(1, steps):
        previous = torch.cat([minus_inf.expand(batch, 1), alpha[:, :-1]], 1)
        before = torch.cat([minus_inf.expand(batch, 2), alpha[:, :-2]], 1)
        before = torch.where(skip, before, minus_inf)
        terms = torch.stack([alpha, previous, before])
        top = terms.amax(0)
        top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
        total = torch.log(torch.exp(terms - top).sum(0)) + top + emitted[t]
        alpha = torch.where((t < input_lengths).unsqueeze(1), total, alpha)
    last = (2 * target_lengths).unsqueeze(1)
    ends = torch.stack([alpha.gather(1, last).squeeze(1), torch.where(
        target_lengths > 0, alpha.gather(1, (last - 1).clamp(min=0)).squeeze(1), minus_inf)])
    top = ends.amax(0)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    loss = -(torch.log(torch.exp(ends - top).sum(0)) + top)
    if zero_infinity:
        loss = torch.where(torch.isinf(loss), torch.zeros_like(loss), loss)
    if reduction == "mean":
        return (loss / target_lengths.clamp(min=1).to(loss.dtype)).mean()
    if reduction == "sum":
        return loss.sum()
    return loss.squeeze(0) if unbatched else loss


def _functions() -> dict:
    functional = torch.nn.functional
    rewrites = {torch.narrow: _narrow, torch.Tensor.narrow: _narrow,
                functional.one_hot: _one_hot,
                torch.tensor_split: _tensor_split, torch.Tensor.tensor_split: _tensor_split,
                torch.cov: _cov, torch.Tensor.cov: _cov,
                torch.corrcoef: _corrcoef, torch.Tensor.corrcoef: _corrcoef,
                functional.gaussian_nll_loss: _gaussian_nll_loss, functional.ctc_loss: _ctc_loss}
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
