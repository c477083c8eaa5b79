"""transformers' cache objects (DynamicCache...) as pytrees, so that models returning or taking
a KV cache can be captured: their tensors become flat graph outputs/inputs."""

from __future__ import annotations

import functools


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
