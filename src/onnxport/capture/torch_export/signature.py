"""The model's forward as torch.export sees it: a plain function wrapped as a module, and the
names of the forward's parameters."""

from __future__ import annotations

import inspect
from typing import Any

import torch


class _FunctionModule(torch.nn.Module):
    """Wraps a plain function so that torch.export can capture it."""

    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, *args, **kwargs):
        return self.function(*args, **kwargs)


def module_for_function(function) -> torch.nn.Module:
    """A module whose forward has ``function``'s signature (torch.export matches dynamic_shapes
    keys against the forward's parameter names)."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return _FunctionModule(function)
    self_parameter = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)

    def forward(self, *args, **kwargs):
        return self.function(*args, **kwargs)

    forward.__signature__ = signature.replace(
        parameters=[self_parameter, *signature.parameters.values()])
    wrapper = type("FunctionModule", (_FunctionModule,), {"forward": forward})
    return wrapper(function)


def parameter_names(model: Any) -> list[str]:
    """The names of ``model``'s forward parameters, for dynamic_axes and input naming."""
    function = model.forward if isinstance(model, torch.nn.Module) else model
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return []
    names = [
        name for name, p in signature.parameters.items()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    if isinstance(model, torch.jit.ScriptModule) and names[:1] == ["self"]:
        names = names[1:]  # a script method's signature lists self
    return names


def var_positional(model: Any) -> tuple[str, int] | None:
    """The name of ``model``'s ``*args`` parameter and how many positional parameters come
    before it, or None when its forward has none."""
    function = model.forward if isinstance(model, torch.nn.Module) else model
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return None
    for position, parameter in enumerate(parameters):
        if parameter.kind is parameter.VAR_POSITIONAL:
            return parameter.name, position
    return None

