"""Attention: scaled_dot_product_attention as ONNX Attention (opset 23), else as
MatMul/Softmax/MatMul."""

from __future__ import annotations

import math

import onnx_ir as ir

from onnxport.translate.ops._helpers import rank
from onnxport.translate.ops.shape import size_of
from onnxport.translate.registry import translates


def _repeat_heads(g, x, repeats):
    """[B, Hkv, S, E] -> [B, Hkv*repeats, S, E], each head repeated (grouped-query attention)."""
    expanded = g.op("Unsqueeze", x, g.const([2]))
    expanded = g.op("Expand", expanded, g.const([1, 1, repeats, 1, 1]))
    return g.op("Reshape", expanded, _heads_shape(g, x, repeats))


def _heads_shape(g, x, repeats):
    dims = list(x.shape)
    heads = dims[1] * repeats
    entries = [0 if not isinstance(dims[0], int) else dims[0], heads, -1, dims[3]]
    return g.const(entries)


@translates("aten::scaled_dot_product_attention")
def scaled_dot_product_attention(g, query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None, float dropout_p=0.0, bool is_causal=False, *, float? scale=None, bool enable_gqa=False) -> Tensor"""
    r = rank(query)
    head_size = query.shape[r - 1]
    if scale is None:
        if not isinstance(head_size, int):
            raise NotImplementedError("attention with a symbolic head size needs an explicit scale")
        scale = 1.0 / math.sqrt(head_size)
    if g.opset >= 23 and r == 4:
        # One fused op that ONNX Runtime runs as such; it takes fewer key/value heads than
        # query heads itself, so grouped-query attention needs no Expand.
        mask = [attn_mask] if attn_mask is not None else []
        return g.op("Attention", query, key, value, *mask, scale_f=float(scale),
                    is_causal_i=int(bool(is_causal)))
    if is_causal:
        # From the key as given: its repeated-heads form below has no recorded shape.
        attn_mask = _causal_mask(g, query, key)
    if enable_gqa and isinstance(query.shape[r - 3], int) and isinstance(key.shape[r - 3], int) \
            and query.shape[r - 3] != key.shape[r - 3]:
        repeats = query.shape[r - 3] // key.shape[r - 3]
        key = _repeat_heads(g, key, repeats)
        value = _repeat_heads(g, value, repeats)
    perm = list(range(r))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    key_t = g.op("Transpose", key, perm_i=perm)
    scores = g.op("MatMul", query, key_t)
    scores = g.op("Mul", scores, g.const(scale, query.dtype))
    if attn_mask is not None:
        if attn_mask.dtype == ir.DataType.BOOL:
            scores = g.op("Where", attn_mask, scores, g.const(float("-inf"), query.dtype))
        else:
            scores = g.op("Add", scores, attn_mask)
    weights = g.op("Softmax", scores, axis_i=-1 if g.opset >= 13 else r - 1)
    return g.op("MatMul", weights, value)


def _causal_mask(g, query, key):
    """The [L, S] bool mask ones(L, S).tril(): a constant for static sizes, else position
    arithmetic (Range and a comparison, which every opset has; Trilu needs opset 14)."""
    r = rank(query)
    length, source = query.shape[r - 2], key.shape[r - 2]
    if isinstance(length, int) and isinstance(source, int):
        import torch

        return g.const(torch.ones(length, source, dtype=torch.bool).tril())
    return lower_triangle(g, size_of(g, query, r - 2), size_of(g, key, r - 2))


def lower_triangle(g, rows, columns, diagonal=0):
    """A bool [rows, columns] mask, true where column - row <= diagonal (1-D [1] sizes)."""
    zero, one = g.const(0, ir.DataType.INT64), g.const(1, ir.DataType.INT64)
    row = g.op("Range", zero, g.op("Squeeze", rows, g.const([0])), one)
    column = g.op("Range", zero, g.op("Squeeze", columns, g.const([0])), one)
    row = g.op("Unsqueeze", row, g.const([1]))
    if diagonal:
        row = g.op("Add", row, g.const(diagonal, ir.DataType.INT64))
    return g.op("LessOrEqual", column, row)
