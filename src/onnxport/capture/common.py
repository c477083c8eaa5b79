"""Helpers that both front ends (capture/torch_export/, capture/torchscript/) use: the
aliases of an FX node, the first lines of an error for a message, a warning at the user's
call, the values of a grown part of an axis, the model's state kept through capture."""

from __future__ import annotations

import operator
import os
import sys
import warnings

import torch


def warn_at_caller(message: str, category: type[Warning]) -> None:
    """Warn at the first frame outside onnxport: the user's export call, however many of our
    own frames (the strategy chain, dynamo_export, fallback) stand between."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame, level = sys._getframe(1), 2  # stacklevel 2 is our caller
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


def aliases(node: torch.fx.Node) -> list[torch.fx.Node]:
    """Every node sharing storage with ``node``: its root base and all views taken from it."""
    root = node
    while is_view(root) and isinstance(root.args[0], torch.fx.Node):
        root = root.args[0]
    found, pending = [], [root]
    while pending:
        current = pending.pop()
        found.append(current)
        pending.extend(user for user in current.users if is_view(user) and user.args and user.args[0] is current)
    return found


def is_view(node: torch.fx.Node) -> bool:
    if node.target is operator.getitem:
        return isinstance(node.args[0], torch.fx.Node) and is_view(node.args[0])
    schema = getattr(node.target, "_schema", None)
    if schema is None or not schema.returns:
        return False
    alias = schema.returns[0].alias_info
    return alias is not None and not alias.is_write


def first_lines(text: str, count: int = 12) -> str:
    lines = text.strip().splitlines()
    return "\n".join(lines[:count]) + ("\n..." if len(lines) > count else "")


def differing_values(tensor: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """``tensor``'s values shuffled, plus one when floating: a grown part of a dynamic axis
    whose values differ from the example's, so that a check tells the axis's parts apart,
    also after a step that takes a shift away (``x - x.max(0)`` of values plus one alone
    would be the example's again). Integer values are kept: they may be indices."""
    if not tensor.is_floating_point():
        return tensor
    order = torch.randperm(tensor.numel(), generator=generator).to(tensor.device)
    return tensor.flatten()[order].reshape(tensor.shape) + 1


def repeated_to(tensor: torch.Tensor, axis: int, size: int) -> torch.Tensor:
    """``tensor`` grown to ``size`` along ``axis`` (of which it has at least one) by repeating
    its values: indices and boxes stay valid, as a torchvision kernel needs."""
    repeats = -(-size // tensor.shape[axis])
    return torch.cat([tensor] * repeats, axis).narrow(axis, 0, size)


def source_line(node: torch._C.Node) -> str:
    """The first line of the model code a TorchScript node was made from ("?" without one)."""
    return (node.sourceRange().splitlines() or ["?"])[0].strip()


def state_kept(model):
    """Put back, after capture, the state that running the model changes: its buffers (a
    training-mode BatchNorm's statistics and counter, which a trace moves) and the weights of
    embeddings with ``max_norm`` (renormalized in place). Other parameters are not copied:
    a model's forward does not write them, and copying would double the export's memory."""
    from onnxport.verification.compare import preserved_state

    module = model if isinstance(model, torch.nn.Module) else None
    return preserved_state(module, _written_by_forward, _with_data)


def _written_by_forward(owner: torch.nn.Module) -> tuple[dict, ...]:
    if isinstance(owner, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and \
            owner.max_norm is not None:
        return owner._buffers, owner._parameters
    return (owner._buffers,)


def _with_data(tensor: torch.Tensor | None) -> bool:
    # (plain tensors only: a fake tensor, made under a fake mode, has no data)
    return type(tensor) in (torch.Tensor, torch.nn.Parameter) and not tensor.is_meta
