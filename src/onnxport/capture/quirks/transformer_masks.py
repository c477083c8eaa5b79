"""nn.TransformerEncoder/Decoder compare the attention mask with a causal one by value, to pass
SDPA an is_causal hint; torch.export cannot trace that read of values, and a trace keeps the
example's answer (a causal example mask made every mask, or none, causal). While capturing, the
hint is what the caller gave (else False): the mask is then applied as given, which computes
the same attention."""

from __future__ import annotations

import contextlib

import torch.nn.modules.transformer as transformer


def _given_hint(mask, is_causal=None, size=None) -> bool:
    return is_causal is True


@contextlib.contextmanager
def causal_hint_as_given():
    original = transformer._detect_is_causal_mask
    transformer._detect_is_causal_mask = _given_hint
    try:
        yield
    finally:
        transformer._detect_is_causal_mask = original


def causal_hint_as_given_in(graph) -> bool:
    """The same for a graph with scripted code, where ``_detect_is_causal_mask`` is inlined:
    its ``bool((mask == causal_comparison).all())`` (a cond on the mask's values returning a
    bool, which capture refused) becomes False, the hint it falls back to. Whether there was
    one."""
    found = False
    for node in graph.findAllNodes("aten::Bool", True):
        if _in_causal_check(node):
            with graph.insert_point_guard(node):
                node.output().replaceAllUsesWith(graph.insertConstant(False))
            found = True
    return found


def _in_causal_check(node) -> bool:
    where = repr(node.sourceRange())
    return "transformer.py" in where and "bool((mask == causal_comparison)" in where
