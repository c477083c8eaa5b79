"""Scripted code's ``x.shape``: a list of the tensor's sizes, one read each, which list ops
take item by item; and lists of sizes compared (``x.shape == y.shape``) one size at a time,
a condition of the run."""

from __future__ import annotations

import contextlib
import contextvars
import operator
from typing import Any, Iterator

import torch

from onnxport.capture.torchscript.ranks import known_ranks

# The ranks of the graph being converted, inferred once (by its top block's return node).
_RANKS: contextvars.ContextVar[dict | None] = contextvars.ContextVar("onnxport_script_ranks",
                                                                     default=None)


@contextlib.contextmanager
def ranks_inferred_once() -> Iterator[None]:
    """Within the block (a graph's conversion), the ranks of a graph are inferred once."""
    token = _RANKS.set({})
    try:
        yield
    finally:
        _RANKS.reset(token)


def _ranks_of(block: Any) -> dict:
    cache, key = _RANKS.get(), block.returnNode()
    if cache is not None and key in cache:
        return cache[key]
    ranks = known_ranks(block)
    if cache is not None:
        cache[key] = ranks
    return ranks

# ``a == b`` and ``a != b`` of two lists of ints.
LIST_COMPARISONS = (torch.ops.aten.eq.int_list, torch.ops.aten.ne.int_list)


def _updated(d: dict, other: dict) -> tuple:
    d.update(other)
    return ()  # (no result: not None, which says the call was not done here)


# Calls on a dict the converter holds as a Python dict: reads, and edits in place of the dict
# every later read takes.
_DICT_CALLS = {torch.ops.aten.items: lambda d: list(d.items()),
               torch.ops.aten.update: _updated,
               torch.ops.aten.pop: lambda d, key, *default: d.pop(key, *default),
               torch.ops.aten.setdefault: lambda d, key, default: d.setdefault(key, default),
               torch.ops.aten.keys: lambda d: list(d.keys()),
               torch.ops.aten.values: lambda d: list(d.values()),
               torch.ops.aten.get: lambda d, key, default=None: d.get(key, default),
               torch.ops.aten.__contains__: lambda d, key: key in d}


def list_op(graph: torch.fx.Graph, target: Any, args: list) -> Any:
    """A call on lists the converter holds item by item (sizes among them), done on the
    items: a slice (``x.shape[1:]``), a join (``a + b``), a repeat (``[1] * x.dim()``), a sum
    (``sum(x.shape)``), ``n in [3, 4]``, a comparison (``x.shape == y.shape``), ``divmod(n,
    2)``; None for any other call. (torch's
    ops on a list of symbolic sizes take the example's values: ``sum(x.shape)`` was the
    example's sum at every size, silently.)"""
    items = args[0] if args and isinstance(args[0], (list, tuple)) else None
    if args and isinstance(args[0], dict) and (call := _DICT_CALLS.get(
            getattr(target, "overloadpacket", None))) is not None and \
            all(type(a) in (str, int, float, bool) or type(a) is dict for a in args[1:2]):
        # (``for k, v in d.items()``, ``d.get("c", x)`` of a dict the converter holds as a
        # Python dict)
        return call(*args)
    if target is torch.ops.aten.slice.t and items is not None and \
            all(a is None or type(a) is int for a in args[1:]):
        return list(items[slice(*args[1:])])
    if target is torch.ops.aten.add.t and all(isinstance(a, (list, tuple)) for a in args):
        return [*args[0], *args[1]]
    if target is torch.ops.aten.mul.left_t and items is not None and type(args[1]) is int:
        return list(items) * args[1]
    if target is torch.ops.aten.sum.int and items is not None:
        total: Any = 0
        for item in items:
            total = total + item if isinstance(item, int) and isinstance(total, int) else \
                graph.call_function(operator.add, (total, item))
        return total
    if target is torch.ops.aten.__contains__.int_list and items is not None and \
            not all(type(a) is int for a in (args[1], *items)):
        found: Any = False
        for item in items:
            same = graph.call_function(operator.eq, (args[1], item))
            found = same if found is False else graph.call_function(operator.or_, (found, same))
        return found
    if target in LIST_COMPARISONS and all(isinstance(a, (list, tuple)) for a in args):
        return compared_lists(graph, target, *args)  # (x.shape == y.shape, size by size)
    if target is torch.ops.aten.divmod.int and not all(isinstance(a, int) for a in args):
        return (graph.call_function(operator.floordiv, tuple(args)),
                graph.call_function(operator.mod, tuple(args)))
    return None


def convert_size(converter: Any, node: torch._C.Node) -> None:
    """``x.shape`` (``aten::size`` of a whole tensor) of a known rank, as a list of its sizes
    (``y.shape[:1] + [2] + y.shape[1:]``: torch's slice of the one value of symbolic sizes
    failed, "Expected a value of type 'List[t]'"); ``x.size(d)``, and a shape of an unknown
    rank, as torch's converter makes them."""
    from torch._export.converter import TS2FXGraphConverter

    rank = None
    if node.inputsSize() == 1:
        kind = node.inputsAt(0).type()
        rank = kind.dim() if isinstance(kind, torch._C.TensorType) else None
        if rank is None:  # (a value TorchScript types as any Tensor: the script's ranks)
            block = node.owningBlock()
            while block.owningNode() is not None:
                block = block.owningNode().owningBlock()
            rank = _ranks_of(block).get(node.inputsAt(0))
    if not isinstance(rank, int):
        TS2FXGraphConverter._convert_standard_operators(converter, node)
        return
    tensor = converter.get_fx_value_by_ir_value(node.inputsAt(0))
    converter.name_to_node[node.output().debugName()] = sizes_listed(converter.fx_graph,
                                                                     tensor, rank)


def sizes_listed(graph: torch.fx.Graph, tensor: torch.fx.Node, rank: int) -> list:
    return [graph.call_function(torch.ops.aten.sym_size.int, (tensor, k)) for k in range(rank)]


def compared_lists(graph: torch.fx.Graph, target: Any, first: list, second: list) -> Any:
    """``first == second`` (or ``!=``, by ``target``) as a bool where the lists decide it (their
    lengths differ, or a pair of known ints), else as a condition computed from their sizes:
    taken as the example's answer, a branch on it was decided for every size (``if x.shape ==
    y.shape: return x + y`` added a y of one row to an x of six, silently)."""
    equal: Any = len(first) == len(second)
    if equal:
        for a, b in zip(first, second):
            if isinstance(a, int) and isinstance(b, int):
                equal = equal and a == b
                continue
            same = graph.call_function(operator.eq, (a, b))
            equal = same if equal is True else graph.call_function(operator.and_, (equal, same))
            if equal is False:
                break
    if target is torch.ops.aten.eq.int_list:
        return equal
    return not equal if isinstance(equal, bool) else graph.call_function(torch.sym_not, (equal,))


def convert_contains(converter: Any, node: torch._C.Node) -> None:
    """``n in [3, 4]`` of ints, sizes among them: compared one by one (torch's converter runs
    Python's ``in``, which took the example's answer); anything else as torch's converter
    does."""
    from torch._export.converter import TS2FXGraphConverter

    if node.inputsAt(0).type() == torch._C.ListType.ofInts():
        args = [converter.get_fx_value_by_ir_value(value) for value in node.inputs()]
        found = list_op(converter.fx_graph, torch.ops.aten.__contains__.int_list, args)
        if found is not None:
            converter.name_to_node[node.output().debugName()] = found
            return
    TS2FXGraphConverter._convert_standard_operators(converter, node)
