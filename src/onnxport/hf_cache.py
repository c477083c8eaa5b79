"""transformers' cache objects (DynamicCache...) as pytrees, so that models returning or taking
a KV cache can be captured: their tensors become flat graph outputs/inputs, named after the
layer and role of each tensor (``0.key``, ``0.value``; ``0.decoder.key`` in an encoder-decoder
cache). Used by capture and, through pytree_names, by verification."""

from __future__ import annotations

import functools
import sys
from typing import Any

# Cache attribute names as the ONNX names of KV caches spell them (optimum, ONNX Runtime GenAI).
_RENAMED = {"keys": "key", "values": "value",
            "self_attention_cache": "decoder", "cross_attention_cache": "encoder"}
_DROPPED = {"layers"}
# Tensors a cache layer keeps as a copy of a configuration number (the window of a sliding-window
# layer), not state a caller feeds back: no ONNX output.
_CONFIG_COPIES = {"_sliding_window_tensor"}
# The number of tokens a layer has seen.
_COUNTERS = {"cumulative_length"}


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


# The fields a KV cache is passed and returned in: ``past_key_values`` in transformers before
# 5.24, ``cache`` since (the old name still accepted). ONNX models name the tensors fed in
# ``past_key_values.N.key`` and those returned ``present.N.key`` on every version.
CACHE_FIELDS = ("past_key_values", "cache")
_INPUT_CACHE_NAME = "past_key_values"


def is_kv_cache_field(key: str, node_type: Any) -> bool:
    """Whether a top-level output field ``key`` holding a ``node_type`` is the KV cache
    (``past_key_values`` always, as legacy tuples too; ``cache`` when it holds a Cache)."""
    return key == "past_key_values" or (key in CACHE_FIELDS and is_cache_type(node_type))


def input_name_root(parameter: str, value: Any) -> str:
    """The first part of the ONNX names of the tensors in a ``parameter`` argument: a KV
    cache's are ``past_key_values`` whichever field passes it."""
    if parameter in CACHE_FIELDS and is_cache_type(type(value)):
        return _INPUT_CACHE_NAME
    return parameter


def cache_leaf_names(context: Any, count: int) -> list[str]:
    """One name per flattened leaf of a cache, from the context transformers flattens it to
    (``{"_t": "obj", "s": {"layers": [{"_t": "obj", "s": {"keys": {"_t": "tensor", "i": 0}...``);
    the leaf's position when that context has another form."""
    names = {i: _name(parts) for i, (parts, _, _) in _leaves(context).items()}
    return [names.get(i, str(i)) for i in range(count)]


def cache_bookkeeping_leaves(context: Any) -> set[int]:
    """The positions of a cache's leaves that are its bookkeeping rather than its state: the
    token count of a dynamic layer (``cumulative_length``, a Python int in eager, so no output
    there, but a symbolic number under torch.export and a tensor under the tracer) and tensors
    copied from the configuration (``_sliding_window_tensor``). They get no ONNX output. (A
    static layer's ``cumulative_length`` is a tensor it updates in place: state, kept.)"""
    return {i for i, (parts, tag, owner) in _leaves(context).items()
            if tag == "sym" or (parts and parts[-1] in _CONFIG_COPIES)
            or (parts and parts[-1] in _COUNTERS and _is_dynamic_layer(owner))}


def _is_dynamic_layer(path: str | None) -> bool:
    module_name, _, qualname = (path or "").partition(":")
    owner = getattr(sys.modules.get(module_name), qualname, None)
    try:
        from transformers.cache_utils import DynamicLayer
    except ImportError:
        return False
    return isinstance(owner, type) and issubclass(owner, DynamicLayer)


def _leaves(context: Any) -> dict[int, tuple[list, str, str | None]]:
    """Each leaf's position -> (its path of attribute names, keys and indices; its tag; the
    class path of the object holding it)."""
    leaves: dict[int, tuple[list, str, str | None]] = {}

    def walk(node: Any, parts: list, owner: str | None) -> None:
        if isinstance(node, dict):
            tag = node.get("_t")
            if tag in ("tensor", "sym") and isinstance(node.get("i"), int):
                leaves[node["i"]] = (parts, tag, owner)
            elif tag == "obj":
                walk(node.get("s"), parts, node.get("p"))
            elif tag == "map":
                walk(node.get("v"), parts, owner)
            elif tag in ("seq", "items"):
                walk(node.get("v"), parts, owner)
            elif tag is None:
                for key, child in node.items():
                    walk(child, parts + [key], owner)
        elif isinstance(node, list):
            for i, child in enumerate(node):
                walk(child, parts + [i], owner)

    walk(context, [], None)
    return leaves


def _name(parts: list) -> str:
    """``["self_attention_cache", "layers", 0, "keys"]`` -> ``"0.decoder.key"``: the layer
    number first, then what the tensor is."""
    parts = [_RENAMED.get(p, p) for p in parts if p not in _DROPPED]
    numbers = [p for p in parts if isinstance(p, int)]
    if numbers:
        parts.remove(numbers[0])
        parts.insert(0, numbers[0])
    return ".".join(str(p) for p in parts)
