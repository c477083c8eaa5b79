"""Attention (ops/attention.py): scaled_dot_product_attention with masks, causality, scale
and grouped-query heads, as MatMul/Softmax/MatMul. (Every opset, and dynamic sequence
lengths: tests/translate/test_opsets.py and test_dynamic_shapes.py.)"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from op_check import cases, check, check_opinfo, count, op_types, opinfo_cases


@pytest.mark.parametrize("name, variant, dtype, subset",
                         opinfo_cases(["nn.functional.scaled_dot_product_attention"]))
def test_sdpa_opinfo(name, variant, dtype, subset):
    check_opinfo(name, variant, dtype, subset, limit=6)


def _qkv(batch=2, heads=3, length=5, source=5, size=8, kv_heads=None):
    torch.manual_seed(0)
    q = torch.randn(batch, heads, length, size)
    k = torch.randn(batch, kv_heads or heads, source, size)
    v = torch.randn(batch, kv_heads or heads, source, size)
    return q, k, v


def _bool_mask(length, source):
    mask = torch.rand(length, source) > 0.4
    mask[:, 0] = True  # no fully masked row (nan in eager and ONNX alike)
    return mask


def _fully_masked_rows(length, source):
    mask = _bool_mask(length, source)
    mask[1] = False  # a row that sees no key: torch gives it zeros (a left-padded batch)
    return mask


sdpa = F.scaled_dot_product_attention
HAND = {
    "bool mask, a fully masked row": (lambda q, k, v, m: sdpa(q, k, v, attn_mask=m), *_qkv(),
                                      _fully_masked_rows(5, 5)),
    "float mask, a fully masked row": (
        lambda q, k, v, m: sdpa(q, k, v, attn_mask=m), *_qkv(),
        torch.zeros(5, 5).masked_fill(~_fully_masked_rows(5, 5), float("-inf"))),
    "plain": (sdpa, *_qkv()),
    "3-d": (sdpa, *[t[0] for t in _qkv()]),
    "causal": (lambda q, k, v: sdpa(q, k, v, is_causal=True), *_qkv()),
    "causal, longer source": (lambda q, k, v: sdpa(q, k, v, is_causal=True),
                              *_qkv(length=3, source=7)),
    "bool mask": (lambda q, k, v, m: sdpa(q, k, v, attn_mask=m), *_qkv(), _bool_mask(5, 5)),
    "bool mask per batch and head": (
        lambda q, k, v, m: sdpa(q, k, v, attn_mask=m), *_qkv(),
        _bool_mask(5, 5).expand(2, 3, 5, 5).clone()),
    "float mask": (lambda q, k, v, m: sdpa(q, k, v, attn_mask=m), *_qkv(), torch.randn(1, 1, 5, 5)),
    "scale": (lambda q, k, v: sdpa(q, k, v, scale=0.3), *_qkv()),
    "grouped-query heads": (lambda q, k, v: sdpa(q, k, v, enable_gqa=True),
                            *_qkv(heads=6, kv_heads=2)),
    "grouped-query heads, causal": (lambda q, k, v: sdpa(q, k, v, is_causal=True, enable_gqa=True),
                                    *_qkv(heads=4, kv_heads=2, length=6, source=6)),
    "nn.MultiheadAttention": (torch.nn.MultiheadAttention(8, 2, batch_first=True),
                              torch.randn(2, 5, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 8)),
}


@pytest.mark.parametrize("case", cases(HAND))
def test_sdpa(case):
    function, *args = case
    check(function, *args)


def test_sdpa_is_matmul_softmax_matmul():
    program = check(sdpa, *_qkv())
    ops = op_types(program)
    assert count(program, "MatMul") == 2 and count(program, "Softmax") == 1
    assert "Trilu" not in ops


def test_an_unscaled_attention_has_no_multiplication_by_one():
    # T5's attention passes scale=1.0: a Mul by 1 in every layer, which onnxslim then removes.
    program = check(lambda q, k, v: sdpa(q, k, v, scale=1.0), *_qkv(), optimize=False)
    assert count(program, "Mul") == 0
    assert count(check(lambda q, k, v: sdpa(q, k, v, scale=0.5), *_qkv(), optimize=False),
                 "Mul") == 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bool])
def test_a_mask_broadcast_over_the_queries_runs_at_opset_23(dtype):
    # ONNX Runtime's Attention refused a [B, 1, 1, S] padding mask ("inconsistent
    # q_sequence_length"); torch and the ONNX operator broadcast it.
    torch.manual_seed(0)
    mask = torch.randn(2, 1, 1, 5) if dtype == torch.float32 else torch.rand(2, 1, 1, 5) > 0.3
    mask[..., 0] = True if dtype == torch.bool else mask[..., 0]
    program = check(lambda q, k, v, m: sdpa(q, k, v, attn_mask=m), *_qkv(), mask, opset=23,
                    dynamic_axes={"q": {2: "queries"}}, input_names=["q", "k", "v", "m"],
                    run_with=[(*_qkv(length=7)[:1], *_qkv()[1:], mask)])
    assert count(program, "Attention") == 1


def test_static_causal_mask_is_a_constant():
    program = check(lambda q, k, v: sdpa(q, k, v, is_causal=True), *_qkv())
    ops = op_types(program)
    assert "Range" not in ops and "Trilu" not in ops and count(program, "Where") == 1


flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
FLASH = {
    "plain": (flash, *_qkv(source=6)),
    "causal": (lambda q, k, v: flash(q, k, v, is_causal=True), *_qkv(source=6)),
    "mask and scale": (lambda q, k, v, m: flash(q, k, v, attn_mask=m, scale=0.3),
                       *_qkv(source=6), torch.randn(5, 6)),
    "grouped-query heads": (flash, *_qkv(heads=4, kv_heads=2)),
}


@pytest.mark.parametrize("case", cases(FLASH))
def test_flash_attention_for_cpu_returns_its_logsumexp(case):
    # (output [N, H, L, E], logsumexp [N, H, L]); torch's decomposition returns the attention
    # weights [N, H, L, S] as the second.
    function, *args = case
    check(function, *args)


def test_flash_attention_for_cpu_of_float16_has_a_float32_logsumexp():
    q, k, v = (t.half() for t in _qkv())
    check(flash, q, k, v, rtol=1e-2, atol=1e-2)  # half floats


@pytest.mark.parametrize("case", cases(HAND))
def test_sdpa_is_one_attention_node_from_opset_23(case):
    function, *args = case
    program = check(function, *args, opset=23)
    # 4-D inputs become ONNX Attention; the 3-D case stays decomposed (Attention's own 3-D
    # form packs the heads into the last axis), and nn.MultiheadAttention, which returns its
    # weights, does not call scaled_dot_product_attention.
    expected = args[0].dim() == 4 and not isinstance(function, torch.nn.Module)
    assert (count(program, "Attention") == 1) == expected
    if count(program, "Attention"):
        assert "Softmax" not in op_types(program) and "Expand" not in op_types(program)


@pytest.mark.parametrize("opset", [18, 23])
@pytest.mark.parametrize("dynamo", [True, False], ids=["dynamo", "torchscript"])
def test_sdpa_of_a_dynamic_head_size_scales_at_run_time(dynamo, opset):
    # (refused before: "attention with a symbolic head size needs an explicit scale")
    def attention(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    axes = {name: [0, 2, 3] for name in ("q", "k", "v")}
    args = [torch.randn(1, 2, 4, 8) for _ in range(3)]
    check(attention, *args, dynamo=dynamo, opset=opset, dynamic_axes=axes,
          input_names=["q", "k", "v"], run_with=[[torch.randn(2, 2, 5, 6) for _ in range(3)]])
