"""The mode (train or eval) a model is exported in: ``export(training=...)``,
``select_model_mode_for_export`` and torch.onnx 1.x's ``set_training``."""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from onnxport.compat.enums import TrainingMode


def module_modes(model: Any) -> list[tuple[torch.nn.Module, bool]]:
    """Each module's own ``training`` flag, to be put back after the export."""
    if not isinstance(model, torch.nn.Module):
        return []
    # (a frozen ScriptModule, torch.jit.freeze's, has no flag: its mode is eval for good)
    return [(module, module.training) for module in model.modules()
            if isinstance(getattr(module, "training", None), bool)]


def restore_module_modes(modes: list[tuple[torch.nn.Module, bool]]) -> None:
    for module, training in modes:
        module.training = training


def set_module_mode(model: Any, mode: TrainingMode) -> None:
    """EVAL: eval mode; TRAINING: train mode (dropout drops, batch norm uses the batch's
    statistics); PRESERVE: as the model is."""
    if not isinstance(model, torch.nn.Module) or mode == TrainingMode.PRESERVE:
        return
    if not isinstance(getattr(model, "training", None), bool):  # frozen: eval for good
        if mode == TrainingMode.TRAINING:
            from onnxport.errors import InvalidExportOptionsError

            raise InvalidExportOptionsError(
                "training=TrainingMode.TRAINING for a frozen ScriptModule (torch.jit.freeze), "
                "which froze its eval mode: export the module before freezing it, or with "
                "training=TrainingMode.EVAL")
        return
    model.train(mode == TrainingMode.TRAINING)


@contextlib.contextmanager
def select_model_mode_for_export(model: Any, mode: TrainingMode):
    """Inside the block, ``model`` is in the mode ``mode`` asks for; after it, as it was."""
    from onnxport._arguments import check_training

    mode = check_training(mode)
    modes = module_modes(model)
    set_module_mode(model, mode)
    try:
        yield
    finally:
        restore_module_modes(modes)


@contextlib.contextmanager
def set_training(model: Any, mode: Any):
    """torch.onnx 1.x: ``model`` in training mode ``mode`` (a bool) inside the block; None
    leaves it as it is."""
    if mode is None:
        yield
        return
    modes = module_modes(model)
    if isinstance(model, torch.nn.Module):
        model.train(bool(mode))
    try:
        yield
    finally:
        restore_module_modes(modes)
