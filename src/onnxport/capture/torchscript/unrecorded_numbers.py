"""Numbers the TorchScript tracer takes without recording them: while tracing, a size read is a
0-d tensor, and so is a number computed from it; most ops that want a Python number record it
as a graph value, some keep the example's number silently (:class:`UnrecordedNumbers`)."""

from __future__ import annotations

import contextlib
import sys
import warnings

import torch
import torch.utils._pytree as pytree

from onnxport.capture.specialization import is_model_frame


class UnrecordedNumbers(torch.overrides.TorchFunctionMode):
    """While tracing, a size read is a 0-d tensor, and so is a number computed from it; an op
    that takes it where it wants a Python number records it as a value (``narrow``,
    ``view``), or, for some (``x.roll(x.size(1) // 2, 1)``), as the example's constant
    without a warning, which then holds at that size only. Warn (as the tracer does for
    ``int(t)``) at the model's line where a call takes a traced 0-d tensor and its graph value
    gains no use: the dims asked to be dynamic are then checked at other sizes."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.__bool__ and sys._getframe(1).f_code is torch._assert.__code__:
            # torch._assert's check (torchvision's ``boxes.size(1) == 5``), which the trace
            # keeps passed and which changes no value: its warning fixed every dynamic axis.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", torch.jit.TracerWarning)
                return func(*args, **kwargs)
        if func in _ROLLS and torch._C._get_tracing_state() is not None and \
                (rolled := _traced_roll(*args, **kwargs)) is not None:
            return rolled
        traced = []
        if torch._C._get_tracing_state() is not None and \
                getattr(func, "__name__", None) not in _READS:
            for leaf in pytree.tree_leaves((args, kwargs)):
                if isinstance(leaf, torch.Tensor) and leaf.dim() == 0:
                    with contextlib.suppress(RuntimeError):
                        value = torch._C._get_value_trace(leaf)
                        traced.append((value, len(value.uses())))
        result = func(*args, **kwargs)
        if any(len(value.uses()) == uses for value, uses in traced) and \
                any(isinstance(leaf, torch.Tensor) for leaf in pytree.tree_leaves(result)):
            filename, line = _model_line()
            warnings.warn_explicit(
                f"{getattr(func, '__name__', func)} took a traced number (a size or a value "
                f"computed from one) as a Python number, which the trace keeps as this "
                f"example's constant", torch.jit.TracerWarning, filename, line)
        return result


# Calls on a 0-d tensor that record nothing and fix nothing (its metadata) or that the tracer
# warns of itself (int(t), bool(t), t.item()).
_READS = frozenset(["__get__", "dim", "size", "numel", "is_floating_point", "is_complex",
                    "__bool__", "__int__", "__float__", "__index__", "item", "tolist",
                    "__format__", "__repr__", "__str__", "__len__"])


_ROLLS = frozenset([torch.roll, torch.Tensor.roll])


def _traced_roll(x, shifts, dims=()) -> torch.Tensor | None:
    """``x.roll(shifts, dims)`` where a shift is a traced number (``x.roll(x.size(1) // 2,
    1)``), as a gather of each dim's positions shifted, which records the shift where roll
    kept the example's. None for any other roll (each dim named, shifts of known numbers)."""
    shifts = list(shifts) if isinstance(shifts, (list, tuple)) else [shifts]
    dims = list(dims) if isinstance(dims, (list, tuple)) else [dims]
    if not any(isinstance(s, torch.Tensor) for s in shifts) or len(dims) != len(shifts):
        return None
    for shift, dim in zip(shifts, dims):
        # out[i] = x[(i - shift) mod n] (an empty dim's n is taken as 1: ONNX Runtime
        # refuses a remainder of 0 even of no element)
        n = x.size(dim)
        positions = torch.arange(n, device=x.device)
        n = torch.clamp(n, min=1) if isinstance(n, torch.Tensor) else max(n, 1)
        x = x.index_select(dim, torch.remainder(positions - shift, n))
    return x


def _model_line() -> tuple[str, int]:
    """The file and line of the innermost frame of model code (:func:`is_model_frame`)."""
    frame = sys._getframe(1)
    while frame is not None and not is_model_frame(frame.f_code.co_filename):
        frame = frame.f_back
    return (frame.f_code.co_filename, frame.f_lineno) if frame is not None else ("?", 0)
