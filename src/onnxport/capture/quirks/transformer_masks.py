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
