"""transformers' cache objects (DynamicCache...) as pytrees, so that models returning or taking
a KV cache can be captured: their tensors become flat graph outputs/inputs, named after the
layer and role of each tensor (``0.key``, ``0.value``; ``0.decoder.key`` in an encoder-decoder
cache)."""

from __future__ import annotations

import functools
import sys
from typing import Any

# Cache attribute names as the ONNX names of KV caches spell them (optimum, ONNX Runtime GenAI).
_RENAMED = {"keys": "key", "values": "value",
            "self_attention_cache": "decoder", "cross_attention_cache": "encoder"}
_DROPPED = {"layers"}


@functools.cache
def register_cache_pytrees() -> bool:
    """Register every transformers Cache class with torch's pytree, once per process."""
    try:
        from transformers.cache_utils import Cache
        from transformers.exporters.exporter_dynamo import register_pytree_node
    except ImportError:  # an older or newer transformers without these helpers
        return False

    def subclasses(cls):
        for subclass in cls.__subclasses__():
            yield subclass
            yield from subclasses(subclass)

    register_pytree_node(Cache)
    for cache_type in subclasses(Cache):
        register_pytree_node(cache_type)
    return True


def register_if_loaded() -> None:
    """Register the cache pytrees when the model's code has imported transformers."""
    if "transformers" in sys.modules:
        register_cache_pytrees()


def is_cache_type(cls: type) -> bool:
    if "transformers" not in sys.modules:
        return False
    try:
        from transformers.cache_utils import Cache
    except ImportError:
        return False
    return isinstance(cls, type) and issubclass(cls, Cache)


def cache_leaf_names(context: Any, count: int) -> list[str]:
    """One name per flattened leaf of a cache, from the context transformers flattens it to
    (``{"_t": "obj", "s": {"layers": [{"_t": "obj", "s": {"keys": {"_t": "tensor", "i": 0}...``);
    the leaf's position when that context has another form."""
    names: dict[int, str] = {}

    def walk(node: Any, parts: list) -> None:
        if isinstance(node, dict):
            tag = node.get("_t")
            if tag in ("tensor", "sym") and isinstance(node.get("i"), int):
                names[node["i"]] = _name(parts)
            elif tag in ("obj", "map"):
                walk(node.get("s", node.get("v")), parts)
            elif tag in ("seq", "items"):
                walk(node.get("v"), parts)
            elif tag is None:
                for key, child in node.items():
                    walk(child, parts + [key])
        elif isinstance(node, list):
            for i, child in enumerate(node):
                walk(child, parts + [i])

    walk(context, [])
    return [names.get(i, str(i)) for i in range(count)]


def _name(parts: list) -> str:
    """``["self_attention_cache", "layers", 0, "keys"]`` -> ``"0.decoder.key"``: the layer
    number first, then what the tensor is."""
    parts = [_RENAMED.get(p, p) for p in parts if p not in _DROPPED]
    numbers = [p for p in parts if isinstance(p, int)]
    if numbers:
        parts.remove(numbers[0])
        parts.insert(0, numbers[0])
    return ".".join(str(p) for p in parts)
