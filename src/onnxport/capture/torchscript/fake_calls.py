"""One call of the propagated graph run on fake values: its inputs kept from in-place
metadata changes, quantizing ops given float results, and ops whose schema takes plain numbers
where the graph gives symbols (sizes) run so that those symbols stay symbols."""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.utils._pytree as pytree


def fake_call(target: Any, args: tuple, kwargs: dict) -> Any:
    """``target(*args, **kwargs)`` on fake values, as the helpers below need."""
    if target in _ARANGES and (value := _symbolic_arange(target, args, kwargs)) is not None:
        return value
    if _fixes_symbols(target, args, kwargs):
        return _run_on_hints(target, args, kwargs)
    return run_keeping_inputs(target, args, kwargs)


def run_keeping_inputs(target: Any, args: tuple, kwargs: dict) -> Any:
    """``target(*args, **kwargs)`` on fake values, where an op that writes into its first
    argument writes into a new alias of it: an in-place op that changes metadata (squeeze_,
    transpose_, t_, resize_) would otherwise change the value recorded for the node that
    made its argument, and that node was then translated with the new shape ([3] for the
    [1, 3] of ``x.unsqueeze(0)`` before ``squeeze_(0)``: the squeeze was dropped)."""
    schema = getattr(target, "_schema", None)
    if schema is not None and schema.arguments and args and \
            isinstance(args[0], torch.Tensor) and \
            (alias := schema.arguments[0].alias_info) is not None and alias.is_write:
        args = (args[0].detach(), *args[1:])
    if target in _QUANTIZING:  # fake tensors have no quantized kind: its integers' shape
        return args[0].new_empty(args[0].shape)
    return target(*args, **kwargs)


# Ops whose quantized result a fake tensor cannot hold; as torch.export's fake run does, the
# result is a float tensor of the input's shape (translation makes it QuantizeLinear's).
_QUANTIZING = {torch.ops.aten.quantize_per_tensor.default,
               torch.ops.aten.quantize_per_tensor.tensor_qparams}


_PLAIN_NUMBERS = {"IntType", "FloatType", "NumberType"}


def _fixes_symbols(target: Any, args: tuple, kwargs: dict) -> bool:
    """Whether ``target``'s schema takes a plain number (``int``, not ``SymInt``) where the
    graph gives a symbol: running it would fix that symbol, a dynamic dim, to the example's
    value (``linspace(0, 1, steps=x.size(0))``, ``hann_window(n)``)."""
    plain = _plain_number_parameters(target)
    if not plain:
        return False
    given = dict(zip((a.name for a in target._schema.arguments), args)) | kwargs
    for name, is_list in plain:
        value = given.get(name)
        values = (value if isinstance(value, (list, tuple)) else []) if is_list else [value]
        if any(isinstance(v, (torch.SymInt, torch.SymFloat)) for v in values):
            return True
    return False


@functools.lru_cache(maxsize=None)  # (per op overload: a model has few)
def _plain_number_parameters(target: Any) -> tuple[tuple[str, bool], ...]:
    """The (name, whether a list) of the parameters of ``target``'s schema that take plain
    numbers or lists of them."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return ()
    found = []
    for argument in schema.arguments:
        kind = argument.real_type.kind()
        is_list = kind == "ListType"
        if is_list:
            kind = argument.real_type.getElementType().kind()
        if kind in _PLAIN_NUMBERS:
            found.append((argument.name, is_list))
    return tuple(found)


_ARANGES = {torch.ops.aten.arange.default, torch.ops.aten.arange.start,
            torch.ops.aten.arange.start_step}


def _symbolic_arange(target: Any, args: tuple, kwargs: dict) -> Any:
    """``arange`` of integer bounds of which some are symbols, with a positive step: its
    length ceil((end - start) / step) as a symbol too. (Run on the symbols' example values,
    the length, which is none of them, was fixed: arange(0, x.size(2), 2) had 3 elements at
    every size.) None for other bounds."""
    names = [argument.name for argument in target._schema.arguments]
    given = dict(zip(names, args)) | kwargs
    start, end, step = given.get("start", 0), given["end"], given.get("step", 1)
    bounds = (start, end, step)
    if not any(isinstance(b, torch.SymInt) for b in bounds) or \
            not all(isinstance(b, (int, torch.SymInt)) for b in bounds) or \
            not isinstance(step, int) or step <= 0:
        return None
    example = _run_on_hints(target, args, kwargs)
    length = torch.sym_max((end - start + step - 1) // step, 0)
    return example.new_empty((length,))


def _run_on_hints(target: Any, args: tuple, kwargs: dict) -> Any:
    """``target``'s fake result where its schema takes plain numbers for symbols: run on the
    symbols' example values, then each result dim equal to one of those values is that symbol
    again (a window of n values has n). A value two symbols share maps back to neither."""
    symbols: dict[int, Any] = {}

    def hint(value):
        if isinstance(value, torch.SymInt) and value.node.has_hint():
            known = symbols.setdefault(value.node.hint, value)
            if known is not None and known.node.expr != value.node.expr:
                symbols[value.node.hint] = None  # ambiguous
            return value.node.hint
        if isinstance(value, torch.SymFloat) and value.node.has_hint():
            return value.node.hint
        return value

    concrete_args, concrete_kwargs = pytree.tree_map(hint, (args, kwargs))
    result = run_keeping_inputs(target, concrete_args, concrete_kwargs)
    if not isinstance(result, torch.Tensor):
        return result
    # (No comparison of a symbol with a number here: it would be a guard fixing the symbol.)
    sizes = [symbols[size] if isinstance(size, int) and symbols.get(size) is not None
             else size for size in result.shape]
    if all(a is b for a, b in zip(sizes, result.shape)):
        return result
    return result.new_empty(sizes)
