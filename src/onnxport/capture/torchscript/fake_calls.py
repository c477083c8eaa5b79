"""One call of the propagated graph run on fake values: its inputs kept from in-place
metadata changes, quantizing ops given float results, and ops whose schema takes plain numbers
where the graph gives symbols (sizes) run so that those symbols stay symbols."""

from __future__ import annotations

import functools
import math
from typing import Any

import torch
import torch.utils._pytree as pytree


def fake_call(target: Any, args: tuple, kwargs: dict) -> Any:
    """``target(*args, **kwargs)`` on fake values, as the helpers below need."""
    if any(isinstance(a, (torch.SymInt, torch.SymFloat)) for a in args):
        if target in SCALAR_TWINS:
            return SCALAR_TWINS[target](*args)
        if _returns_a_number(target):
            # Run on the example's sizes, its number would be a constant of the file: the
            # graph is left to torch.export, which fixes the sizes it reads, with a warning.
            raise NotImplementedError(f"{target} of a symbolic size has no symbolic form")
    if target in ARANGE_OUTS and isinstance(kwargs.get("out"), torch.Tensor):
        target, kwargs = functional_arange(target, kwargs, kwargs["out"].dtype)
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
    if target in _COVARIANCES:
        return _covariance_shaped(*args)
    if target in SYMBOLIC_TWINS:
        return SYMBOLIC_TWINS[target](*args, **kwargs)
    if _composite(target) and not torch._C._dispatch_tls_is_dispatch_key_included(
            torch._C.DispatchKey.PythonDispatcher):
        # As torch.export runs them: through their Python decompositions, which keep sizes
        # symbolic where the C++ kernel fixes them (a scripted F.pad's aten::pad fixed every
        # dynamic dim of its input).
        from torch._dispatch.python import enable_python_dispatcher

        with enable_python_dispatcher():
            return target(*args, **kwargs)
    return target(*args, **kwargs)


def _float(a: Any) -> Any:
    return torch.sym_float(a)


def _log2(a: Any) -> Any:
    return torch._sym_log2(_float(a))


_LN2 = math.log(2.0)
_aten = torch.ops.aten

# Scripted code's math on sizes (``float(n) ** -0.5``, ``math.sqrt(n)``, ``math.ceil(n / 2)``)
# is ATen's scalar ops, whose schemas take plain numbers: run on the example's sizes, each gave
# a number, which translation took for a constant (the file computed with the example's size
# at every size). Here each gives its result as a symbol, in the kind its schema returns.
SCALAR_TWINS = {
    **{pow_: (lambda a, b: _float(a) ** b) for pow_ in (
        _aten.pow.float, _aten.pow.int, _aten.pow.int_float, _aten.pow.float_int)},
    _aten.sqrt.int: lambda a: torch._sym_sqrt(_float(a)),
    _aten.sqrt.float: lambda a: torch._sym_sqrt(_float(a)),
    _aten.log.int: lambda a: _log2(a) * _LN2,
    _aten.log.float: lambda a: _log2(a) * _LN2,
    _aten.log10.int: lambda a: _log2(a) / math.log2(10.0),
    _aten.log10.float: lambda a: _log2(a) / math.log2(10.0),
    _aten.exp.int: lambda a: 2.0 ** (_float(a) / _LN2),
    _aten.exp.float: lambda a: 2.0 ** (_float(a) / _LN2),
    _aten.ceil.float: math.ceil,
    _aten.floor.float: math.floor,
    _aten.round.float: lambda a: _float(round(a)),
    torch.ops.prim.abs.int: abs,
    torch.ops.prim.abs.float: abs,
    _aten.fabs.float: lambda a: abs(_float(a)),
    _aten.floor.int: lambda a: a,
    _aten.ceil.int: lambda a: a,
    _aten.round.int: _float,
    **{log: (lambda a, b: _log2(a) / _log2(b)) for log in (
        _aten.log.int_int, _aten.log.float_float, _aten.log.int_float, _aten.log.float_int)},
    **{getattr(getattr(_aten, name), kind): (lambda a, f=function: f(_float(a)))
       for name, function in (("sin", torch._sym_sin), ("cos", torch._sym_cos),
                              ("tanh", torch._sym_tanh)) for kind in ("int", "float")},
}


@functools.lru_cache(maxsize=None)
def _returns_a_number(target: Any) -> bool:
    schema = getattr(target, "_schema", None)
    return schema is not None and len(schema.returns) == 1 and \
        schema.returns[0].real_type.kind() in ("IntType", "FloatType", "NumberType", "BoolType")


def _max_pool1d(*args: Any, **kwargs: Any) -> torch.Tensor:
    return torch.ops.aten.max_pool1d_with_indices.default(*args, **kwargs)[0]


def _one_hot(x: torch.Tensor, num_classes: Any = -1) -> torch.Tensor:
    if not isinstance(num_classes, torch.SymInt) and num_classes >= 0:
        return torch.ops.aten.one_hot.default(x, num_classes)
    if not isinstance(num_classes, torch.SymInt):  # -1: the largest index plus one
        num_classes = x.max().item() + 1
    torch._check(num_classes >= 0)
    return (x.unsqueeze(-1) == torch.arange(num_classes, device=x.device)).to(torch.int64)


# Ops whose kernel fixes a dynamic size even through the Python dispatcher, or cannot take a
# size read from a value, each with a call of the same arguments that keeps it symbolic:
# max_pool1d's CPU kernel reads the length as a plain int, its variant with indices has a
# symbolic meta; one_hot's count of classes is a plain int (``F.one_hot(x, n[0])`` of a
# tensor n, or -1 for the largest index plus one), a comparison with a range is not.
SYMBOLIC_TWINS = {torch.ops.aten.max_pool1d.default: _max_pool1d,
                  torch.ops.aten.one_hot.default: _one_hot}


@functools.lru_cache(maxsize=None)  # (per op overload: a model has few)
def _composite(target: Any) -> bool:
    """Whether ``target`` is an ATen op that has no kernel but its composite one."""
    if not isinstance(target, torch._ops.OpOverload):
        return False
    try:
        return target.has_kernel_for_dispatch_key(
            torch._C.DispatchKey.CompositeImplicitAutograd)
    except RuntimeError:  # (not a dispatcher op: aten::sym_size)
        return False


# Their composite kernels test the normalizing factor's value (is it at or below 0?): on fake
# values a data-dependent read, though the result's shape is the rows' count squared.
_COVARIANCES = {torch.ops.aten.cov.default, torch.ops.aten.corrcoef.default}


def _covariance_shaped(x: torch.Tensor, *_: Any, **__: Any) -> torch.Tensor:
    """An empty result shaped as cov's and corrcoef's: [rows, rows], squeezed as torch does."""
    rows = x.shape[0] if x.dim() == 2 else 1
    dtype = x.dtype if x.is_floating_point() or x.is_complex() else \
        torch.get_default_dtype()
    return x.new_empty(() if x.dim() < 2 or rows == 1 else (rows, rows), dtype=dtype)


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
ARANGE_OUTS = {torch.ops.aten.arange.out: torch.ops.aten.arange.default,
               torch.ops.aten.arange.start_out: torch.ops.aten.arange.start_step}


def functional_arange(target: Any, kwargs: dict, dtype: torch.dtype) -> tuple[Any, dict]:
    """``arange(..., out=o)`` (``target`` in ARANGE_OUTS) as the functional arange in ``dtype``
    (o's): resizing o to a length read from a value (``torch.arange(end_tensor, out=o)``)
    would guard on that value, in torch.export and in the fake run alike."""
    return ARANGE_OUTS[target], {**{k: v for k, v in kwargs.items() if k != "out"},
                                 "dtype": dtype}


def _symbolic_arange(target: Any, args: tuple, kwargs: dict) -> Any:
    """``arange`` with some bound a symbol: its length as a symbol too, as torch computes
    it: ceil((end - start) / step), in integers where every bound is one. (Run on the
    symbols' example values, the length, which is none of them, was fixed: arange(0,
    x.size(2), 2) had 3 elements at every size, and so had what read its size.) None for
    bounds without a symbol, or a step that is not a number."""
    names = [argument.name for argument in target._schema.arguments]
    given = dict(zip(names, args)) | kwargs
    start, end, step = given.get("start", 0), given["end"], given.get("step", 1)
    bounds = (start, end, step)
    symbolic = (torch.SymInt, torch.SymFloat)
    if not any(isinstance(b, symbolic) for b in bounds) or \
            not all(isinstance(b, (int, float, *symbolic)) and not isinstance(b, bool)
                    for b in bounds) or _sign(step) in (0, None) or \
            (isinstance(step, symbolic) and not all(isinstance(b, (int, torch.SymInt))
                                                     for b in bounds)):
        return None
    example = _run_on_hints(target, args, kwargs)
    if all(isinstance(b, (int, torch.SymInt)) for b in bounds):
        # (A step that is a size, F.embedding_bag's bags of x.size(1) of x.numel(): its sign
        # is its example's, as a size's is at every size.)
        length = (end - start + step - 1) // step if _sign(step) > 0 else \
            (start - end - step - 1) // -step
    else:
        length = math.ceil((end - start) / step)
    return example.new_empty((torch.sym_max(length, 0),))


def _sign(number: Any) -> int | None:
    """-1, 0 or 1 for a number or a symbol's example value; None for a symbol without one."""
    if isinstance(number, torch.SymInt):
        if not number.node.has_hint():
            return None
        number = number.node.hint
    return (number > 0) - (number < 0)


def _run_on_hints(target: Any, args: tuple, kwargs: dict) -> Any:
    """``target``'s fake result where its schema takes plain numbers for symbols: run on the
    symbols' example values, then each result dim that is one of those values, and is that
    value plus one when the symbols are one more, is that symbol again (a window of n values
    has n). A value two symbols share maps back to neither. Only the parameters that take
    plain numbers get the example values: a size the schema takes as a symbol stays one
    (``full((n, 3), m)`` is [n, 3] with m 3 too, and its 3 is no symbol)."""
    result, symbols = _run_on_values(target, args, kwargs, 0)
    if not isinstance(result, torch.Tensor) or \
            not any(isinstance(size, int) and symbols.get(size) is not None
                    for size in result.shape):
        return result
    try:
        moved = _run_on_values(target, args, kwargs, 1)[0]
    except Exception:  # noqa: BLE001 - not defined one further: sizes kept as they came
        return result
    # (No comparison of a symbol with a number here: it would be a guard fixing the symbol.)
    sizes = [symbols[size] if isinstance(size, int) and symbols.get(size) is not None and
             isinstance(moved, torch.Tensor) and moved.dim() == result.dim() and
             moved.shape[k] == size + 1 else size for k, size in enumerate(result.shape)]
    if all(a is b for a, b in zip(sizes, result.shape)):
        return result
    return result.new_empty(sizes)


def _run_on_values(target: Any, args: tuple, kwargs: dict, more: int) -> tuple[Any, dict]:
    """``target`` run with each symbol of its plain-number parameters replaced by its example
    value plus ``more``; and the symbol of each of those values (None where two share it)."""
    plain = {name for name, _ in _plain_number_parameters(target)}
    symbols: dict[int, Any] = {}

    def value_of(value):
        if isinstance(value, torch.SymInt) and value.node.has_hint():
            number = value.node.hint + more
            known = symbols.setdefault(number, value)
            if known is not None and known.node.expr != value.node.expr:
                symbols[number] = None  # ambiguous
            return number
        if isinstance(value, torch.SymFloat) and value.node.has_hint():
            return value.node.hint
        return value

    names = [argument.name for argument in target._schema.arguments]
    concrete_args = tuple(pytree.tree_map(value_of, arg) if name in plain else arg
                          for name, arg in zip(names, args))
    concrete_kwargs = {name: pytree.tree_map(value_of, arg) if name in plain else arg
                       for name, arg in kwargs.items()}
    symbols = {number - more: symbol for number, symbol in symbols.items()}
    return run_keeping_inputs(target, concrete_args, concrete_kwargs), symbols
