"""Tensors allocated and filled through views with constants, folded to their value
(:func:`_fold_filled_constants`) so that the graph needs no functionalization."""

from __future__ import annotations

import functools
from typing import Any

import torch

from onnxport.capture.common import aliases, is_view


# Ops that allocate a tensor from sizes alone (``new_*`` read only their input's dtype).
_FRESH = {torch.ops.aten.new_zeros.default, torch.ops.aten.new_ones.default,
          torch.ops.aten.new_full.default, torch.ops.aten.new_empty.default,
          torch.ops.aten.zeros.default, torch.ops.aten.ones.default,
          torch.ops.aten.full.default, torch.ops.aten.empty.memory_format}


@functools.cache
def _written_positions(target: Any) -> tuple[int, ...]:
    """The positions of the arguments ``target`` writes into (none for a pure op or no ATen
    op); read from its schema once per op, not once per call."""
    schema = getattr(target, "_schema", None)
    if schema is None or not schema.is_mutable:
        return ()
    return tuple(k for k, argument in enumerate(schema.arguments)
                 if argument.alias_info is not None and argument.alias_info.is_write)


def _fold_filled_constants(graph: torch.fx.Graph, first_input: torch.fx.Node | None,
                           constants: dict[str, Any]) -> list[tuple[str, torch.Tensor]]:
    """Replace each tensor that is allocated and written into through views with constants of
    static size (swin's shifted-window attention mask) by its final value, as a new constant
    placeholder before ``first_input``.

    Such writes are the only reason these graphs need functionalizing, which traces the whole
    program again (most of a ``dynamo=False`` export of swin_t); the values are the same.
    Returns the (name, value) of each constant made; each placeholder's ``meta["val"]`` is set.
    ``constants`` holds the values of the graph's constant placeholders by name (a fill value
    the tracer lifted as a tensor).
    """
    order = {node: k for k, node in enumerate(graph.nodes)}
    roots: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        positions = _written_positions(node.target)
        if not positions:
            continue
        written = [node.args[k] for k in positions if k < len(node.args)]
        if len(written) != 1 or not isinstance(written[0], torch.fx.Node):
            continue  # left to functionalization
        # The tensor written, through views and through earlier in-place calls
        # (``x.add_(1).add_(2)``, a loop's writes unrolled), whose results are that tensor.
        root = _through_writes(written[0])
        while is_view(root) and isinstance(root.args[0], torch.fx.Node):
            root = _through_writes(root.args[0])
        roots.setdefault(root, []).append(node)
    folded = []
    for root, writers in roots.items():
        # A write whose result is read (``torch.empty(n).fill_(v)`` returned) stands for the
        # whole tensor only where it wrote the tensor itself, not a view of it.
        if any(writer.users and _through_writes(_written(writer)) is not root
               for writer in writers):
            continue
        value = _filled_value(root, writers, order, constants)
        if value is None:
            continue
        name = f"c_filled_{root.name}"
        with graph.inserting_before(first_input):
            placeholder = graph.placeholder(name)
        placeholder.meta["val"] = root.meta["val"]
        for writer in reversed(writers):
            writer.replace_all_uses_with(placeholder)
            graph.erase_node(writer)
        root.replace_all_uses_with(placeholder)
        graph.erase_node(root)
        folded.append((name, value))
    return folded


def _is_write(node: Any) -> bool:
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and \
        bool(_written_positions(node.target))


def _through_writes(node: Any) -> Any:
    """The tensor an in-place call's result is (``x.add_(1)`` is ``x``), through a chain."""
    while _is_write(node) and isinstance(_written(node), torch.fx.Node):
        node = _written(node)
    return node


def _written(writer: torch.fx.Node) -> Any:
    """The argument ``writer`` (an in-place call) writes into."""
    return writer.args[_written_positions(writer.target)[0]]


def _filled_value(root: torch.fx.Node, writers: list[torch.fx.Node],
                  order: dict, constants: dict[str, Any]) -> torch.Tensor | None:
    """The value ``root`` holds after ``writers``, when it is freshly allocated, every size,
    index and value involved is a constant, and nothing reads it before the last write."""
    if root.target not in _FRESH:
        return None
    sharing = aliases(root)
    region = set(sharing) | set(writers)
    last = max(order[writer] for writer in writers)
    if any(order[user] < last for alias in sharing for user in alias.users
           if user not in region):
        return None  # read while still being written

    def constant(node):
        value = node.meta.get("val")
        if isinstance(value, (int, float, bool)) and not isinstance(value, torch.SymInt):
            return value
        lifted = constants.get(node.name) if node.op == "placeholder" else None
        if isinstance(lifted, torch.Tensor) and lifted.numel() == 1:
            return lifted  # a fill value the tracer lifted as a tensor (torch 2.14)
        raise LookupError(node.name)

    values: dict[torch.fx.Node, Any] = {}
    try:
        for node in sorted(region, key=order.__getitem__):
            if node is root and root.target.__name__.startswith("new_"):
                dtype = root.args[0].meta["val"].dtype
                args = (torch.empty(0, dtype=dtype),) + torch.fx.node.map_arg(
                    root.args[1:], constant)
                kwargs = torch.fx.node.map_arg(root.kwargs, constant)
            else:
                args, kwargs = torch.fx.node.map_arg(
                    (node.args, node.kwargs),
                    lambda n: values[n] if n in values else constant(n))
            values[node] = node.target(*args, **kwargs)
    except LookupError:  # a size or value from the run: functionalization handles it
        return None
    value = values[root]
    fake = root.meta.get("val")
    if not isinstance(fake, torch.Tensor) or tuple(fake.shape) != tuple(value.shape):
        return None
    # Computed on the CPU; the graph's other tensors are on the model's device (cuda).
    return value if fake.device.type in ("cpu", "meta") else value.to(fake.device)
