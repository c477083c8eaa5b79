"""Readable names for the tensors nested in inputs and outputs (a KV cache, dicts, lists,
ModelOutputs), built from their pytree paths: ``past_key_values.0.key``, ``logits``,
``present.1.value``. Used by capture (graph input and output names) and by verification (eager
outputs lined up with the ONNX outputs), so it belongs to neither."""

from __future__ import annotations

import collections
from typing import Any, Iterator

import torch
import torch.utils._pytree as pytree

from onnxport import hf_cache

# A cache given as ``past_key_values`` comes back updated; ONNX models call that one ``present``
# (transformers 5.24 returns it as ``cache``: see hf_cache.CACHE_FIELDS).
_OUTPUT_CACHE_NAME = "present"


def tensor_leaves(value: Any) -> list[tuple[list[str], torch.Tensor]]:
    """The tensors in ``value`` with their paths, in the order torch.export flattens them
    (the path of a bare tensor is ``[]``)."""
    return [(parts, leaf) for parts, leaf in _walk(value, []) if isinstance(leaf, torch.Tensor)]


def _walk(value: Any, parts: list[str]) -> Iterator[tuple[list[str], Any]]:
    if isinstance(value, torch.Tensor):
        yield parts, value
        return
    node_type = pytree._get_node_type(value)
    node = pytree.SUPPORTED_NODES.get(node_type)
    if node is None:
        yield parts, value  # a number, string, None...
        return
    children, context = node.flatten_fn(value)
    for key, child in zip(_child_keys(node_type, context, len(children)), children):
        yield from _walk(child, parts + [key])


def output_names(spec: pytree.TreeSpec) -> list[str | None]:
    """One name per output leaf of ``spec`` (an exported program's output structure), or None
    where the path has no name in it (a bare tensor, or a plain tuple or list)."""
    names: list[str | None] = []

    def walk(node: pytree.TreeSpec, parts: list[str], named: bool) -> None:
        if node.is_leaf():
            names.append(".".join(parts) if named else None)
            return
        is_cache = hf_cache.is_cache_type(node.type)
        keys = _child_keys(node.type, node.context, node.num_children)
        positional = not is_cache and keys == [str(i) for i in range(node.num_children)]
        for key, child in zip(keys, node.children()):
            if not parts and hf_cache.is_kv_cache_field(key, child.type):
                key = _OUTPUT_CACHE_NAME
            walk(child, parts + [key], named or not positional)

    walk(spec, [], False)
    return names


def bookkeeping_outputs(spec: pytree.TreeSpec) -> set[int]:
    """The positions among ``spec``'s leaves of a KV cache's bookkeeping (a sliding-window
    layer's token count and window), which the export leaves out of the ONNX outputs."""
    dropped: set[int] = set()

    def walk(node: pytree.TreeSpec, start: int) -> None:
        bookkeeping = (hf_cache.cache_bookkeeping_leaves(node.context)
                       if hf_cache.is_cache_type(node.type) else set())
        for k, child in enumerate(node.children()):
            if k in bookkeeping:
                dropped.update(range(start, start + child.num_leaves))
            elif not child.is_leaf():
                walk(child, start)
            start += child.num_leaves

    if not spec.is_leaf():
        walk(spec, 0)
    return dropped


def exported_leaves(value: Any) -> list:
    """The leaves of a model's output that the export makes ONNX outputs of (Nones aside): all
    but a KV cache's bookkeeping, so that eager outputs line up with ONNX Runtime's."""
    leaves, spec = pytree.tree_flatten(value)
    dropped = bookkeeping_outputs(spec)
    return [leaf for k, leaf in enumerate(leaves) if k not in dropped]


def _child_keys(node_type: Any, context: Any, count: int) -> list[str]:
    """The name of each child of a pytree node: its key, field or cache role, else position."""
    if hf_cache.is_cache_type(node_type):
        return hf_cache.cache_leaf_names(context, count)
    if node_type is collections.defaultdict and isinstance(context, (list, tuple)):
        context = context[-1]
    if isinstance(context, type) and hasattr(context, "_fields"):  # a namedtuple
        context = list(context._fields)
    if isinstance(context, (list, tuple)) and len(context) == count and all(
            isinstance(key, (str, int)) for key in context):
        return [str(key) for key in context]
    return [str(i) for i in range(count)]
