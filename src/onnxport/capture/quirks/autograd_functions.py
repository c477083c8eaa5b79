"""Keeps a ``torch.autograd.Function`` as one call during capture, when its ``symbolic`` (or a
``prim::PythonOp`` registration, or ``operator_export_type``) must see it whole.

Both torch.export and the tracer otherwise record the ops of its ``forward``: while a capture
runs, ``Function.apply`` of such a Function calls ``onnxport::autograd_function`` instead, a
torch.library op whose kernel is the Function's own forward. The op takes the tensor inputs
and the name of a *call* (the Function class and its non-tensor arguments, kept here), and the
translation (``compat/autograd_functions.py``) hands the call, which ``record_calls`` puts on
the node, to the symbolic.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable

import torch

_state = threading.local()


class FunctionCall:
    """One ``apply`` as the op records it: the class, and each argument as ("tensor", k), the
    k-th tensor input, or ("constant", value)."""

    def __init__(self, cls: type, arguments: list[tuple[str, Any]]):
        self.cls = cls
        self.arguments = arguments
        self.single_output: bool | None = None  # known once the forward has run

    def bind(self, tensors: list) -> list:
        return [tensors[a] if kind == "tensor" else a for kind, a in self.arguments]


# The calls seen, by the name the op carries: the same class and constants share one entry.
_CALLS: dict[str, FunctionCall] = {}
_ORIGINAL_DESCRIPTOR = torch.autograd.Function.__dict__["apply"]  # a classmethod (C or Python)


def _ORIGINAL_APPLY(cls, *args, **kwargs):  # noqa: N802
    return _ORIGINAL_DESCRIPTOR.__get__(None, cls)(*args, **kwargs)


# The node meta key of a kept call's FunctionCall: translation reads the call from its node.
CALL_META = "onnxport_autograd_function"


def record_calls(graph_module: torch.fx.GraphModule) -> None:
    """Put on each ``onnxport::autograd_function`` node of a captured graph (subgraphs
    included) its FunctionCall, so that translation needs nothing of this module."""
    for module in graph_module.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            if node.target is torch.ops.onnxport.autograd_function.default:
                node.meta[CALL_META] = _CALLS[node.args[1]]


def _run_forward(call: FunctionCall, tensors: list) -> list[torch.Tensor]:
    inner = getattr(_state, "inside", False)
    _state.inside = True  # a Function the forward applies is inlined into it
    try:
        with torch.no_grad():
            result = _ORIGINAL_APPLY(call.cls, *call.bind(tensors))
    finally:
        _state.inside = inner
    call.single_output = isinstance(result, torch.Tensor)
    results = [result] if call.single_output else list(result)
    if not all(isinstance(r, torch.Tensor) for r in results):
        raise TypeError(f"{call.cls.__qualname__}.forward returned "
                        f"{[type(r).__name__ for r in results]}; only tensors can be exported")
    # A torch.library op's outputs may not alias its inputs.
    return [r.clone() if any(r is t or (r._base is not None and r._base is t) for t in tensors)
            else r for r in results]


@torch.library.custom_op("onnxport::autograd_function", mutates_args=())
def autograd_function(tensors: list[torch.Tensor], call: str) -> list[torch.Tensor]:
    return _run_forward(_CALLS[call], tensors)


@autograd_function.register_fake
def _(tensors, call):
    return _run_forward(_CALLS[call], tensors)


def _apply(cls, *args, **kwargs):
    keep = getattr(_state, "keep", None)
    if keep is None or getattr(_state, "inside", False):
        return _ORIGINAL_APPLY(cls, *args, **kwargs)
    if kwargs or not keep(cls):
        return _inlined(cls, args, kwargs)
    tensors, arguments = [], []
    for arg in args:
        if isinstance(arg, torch.Tensor):
            arguments.append(("tensor", len(tensors)))
            tensors.append(arg)
        elif arg is None or isinstance(arg, (bool, int, float, str, torch.dtype)) or (
                isinstance(arg, (tuple, list)) and all(isinstance(a, (bool, int, float))
                                                       for a in arg)):
            arguments.append(("constant", arg))
        else:  # an argument the op cannot carry (a module, a function): ops of its forward
            return _inlined(cls, args, kwargs)
    if not tensors:
        return _inlined(cls, args, kwargs)
    name = f"{cls.__module__}.{cls.__qualname__}@{id(cls):x}|{arguments!r}"
    call = _CALLS.setdefault(name, FunctionCall(cls, arguments))
    results = torch.ops.onnxport.autograd_function(tensors, name)
    return results[0] if call.single_output else tuple(results)


def _inlined(cls, args: tuple, kwargs: dict):
    """The Function's forward as plain ops. torch.export does this itself; the tracer would
    record one ``prim::PythonOp``, which torch's TorchScript-to-FX converter cannot take."""
    if not torch.jit.is_tracing():
        return _ORIGINAL_APPLY(cls, *args, **kwargs)
    from torch.autograd.function import FunctionCtx, _is_setup_context_defined

    if _is_setup_context_defined(cls.setup_context):
        return cls.forward(*args, **kwargs)  # setup_context only prepares the backward
    ctx = FunctionCtx()
    ctx.needs_input_grad = tuple(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
    return cls.forward(ctx, *args, **kwargs)


@contextlib.contextmanager
def keep_autograd_functions(keep: Callable[[type], bool]):
    """Inside the block, in this thread, ``Function.apply`` of each class for which ``keep``
    is true records one ``onnxport::autograd_function`` call."""
    outer = getattr(_state, "keep", None)
    _state.keep = keep
    # Other threads meanwhile: _apply passes their calls through (exports run one at a time).
    torch.autograd.Function.apply = classmethod(_apply)
    try:
        yield
    finally:
        _state.keep = outer
        if outer is None:
            torch.autograd.Function.apply = _ORIGINAL_DESCRIPTOR
