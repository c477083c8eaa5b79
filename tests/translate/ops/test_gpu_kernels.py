"""The GPU-only kernels torch.export and tracing produce from a model on cuda, rocm or mps
(attention kernels, cuDNN batch norm, cuDNN's grid sampler) translate as their CPU twins: the
same ONNX graph, the same numbers.

CI has no GPU, so each kernel is given, for the test only, a CPU implementation that is its
CPU twin; the exported graph still calls the GPU kernel (its node is what is translated), and
eager runs the twin."""

from __future__ import annotations

import collections

import pytest
import torch
import torch.nn.functional as F
from op_check import check, op_types

import onnxport

aten = torch.ops.aten


def _scores(q, k, mask, is_causal, scale):
    scale = scale if scale is not None else q.shape[-1] ** -0.5
    scores = (q.float() @ k.float().transpose(-2, -1)) * scale
    if is_causal:
        scores = scores.masked_fill(~torch.ones(scores.shape[-2:], dtype=torch.bool).tril(),
                                    float("-inf"))
    if mask is not None:
        scores = scores + mask if mask.dtype != torch.bool else scores.masked_fill(
            ~mask, float("-inf"))
    return scores


def _sdpa(q, k, v, mask, is_causal, scale):
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal,
                                         scale=scale)
    return out, torch.logsumexp(_scores(q, k, mask, is_causal, scale), dim=-1)


def _efficient(q, k, v, attn_bias, compute_log_sumexp, dropout_p=0.0, is_causal=False, *,
               scale=None):
    out, lse = _sdpa(q, k, v, attn_bias, is_causal, scale)
    return out, lse, torch.empty((), dtype=torch.int64), torch.empty((), dtype=torch.int64)


def _flash(q, k, v, dropout_p=0.0, is_causal=False, return_debug_mask=False, *, scale=None):
    out, lse = _sdpa(q, k, v, None, is_causal, scale)
    empty = torch.empty(0, dtype=torch.int64)
    return out, lse, empty, empty, q.shape[2], k.shape[2], empty, empty, torch.empty(0)


def _cudnn(q, k, v, attn_bias, compute_log_sumexp, dropout_p=0.0, is_causal=False,
           return_debug_mask=False, *, scale=None):
    out, lse = _sdpa(q, k, v, attn_bias, is_causal, scale)
    empty = torch.empty(0, dtype=torch.int64)
    return out, lse, empty, empty, q.shape[2], k.shape[2], empty, empty, torch.empty(0)


def _batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    out = F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)
    empty = input.new_empty(0)
    return out, empty, empty, empty.to(torch.uint8)


def _miopen_batch_norm(*args):
    return _batch_norm(*args)[:3]


def _grid_sampler(input, grid):
    return aten.grid_sampler_2d(input, grid, 0, 0, True)


def _math_for_mps(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, dropout_mask=None,
                  *, scale=None, enable_gqa=False):
    return aten._scaled_dot_product_attention_math(q, k, v, attn_mask, dropout_p, is_causal,
                                                   dropout_mask, scale=scale,
                                                   enable_gqa=enable_gqa)


def _fused_lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    gates = input_gates + hidden_gates
    gates = gates + input_bias if input_bias is not None else gates
    gates = gates + hidden_bias if hidden_bias is not None else gates
    i, f, c, o = gates.chunk(4, 1)
    cy = f.sigmoid() * cx + i.sigmoid() * c.tanh()
    return o.sigmoid() * cy.tanh(), cy, gates


def _fused_gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    input_gates = input_gates + input_bias if input_bias is not None else input_gates
    hidden_gates = hidden_gates + hidden_bias if hidden_bias is not None else hidden_gates
    i_r, i_z, i_n = input_gates.chunk(3, 1)
    h_r, h_z, h_n = hidden_gates.chunk(3, 1)
    r, z = (i_r + h_r).sigmoid(), (i_z + h_z).sigmoid()
    n = (i_n + r * h_n).tanh()
    return (1 - z) * n + z * hx, torch.cat([input_gates, hidden_gates], 1)


_TWINS = {
    "_scaled_dot_product_efficient_attention": _efficient,
    "_scaled_dot_product_flash_attention": _flash,
    "_scaled_dot_product_cudnn_attention": _cudnn,
    "_scaled_dot_product_attention_math_for_mps": _math_for_mps,
    "cudnn_batch_norm": _batch_norm,
    "miopen_batch_norm": _miopen_batch_norm,
    "cudnn_grid_sampler": _grid_sampler,
    "_thnn_fused_lstm_cell": _fused_lstm_cell,
    "_thnn_fused_gru_cell": _fused_gru_cell,
}


@pytest.fixture(scope="module", autouse=True)
def cpu_twins():
    """Each GPU kernel runs its CPU twin on CPU (and meta) tensors, for these tests only."""
    library = torch.library.Library("aten", "IMPL")
    for name, twin in _TWINS.items():
        library.impl(name, twin, "CPU")
        if not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "Meta"):
            library.impl(name, twin, "Meta")  # cudnn_grid_sampler has no meta kernel
    yield
    library._destroy()


def _qkv(heads=2, kv_heads=None, length=5, source=6, dtype=torch.float32):
    torch.manual_seed(0)
    q = torch.randn(2, heads, length, 8, dtype=dtype)
    k = torch.randn(2, kv_heads or heads, source, 8, dtype=dtype)
    v = torch.randn(2, kv_heads or heads, source, 8, dtype=dtype)
    return q, k, v


ATTENTION = {
    "efficient": lambda q, k, v: aten._scaled_dot_product_efficient_attention(
        q, k, v, None, False)[0],
    "efficient, bias and scale": lambda q, k, v, m: aten._scaled_dot_product_efficient_attention(
        q, k, v, m, True, scale=0.3)[0],
    "efficient, causal": lambda q, k, v: aten._scaled_dot_product_efficient_attention(
        q, k, v, None, False, is_causal=True)[0],
    "flash": lambda q, k, v: aten._scaled_dot_product_flash_attention(q, k, v)[0],
    "flash, causal": lambda q, k, v: aten._scaled_dot_product_flash_attention(
        q, k, v, is_causal=True)[0],
    "flash logsumexp": lambda q, k, v: aten._scaled_dot_product_flash_attention(q, k, v)[1],
    "cudnn": lambda q, k, v: aten._scaled_dot_product_cudnn_attention(q, k, v, None, False)[0],
    "cudnn, bias": lambda q, k, v, m: aten._scaled_dot_product_cudnn_attention(
        q, k, v, m, False)[0],
    "mps": lambda q, k, v: aten._scaled_dot_product_attention_math_for_mps(q, k, v)[0],
    "mps weights": lambda q, k, v: aten._scaled_dot_product_attention_math_for_mps(q, k, v)[1],
}


@pytest.mark.parametrize("name", list(ATTENTION))
@pytest.mark.parametrize("opset", [18, 23])
def test_gpu_attention_kernels_match_their_cpu_twin(name, opset):
    function = ATTENTION[name]
    args = _qkv()
    if "bias" in name:
        args += (torch.randn(5, 6),)
    check(function, *args, opset=opset)


def test_gpu_attention_kernels_export_the_cpu_graph():
    # sdpa on the CPU exports through _scaled_dot_product_flash_attention_for_cpu; its GPU
    # twins must give the same graph.
    q, k, v = _qkv()
    cpu = collections.Counter(op_types(onnxport.export(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v), (q, k, v))))
    for name in ("efficient", "flash", "cudnn"):
        program = onnxport.export(ATTENTION[name], (q, k, v))
        assert collections.Counter(op_types(program)) == cpu, name


def test_gpu_attention_of_float16():
    q, k, v = _qkv(dtype=torch.float16)
    check(ATTENTION["flash"], q, k, v, rtol=1e-2, atol=1e-2)  # half floats


class _BatchNorm(torch.nn.Module):
    def __init__(self, kernel):
        super().__init__()
        self.kernel = kernel
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4).eval()
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)
            self.bn.weight.uniform_(0.5, 1.5)

    def forward(self, x):
        bn = self.bn
        return self.kernel(self.conv(x), bn.weight, bn.bias, bn.running_mean, bn.running_var,
                           False, 0.1, 1e-5)[0]


@pytest.mark.parametrize("kernel", [aten.cudnn_batch_norm, aten.miopen_batch_norm])
def test_gpu_batch_norm_is_folded_into_the_conv_as_on_the_cpu(kernel):
    torch.manual_seed(0)
    model = _BatchNorm(kernel)
    program = check(model, torch.randn(2, 3, 8, 8))
    assert op_types(program) == ["Conv"]
    unoptimized = check(model, torch.randn(2, 3, 8, 8), optimize=False)
    assert "BatchNormalization" in op_types(unoptimized)


def test_cudnn_grid_sampler_exports_the_cpu_graph():
    # F.grid_sample on a cuda tensor (bilinear, zeros, align_corners=True) is cuDNN's sampler.
    torch.manual_seed(0)
    x, grid = torch.randn(1, 3, 5, 5), torch.rand(1, 4, 4, 2) * 2.2 - 1.1
    program = check(aten.cudnn_grid_sampler, x, grid)
    cpu = onnxport.export(lambda x, g: F.grid_sample(x, g, align_corners=True), (x, grid))
    assert collections.Counter(op_types(program)) == collections.Counter(op_types(cpu))


def _cell_inputs(gates: int, bias: bool):
    torch.manual_seed(0)
    batch, hidden = 3, 5
    tensors = [torch.randn(batch, gates * hidden), torch.randn(batch, gates * hidden),
               torch.randn(batch, hidden)]
    return tensors + ([torch.randn(gates * hidden), torch.randn(gates * hidden)] if bias else [])


@pytest.mark.parametrize("dynamo", [True, False], ids=["torch.export", "torchscript"])
def test_cuda_fused_lstm_cell_matches_the_cell(dynamo):
    # What nn.LSTMCell on cuda records after its two matmuls. (Without biases torch's own fake
    # kernel fails: capture/quirks/fused_cells.py gives it zeros.)
    check(lambda *a: aten._thnn_fused_lstm_cell(*a)[:2], *_cell_inputs(4, True), dynamo=dynamo)


@pytest.mark.parametrize("bias", [True, False])
def test_cuda_fused_gru_cell_matches_the_cell(bias):
    check(lambda *a: aten._thnn_fused_gru_cell(*a)[0], *_cell_inputs(3, bias))
