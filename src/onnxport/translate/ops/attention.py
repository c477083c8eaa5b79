"""Attention: scaled_dot_product_attention as ONNX Attention (opset 23), else as
MatMul/Softmax/MatMul."""

from __future__ import annotations

import math

import onnx_ir as ir

from onnxport.translate.ops._helpers import cast, rank, reduce
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
    if g.opset >= 23 and g.fused_ops and rank(query) == 4 and (
            scale is not None or isinstance(query.shape[3], int)):  # (Attention's scale: fixed)
        return _fused_attention(g, query, key, value, attn_mask, is_causal, scale)
    return _attention(g, query, key, value, attn_mask, is_causal, scale, enable_gqa)[0]


def _fused_attention(g, query, key, value, attn_mask, is_causal, scale):
    """One ONNX Attention (opset 23), which ONNX Runtime runs as one kernel; it takes fewer
    key/value heads than query heads itself, so grouped-query attention needs no Expand."""
    if scale is None:
        head_size = query.shape[3]
        if not isinstance(head_size, int):
            raise NotImplementedError("attention with a symbolic head size needs an explicit scale")
        scale = 1.0 / math.sqrt(head_size)
    mask = [_over_queries(g, attn_mask, query)] if attn_mask is not None else []
    output = g.op("Attention", query, key, value, *mask, scale_f=float(scale),
                  is_causal_i=int(bool(is_causal)))
    if attn_mask is not None and not _constant_without_masked_rows(attn_mask):
        # A row the mask hides entirely is zeros in torch (see _attention).
        output = g.op("Where", _rows_fully_masked(g, attn_mask), g.const(0.0, query.dtype),
                      output)
    return output


def _over_queries(g, mask, query):
    """``mask`` with the query length on its second-to-last axis. ONNX Runtime's Attention
    takes no mask that broadcasts over the queries ([B, 1, 1, S], a padding mask), which the
    operator and torch allow: such a mask is expanded."""
    r = rank(query)
    length = query.shape[r - 2]
    dims = mask.shape
    if dims is not None and len(dims) >= 2 and dims[len(dims) - 2] == length:
        return mask
    rows = g.const([length, 1]) if isinstance(length, int) else \
        g.op("Concat", size_of(g, query, r - 2), g.const([1]), axis_i=0)
    return g.op("Expand", mask, rows)


@translates("aten::_scaled_dot_product_flash_attention_for_cpu")
def scaled_dot_product_flash_attention_for_cpu(g, query, key, value, dropout_p=0.0,
                                               is_causal=False, *, attn_mask=None, scale=None):
    """_scaled_dot_product_flash_attention_for_cpu(Tensor query, Tensor key, Tensor value, float dropout_p=0.0, bool is_causal=False, *, Tensor? attn_mask=None, float? scale=None) -> (Tensor output, Tensor logsumexp)"""
    # torch's decomposition returns the attention weights in place of the logsumexp [N, H, L]
    # (float32 for half inputs).
    return _kernel_outputs(g, query, key, value, attn_mask, is_causal, scale, 2)


def _kernel_outputs(g, query, key, value, attn_mask, is_causal, scale, count):
    """(output, logsumexp [N, H, L] in float32 (double for double inputs), None for each other
    output of the kernel: random-number state, sequence offsets, a debug mask, none of which
    inference reads). One body for the CPU kernel and its GPU twins, so that a model exports
    the same graph from any device (the logsumexp is dropped as dead code when unused)."""
    output, scores = _attention(g, query, key, value, attn_mask, is_causal, scale, True)
    scores = cast(g, scores, ir.DataType.DOUBLE if query.dtype == ir.DataType.DOUBLE
                  else ir.DataType.FLOAT)
    logsumexp = reduce(g, "ReduceLogSumExp", scores, [rank(query) - 1], False)
    return (output, logsumexp) + (None,) * (count - 2)


# The kernels scaled_dot_product_attention becomes on a GPU (torch.export picks the backend's
# kernel as it does _scaled_dot_product_flash_attention_for_cpu on the CPU). Dropout is
# training-only, as in the CPU twin.
@translates("aten::_scaled_dot_product_efficient_attention")
def scaled_dot_product_efficient_attention(g, query, key, value, attn_bias, compute_log_sumexp,
                                           dropout_p=0.0, is_causal=False, *, scale=None):
    """_scaled_dot_product_efficient_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_bias, bool compute_log_sumexp, float dropout_p=0., bool is_causal=False, *, float? scale=None) -> (Tensor output, Tensor log_sumexp, Tensor philox_seed, Tensor philox_offset)

    The CUDA memory-efficient kernel (float32 on a GPU without flash support, or with a mask).
    Its log_sumexp is [N, H, L] here; CUDA pads L to a multiple of 32."""
    return _kernel_outputs(g, query, key, value, attn_bias, is_causal, scale, 4)


@translates("aten::_scaled_dot_product_flash_attention")
def scaled_dot_product_flash_attention(g, query, key, value, dropout_p=0.0, is_causal=False,
                                       return_debug_mask=False, *, scale=None):
    """_scaled_dot_product_flash_attention(Tensor query, Tensor key, Tensor value, float dropout_p=0., bool is_causal=False, bool return_debug_mask=False, *, float? scale=None) -> (Tensor output, Tensor logsumexp, Tensor cum_seq_q, Tensor cum_seq_k, SymInt max_q, SymInt max_k, Tensor rng_state, Tensor unused, Tensor debug_attn_mask)

    The CUDA flash kernel (half and bfloat16 inputs, no mask)."""
    return _kernel_outputs(g, query, key, value, None, is_causal, scale, 9)


@translates("aten::_scaled_dot_product_cudnn_attention")
def scaled_dot_product_cudnn_attention(g, query, key, value, attn_bias, compute_log_sumexp,
                                       dropout_p=0.0, is_causal=False, return_debug_mask=False,
                                       *, scale=None):
    """_scaled_dot_product_cudnn_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_bias, bool compute_log_sumexp, float dropout_p=0., bool is_causal=False, bool return_debug_mask=False, *, float? scale=None) -> (Tensor output, Tensor logsumexp, Tensor cum_seq_q, Tensor cum_seq_k, SymInt max_q, SymInt max_k, Tensor philox_seed, Tensor philox_offset, Tensor debug_attn_mask)

    The cuDNN kernel (H100 and later, half and bfloat16)."""
    return _kernel_outputs(g, query, key, value, attn_bias, is_causal, scale, 9)


@translates("aten::_scaled_dot_product_fused_attention_overrideable")
def scaled_dot_product_fused_attention_overrideable(g, query, key, value, attn_bias=None,
                                                    dropout_p=0.0, is_causal=False,
                                                    return_debug_mask=False, *, scale=None):
    """_scaled_dot_product_fused_attention_overrideable(Tensor query, Tensor key, Tensor value, Tensor? attn_bias=None, float dropout_p=0., bool is_causal=False, bool return_debug_mask=False, *, float? scale=None) -> (Tensor output, Tensor logsumexp, Tensor cum_seq_q, Tensor cum_seq_k, SymInt max_q, SymInt max_k, Tensor philox_seed, Tensor philox_offset, Tensor debug_attn_mask)

    The kernel out-of-tree backends (XPU, PrivateUse1 devices) plug in."""
    return _kernel_outputs(g, query, key, value, attn_bias, is_causal, scale, 9)


@translates("aten::_scaled_dot_product_attention_math_for_mps")
def scaled_dot_product_attention_math_for_mps(g, query, key, value, attn_mask=None,
                                              dropout_p=0.0, is_causal=False, dropout_mask=None,
                                              *, scale=None, enable_gqa=False):
    """_scaled_dot_product_attention_math_for_mps(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None, float dropout_p=0., bool is_causal=False, Tensor? dropout_mask=None, *, float? scale=None, bool enable_gqa=False) -> (Tensor, Tensor)

    Apple's GPU kernel: the output and the attention weights (softmax of the scores)."""
    output, scores = _attention(g, query, key, value, attn_mask, is_causal, scale, enable_gqa)
    return output, g.op("Softmax", scores, axis_i=-1 if g.opset >= 13 else rank(query) - 1)


def _attention(g, query, key, value, attn_mask, is_causal, scale, enable_gqa):
    """(the attention output, the masked and scaled scores fed to its softmax)."""
    r = rank(query)
    head_size = query.shape[r - 1]
    if scale is None and isinstance(head_size, int):
        scale = 1.0 / math.sqrt(head_size)
    elif scale is None:  # a head size known at run time: 1 / sqrt of it, computed there
        size = g.op("Gather", g.op("Shape", query), g.const(r - 1, ir.DataType.INT64), axis_i=0)
        scale = g.op("Reciprocal", g.op("Sqrt", cast(g, size, query.dtype)))
    given_mask = attn_mask
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
    if isinstance(scale, ir.Value):
        scores = g.op("Mul", scores, scale)
    elif scale != 1:  # (T5's attention is unscaled)
        scores = g.op("Mul", scores, g.const(scale, query.dtype))
    if attn_mask is not None:
        if attn_mask.dtype == ir.DataType.BOOL:
            scores = g.op("Where", attn_mask, scores, g.const(float("-inf"), query.dtype))
        else:
            scores = g.op("Add", scores, attn_mask)
    weights = g.op("Softmax", scores, axis_i=-1 if g.opset >= 13 else r - 1)
    if given_mask is not None and not _constant_without_masked_rows(given_mask):
        # torch's softmax for attention gives a row the mask hides entirely zeros (a left-padded
        # batch's first rows), where Softmax of -inf alone is nan. (A causal mask hides no row.)
        weights = g.op("Where", _rows_fully_masked(g, attn_mask), g.const(0.0, query.dtype),
                       weights)
    return g.op("MatMul", weights, value), scores


def _constant_without_masked_rows(attn_mask) -> bool:
    if attn_mask.const_value is None:
        return False
    mask = attn_mask.const_value.numpy()
    allowed = mask if mask.dtype == bool else mask != float("-inf")
    return bool(allowed.any(axis=-1).all()) if allowed.ndim else bool(allowed)


def _rows_fully_masked(g, attn_mask):
    """[..., L, 1]: True where the mask lets no key through. Computed from the mask alone, so
    layers sharing one mask share this too (CSE)."""
    last = rank(attn_mask) - 1
    if attn_mask.dtype == ir.DataType.BOOL:
        allowed = reduce(g, "ReduceMax", cast(g, attn_mask, ir.DataType.FLOAT), [last], True)
        return g.op("Equal", allowed, g.const(0.0, ir.DataType.FLOAT))
    largest = reduce(g, "ReduceMax", attn_mask, [last], True)
    return g.op("Equal", largest, g.const(float("-inf"), attn_mask.dtype))


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
    """A bool [rows, columns] mask, true where column - row <= diagonal (1-D [1] sizes;
    ``diagonal`` an int or a 1-D [1] value: a size the model computed)."""
    zero, one = g.const(0, ir.DataType.INT64), g.const(1, ir.DataType.INT64)
    row = g.op("Range", zero, g.op("Squeeze", rows, g.const([0])), one)
    column = g.op("Range", zero, g.op("Squeeze", columns, g.const([0])), one)
    row = g.op("Unsqueeze", row, g.const([1]))
    if isinstance(diagonal, ir.Value):
        row = g.op("Add", row, diagonal)
    elif diagonal:
        row = g.op("Add", row, g.const(diagonal, ir.DataType.INT64))
    return g.op("LessOrEqual", column, row)
