"""Lists a scripted loop appends one tensor to per iteration (``ys.append(y)``, ``ys += [y]``),
held as the loop's scan output: the items stacked along a new first axis, which ONNX Loop
makes itself. What follows the loop reads the list through :class:`StackedList`:
``torch.stack``, ``torch.cat``, ``len`` and indexing become ops on the stacked tensor.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import operator
from typing import Any

import torch

from onnxport.errors import CaptureError


class StackedList:
    """A list built by a loop, as the FX node of its items stacked: [count, *item]."""

    def __init__(self, node: torch.fx.Node, where: str):
        self.node, self.where = node, where


@dataclasses.dataclass
class _Slot:
    """A list the loop appends to: carried (``ys += [y]``) or read from outside (append)."""

    carried: int | None  # its place among the carried values, or
    name: str | None  # the outer name the body updates
    placeholder: torch.fx.Node
    results: list  # the body's calls that append, in order
    items: list  # what each appends
    front: bool = False  # inserted at the front (``ys.insert(0, y)``): the list runs backwards


# ``ys + [y]`` and ``ys += [y]``: lists joined.
LIST_JOINS = (torch.ops.aten.add.t, torch.ops.aten.add_.t)


def _set_item(items: list, index: int, value: Any) -> list:
    items[index] = value
    return items


def _insert(items: list, index: int, value: Any) -> None:
    items.insert(index, value)


def _delete(items: list, index: int) -> None:
    del items[index]


_REMOVES_OF_NUMBERS = (torch.ops.aten.remove.int, torch.ops.aten.remove.float,
                       torch.ops.aten.remove.bool)
_SORTS_OF_NUMBERS = (torch.ops.aten.sort.int, torch.ops.aten.sort.float,
                     torch.ops.aten.sort.bool)
# Edits of a list whose items are known (a Python list while converting or inlining), done in
# place as TorchScript's shared lists are; each returns what the op returns.
LIST_EDITS = {torch.ops.aten._set_item.t: _set_item, torch.ops.aten.insert.t: _insert,
              torch.ops.aten.Delete.t: _delete,
              torch.ops.aten.pop.t: lambda items, index=-1: items.pop(index),
              torch.ops.aten.extend.t: lambda items, other: items.extend(other),
              torch.ops.aten.clear.t: lambda items: items.clear(),
              torch.ops.aten.reverse.t: lambda items: items.reverse(),
              # (``ys += [y]`` of a loop unrolled in the TorchScript graph)
              torch.ops.aten.add_.t: lambda items, other: (items.extend(other), items)[1],
              # (not of tensors: torch removes the first item equal in value, which a run knows)
              torch.ops.aten.remove.int: list.remove, torch.ops.aten.remove.float: list.remove,
              torch.ops.aten.remove.bool: list.remove,
              **dict.fromkeys(_SORTS_OF_NUMBERS, lambda items, reverse=False: items.sort(
                  reverse=reverse))}
# Those of them that take an index (an int) after the list; the others take a list or nothing.
INDEXED_LIST_EDITS = {torch.ops.aten._set_item.t, torch.ops.aten.insert.t,
                      torch.ops.aten.Delete.t, torch.ops.aten.pop.t}


def edits_known_list(target: Any, args: list) -> bool:
    """Whether ``target`` (in LIST_EDITS) edits ``args[0]``, a list whose items are known, by
    arguments known too: an int index, other lists, or a number it holds (``ys.remove(3)``);
    a sort of numbers."""
    if not isinstance(args[0], list):
        return False
    if target in INDEXED_LIST_EDITS:
        return all(isinstance(a, int) for a in args[1:2])
    if target in _REMOVES_OF_NUMBERS:
        return _numbers(args[0]) and type(args[1]) in (int, float, bool) and args[1] in args[0]
    if target in _SORTS_OF_NUMBERS:  # (``sizes.sort()``, ``sort(reverse=True)``)
        return _numbers(args[0]) and all(type(a) is bool for a in args[1:])
    return all(isinstance(a, (list, tuple)) for a in args[1:])


def _numbers(items: list) -> bool:
    return all(type(item) in (int, float, bool) for item in items)


def convert_list_add(converter: Any, node: torch._C.Node) -> None:
    """TS2FXGraphConverter.convert_aten_add, and ``ys + zs`` of two lists the converter holds
    as Python lists (a loop the graph unrolled joined them): the joined list, which the edits
    after it (``ys.remove(2)``) change in place. torch's made a call, whose result a run
    copies: an edit of it was lost, silently."""
    from torch._export.converter import TS2FXGraphConverter

    from onnxport.capture.torchscript.size_lists import list_op

    if node.inputsSize() == 2:
        parts = [converter.get_fx_value_by_ir_value(node.inputsAt(k)) for k in range(2)]
        joined = list_op(converter.fx_graph, torch.ops.aten.add.t, parts)
        if joined is not None:
            converter.name_to_node[node.output().debugName()] = joined
            return
    TS2FXGraphConverter.convert_aten_add(converter, node)


def convert_append(converter: Any, node: torch._C.Node) -> None:
    """TS2FXGraphConverter.convert_aten_append, and an append, in a branch or a loop's body, to
    a list the converter holds as a Python list made there (nn.MultiheadAttention's
    ``query, key = (x.transpose(1, 0) for x in (query, key))`` under ``if key is value``):
    done on that list. torch's read the list as a node there and failed."""
    from torch._export.converter import TS2FXGraphConverter

    items = converter.get_fx_value_by_ir_value(node.inputsAt(0))
    if converter.is_top_level_graph() or not isinstance(items, list):
        TS2FXGraphConverter.convert_aten_append(converter, node)
        return
    if type(items) is not list:  # (FX's immutable list of a node's arguments)
        items = list(items)
        converter.name_to_node[node.inputsAt(0).debugName()] = items
    items.append(converter.get_fx_value_by_ir_value(node.inputsAt(1)))
    converter.name_to_node[node.output().debugName()] = items


def lists_as_scans(body: torch.fx.GraphModule, carried: list, names: list, outer: list,
                   updated: list) -> list[_Slot]:
    """Rewrite ``body`` (placeholders: outer names, the iteration, the carried values; outputs:
    the condition, the carried values, then the updated outer names) so that each empty list
    it appends exactly one tensor to per iteration leaves as a scan output, after the others.
    Returns those lists, in the order of their scan outputs; the others are left as they are."""
    from torch._export.converter import list_append

    graph = body.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    output = next(n for n in graph.nodes if n.op == "output")
    candidates = []
    if isinstance(output.args[0], (list, tuple)):
        results = list(output.args[0])
        candidates += [(k, None, placeholders[len(names) + 1 + k], results[1 + k])
                       for k, value in enumerate(carried) if _empty_list(value)]
        candidates += [(None, name, placeholders[names.index(name)],
                        results[1 + len(carried) + updated.index(name)])
                       for name in updated if _empty_list(outer[names.index(name)])]
    else:
        results = [output.args[0]]  # (the condition alone)
    slots = []
    for k, name, placeholder, result in candidates:
        chain = _append_chain(placeholder, result, output, list_append)
        if chain is not None and sum(r is result for r in results) == 1:
            slots.append(_Slot(k, name, placeholder, [c for c, _ in chain],
                               [item for _, item in chain]))
    # Lists the body inserts one tensor into at the front per iteration (TorchScript's
    # insert changes the list in place: the name is not among the updated ones).
    for name, placeholder in zip(names, placeholders):
        calls = list(placeholder.users)
        if name not in updated and _empty_list(outer[names.index(name)]) and len(calls) == 1 \
                and calls[0].target is torch.ops.aten.insert.t and calls[0].args[:2] == \
                (placeholder, 0) and isinstance(calls[0].args[2], torch.fx.Node):
            slots.append(_Slot(None, name, placeholder, calls, [calls[0].args[2]], front=True))
    if not slots:
        return []
    last = {id(slot.results[-1]) for slot in slots}
    kept = [r for r in results if id(r) not in last]
    output.args = (kept + [item for slot in slots for item in slot.items],)
    for slot in slots:
        for call in reversed(slot.results):
            graph.erase_node(call)
        graph.erase_node(slot.placeholder)
    body.recompile()
    return slots


def stacked_lists_read(body: torch.fx.GraphModule, outer: list) -> list:
    """``outer`` with each :class:`StackedList` (a list an earlier loop built, read by this
    loop's body or this branch: ``for y in ys``, ``torch.stack(ys) if len(ys) > 0 else x``)
    as its stacked tensor, and ``body`` reading its rows: ``ys[i]`` is row i, ``len(ys)`` the
    row count, ``torch.stack``/``torch.cat`` of it ops on the stacked tensor. Refused for
    any other read of it in the body."""
    if not any(isinstance(value, StackedList) for value in outer):
        return outer
    placeholders = [n for n in body.graph.nodes if n.op == "placeholder"]  # (names first)
    values = []
    for placeholder, value in zip(placeholders, outer):
        if isinstance(value, StackedList):
            for user in list(placeholder.users):
                _read_as_rows(body.graph, user, placeholder, value)
            value = value.node
        values.append(value)
    body.recompile()
    return values


def _read_as_rows(graph: torch.fx.Graph, user: torch.fx.Node, rows: torch.fx.Node,
                  value: StackedList) -> None:
    """``user``, a read of the list whose items are the rows of ``rows``, made a read of
    ``rows`` (in place, or replaced)."""
    others = [*user.args[1:], *user.kwargs.values()]
    dim = (others + [0])[0]
    if user.args[0] is rows and not any(
            rows in (a if isinstance(a, (list, tuple)) else (a,)) for a in others):
        if user.target is operator.getitem:
            user.target, user.args = torch.ops.aten.select.int, (rows, 0, user.args[1])
            return
        if user.target in (torch.ops.aten.len.t, len):
            user.target, user.args = torch.ops.aten.sym_size.int, (rows, 0)
            return
        if user.target in _JOINS and isinstance(dim, int):
            with graph.inserting_before(user):
                joined = _rows_joined(graph, user.target, rows, dim)
            user.replace_all_uses_with(joined)
            graph.erase_node(user)
            return
    raise CaptureError(
        f"scripted code reads the list that the loop ({value.where}) appends to, inside a "
        f"loop or branch, by {user.target}, which is not translated for a list whose length "
        "is known only at run time (indexing, len(), torch.stack and torch.cat are); stack it "
        "first (torch.stack(items))")


_JOINS = (torch.ops.aten.stack.default, torch.ops.aten.cat.default)


def _rows_joined(graph: torch.fx.Graph, target: Any, rows: torch.fx.Node,
                 dim: int) -> torch.fx.Node:
    """``torch.stack`` or ``torch.cat`` (``target``) along ``dim`` of the list whose items are
    the rows of ``rows``: for cat, the count axis moved in front of dim, then merged with it."""
    if target is torch.ops.aten.stack.default:
        return graph.call_function(torch.ops.aten.movedim.int, (rows, 0, dim))
    at = dim if dim >= 0 else dim - 1
    moved = graph.call_function(torch.ops.aten.movedim.int, (rows, 0, at))
    return graph.call_function(torch.ops.aten.flatten.using_ints, (moved, at, at + 1))


def _append_chain(placeholder: torch.fx.Node, result: Any, output: torch.fx.Node,
                  list_append: Any) -> list | None:
    """The appends from ``placeholder`` (the list as the iteration starts) to ``result`` (as
    it ends), each the only use of the one before, as (call, item); None when the list is
    used otherwise."""
    chain, current = [], placeholder
    while current is not result:
        if len(current.users) != 1:
            return None
        call = next(iter(current.users))
        if call.target is list_append:
            item = call.args[1]
        elif call.target in LIST_JOINS and isinstance(call.args[1], (list, tuple)) and \
                len(call.args[1]) == 1:
            item = call.args[1][0]
        else:
            return None
        if call.args[0] is not current or not isinstance(item, torch.fx.Node):
            return None
        chain.append((call, item))
        current = call
    if not chain or list(result.users) != [output]:
        return None
    return chain


def _empty_list(value: Any) -> bool:
    return isinstance(value, list) and not value


def stacked_call(converter: Any, node: torch._C.Node, target: Any, args: list) -> Any:
    """``torch.stack`` or ``torch.cat`` of a :class:`StackedList` (the only argument that is
    one) as ops on its stacked tensor, a slice of it as a slice of that; refused for any other
    op."""
    graph = converter.fx_graph
    stacked = next(a for a in args if isinstance(a, StackedList))
    dim = args[1] if len(args) > 1 else 0
    if target in _JOINS and args[0] is stacked and isinstance(dim, int):
        return _rows_joined(graph, target, stacked.node, dim)
    if target is torch.ops.aten.slice.t and args[0] is stacked:
        # ys[start:end:step]: the rows of the stacked tensor, a list of them again
        start, end, step = (list(args[1:]) + [None, None, 1])[:3]
        return StackedList(graph.call_function(torch.ops.aten.slice.Tensor, (
            stacked.node, 0, start, end, 1 if step is None else step)), stacked.where)
    if target in _MUTATIONS and args[0] is stacked and isinstance(args[1], int):
        return _mutated(converter, node, target, stacked, args)
    raise CaptureError(
        f"the list that the loop ({stacked.where}) appends to is read by {node.kind()}, which "
        "is not translated for a list whose length is known only at run time (torch.stack, "
        "torch.cat, len(), indexing and slicing are); stack it first (torch.stack(items))")


_MUTATIONS = (torch.ops.aten.Delete.t, torch.ops.aten.pop.t, torch.ops.aten._set_item.t)


def _mutated(converter: Any, node: torch._C.Node, target: Any, stacked: StackedList,
             args: list) -> Any:
    """``del ys[i]``, ``ys.pop(i)``, ``ys[i] = y`` on a :class:`StackedList`: the list's name
    then stands for the new stacked tensor (TorchScript's lists change in place); returns
    what the call returns."""
    graph, index = converter.fx_graph, args[1]
    if target is torch.ops.aten._set_item.t:
        updated = graph.call_function(torch.ops.aten.select_scatter.default,
                                      (stacked.node, args[2], 0, index))
        result = None
    else:
        result = graph.call_function(torch.ops.aten.select.int, (stacked.node, 0, index)) \
            if target is torch.ops.aten.pop.t else None
        before = graph.call_function(torch.ops.aten.slice.Tensor, (stacked.node, 0, 0, index))
        if index == -1:
            updated = before
        else:
            after = graph.call_function(torch.ops.aten.slice.Tensor,
                                        (stacked.node, 0, index + 1, 2 ** 63 - 1))
            updated = graph.call_function(torch.ops.aten.cat.default, ([before, after], 0))
    new = StackedList(updated, stacked.where)
    converter.name_to_node[node.inputsAt(0).debugName()] = new
    return new if target is torch.ops.aten._set_item.t else result


@torch.library.custom_op("onnxport::list_of_rows", mutates_args=())
def _list_of_rows(stacked: torch.Tensor) -> torch.Tensor:
    """A list a loop of a run-time count built, returned by the model: its items stacked,
    where a program runs; translation makes it an ONNX sequence of the rows."""
    return stacked.clone()


@_list_of_rows.register_fake
def _(stacked: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(stacked)


# An op of its own (an ExportedProgram's graph holds ops only), translated by name.
list_of_rows = torch.ops.onnxport.list_of_rows.default


class ReturnedListError(CaptureError):
    """The model returns a list a loop of a run-time count builds, and :func:`sequence_outputs`
    is not in effect."""


_SEQUENCES = contextvars.ContextVar("onnxport_sequence_outputs", default=False)


@contextlib.contextmanager
def sequence_outputs():
    """Within this block, a returned list a loop of a run-time count builds is an ONNX
    sequence (:func:`returned_as_sequences`); outside, it is refused, so that the capture
    first tries the static sizes fixed, whose loops unroll into one output per item."""
    token = _SEQUENCES.set(True)
    try:
        yield
    finally:
        _SEQUENCES.reset(token)


def returned_as_sequences(converter: Any, values: list) -> None:
    """A list built by a loop of a run-time count that the model returns (alone, or in a tuple
    or list it returns): an ONNX sequence of its items, as torch.onnx gives it (ONNX Runtime
    returns it as a list of arrays). Each such value of ``converter``'s outputs becomes a
    :data:`list_of_rows` call of its stacked items, within :func:`sequence_outputs`. So does a
    list of tensors the model returns empty (``res = []`` no loop appended to): torch.onnx's
    empty sequence, where the list had left no output (or a model of none, refused)."""
    def replaced(value: Any, kind: Any) -> Any:
        graph = converter.fx_graph
        if isinstance(value, StackedList):
            if not _SEQUENCES.get():
                raise ReturnedListError(
                    f"the model returns the list that the loop ({value.where}) appends to, "
                    "whose length is known only at run time")
            return graph.call_function(list_of_rows, (value.node,))
        if isinstance(value, list) and not value and isinstance(kind, torch._C.ListType) and \
                isinstance(kind.getElementType(), torch._C.TensorType):
            empty = graph.call_function(torch.ops.aten.zeros.default, ([0],),
                                        {"dtype": torch.float32})
            return graph.call_function(list_of_rows, (empty,))
        if isinstance(value, (list, tuple)):
            kinds = kind.elements() if isinstance(kind, torch._C.TupleType) else \
                [kind.getElementType()] * len(value) if isinstance(kind, torch._C.ListType) \
                else [None] * len(value)
            return type(value)(replaced(item, k) for item, k in zip(value, kinds))
        if isinstance(value, dict):
            return {key: replaced(item, None) for key, item in value.items()}
        return value

    for value in values:
        name = value.debugName()
        if name in converter.name_to_node:
            converter.name_to_node[name] = replaced(converter.name_to_node[name], value.type())
