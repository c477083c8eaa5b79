"""Exports from a GPU box (``model.cuda()``, inputs on cuda), as users make them: each file runs
in ONNX Runtime on the CPU and is compared with eager on cuda (float32 without TF32, see
verification.compare.full_float32), at the example's size and at another. Skipped without CUDA;
a device session runs them (the closing notes say when)."""

from __future__ import annotations

import warnings

import pytest
import torch

import onnxport
from onnxport.errors import DynamicDimensionFixedWarning
from onnxport.pytree_names import exported_leaves
from onnxport.verification.compare import full_float32

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
PATHS = pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])


def _compare(program, model, *calls, rtol=1e-3, atol=1e-4):
    for args, kwargs in calls:
        with torch.no_grad(), full_float32():
            expected = [t for t in exported_leaves(model(*args, **kwargs))
                        if isinstance(t, torch.Tensor)]
        actual = program(*args, **kwargs)
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert tuple(a.shape) == tuple(e.shape)
            torch.testing.assert_close(a.cpu().float(), e.cpu().float(), rtol=rtol, atol=atol)


@PATHS
def test_resnet_with_a_dynamic_batch_from_a_batch_of_one_keeps_it_dynamic_silently(dynamo):
    # cuDNN's eval batch norm takes batches up to 65535: a kernel choice torch.export records
    # as a bound, which is no limit of the model (it warned "matches PyTorch only up to 65535").
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval().cuda()
    x = torch.randn(1, 3, 64, 64, device="cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DynamicDimensionFixedWarning)
        program = onnxport.export(model, (x,), input_names=["x"],
                                  dynamic_axes={"x": {0: "batch"}}, dynamo=dynamo)
    _compare(program, model, ((x,), {}), ((torch.randn(3, 3, 64, 64, device="cuda"),), {}),
             rtol=1e-3, atol=1e-3)  # 20 convolutions summed in another order on the GPU
    assert next(model.parameters()).device.type == "cuda"


def test_verify_passes_on_a_deep_convolutional_net():
    # Eager with TF32 convolutions is 0.19 away from float32 at resnet50's outputs.
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).eval().cuda()
    x = torch.randn(1, 3, 96, 96, device="cuda")
    onnxport.export(model, (x,), verify=True)


class _ShiftedWindowMask(torch.nn.Module):
    def forward(self, x):
        height, width = x.shape[-2:]
        mask = x.new_zeros((height, width))
        count = 0
        for rows in ((0, -2), (-2, None)):
            mask[rows[0]:rows[1], :] = count
            count += 1
        early = x.new_ones((height, width))
        snapshot = early * 2
        early[0] = 5.0
        return x + mask.view(1, 1, height, width), snapshot + early


@PATHS
def test_a_mask_filled_through_views_on_cuda(dynamo):
    # The folded mask was made on the CPU, and functionalizing the rest then failed.
    model = _ShiftedWindowMask()
    x = torch.randn(2, 3, 6, 5, device="cuda")
    program = onnxport.export(model, (x,), input_names=["x"],
                              dynamic_axes={"x": {0: "batch"}}, dynamo=dynamo)
    _compare(program, model, ((x,), {}), ((torch.randn(4, 3, 6, 5, device="cuda"),), {}))


@pytest.mark.parametrize("dynamo", [True, False])
def test_a_sliding_window_llm_with_its_cache_from_cuda(dynamo):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.MistralConfig(
        vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, intermediate_size=64, max_position_embeddings=64,
        sliding_window=6)
    model = transformers.MistralForCausalLM(config).eval().cuda()

    def inputs(batch, sequence):
        ids = torch.randint(0, 100, (batch, sequence), device="cuda")
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

    axes = {"input_ids": {0: "batch", 1: "sequence"},
            "attention_mask": {0: "batch", 1: "sequence"}}
    program = onnxport.export(model, (), kwargs=inputs(1, 16), dynamic_axes=axes,
                              dynamo=dynamo)
    _compare(program, model, ((), inputs(1, 16)), ((), inputs(3, 11)))


@PATHS
def test_packed_sequences_from_cuda(dynamo):
    class Packed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = torch.nn.LSTM(4, 5, num_layers=2, bidirectional=True, batch_first=True)

        def forward(self, x, lengths):
            packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True,
                                                             enforce_sorted=False)
            out, _ = self.rnn(packed)
            return torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True)[0]

    torch.manual_seed(0)
    model = Packed().eval().cuda()
    # pack_padded_sequence takes its lengths on the CPU, as torch requires.
    example = (torch.randn(3, 6, 4, device="cuda"), torch.tensor([6, 2, 4]))
    program = onnxport.export(model, example, input_names=["x", "lengths"],
                              dynamic_axes={"x": {0: "batch", 1: "sequence"},
                                            "lengths": {0: "batch"}}, dynamo=dynamo)
    _compare(program, model, (example, {}),
             ((torch.randn(2, 5, 4, device="cuda"), torch.tensor([5, 3])), {}))


@PATHS
def test_bert_from_cuda_with_dynamic_batch_and_sequence(dynamo):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=64)
    model = transformers.BertModel(config).eval().cuda()
    ids = torch.randint(0, 100, (1, 8), device="cuda")
    program = onnxport.export(model, (ids,), input_names=["input_ids"],
                              dynamic_axes={"input_ids": {0: "batch", 1: "sequence"}},
                              dynamo=dynamo)
    _compare(program, model, ((ids,), {}),
             ((torch.randint(0, 100, (3, 5), device="cuda"),), {}))


class _Cell(torch.nn.Module):
    def __init__(self, kind: str, bias: bool):
        super().__init__()
        self.kind = kind
        cell = torch.nn.LSTMCell if kind == "lstm" else torch.nn.GRUCell
        self.cell = cell(5, 7, bias=bias)

    def forward(self, x, h, c):
        return self.cell(x, (h, c)) if self.kind == "lstm" else self.cell(x, h)


@pytest.mark.parametrize("dynamo", [None, False, True], ids=["default", "torchscript", "dynamo"])
@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no bias"])
def test_recurrent_cells_from_cuda(kind, bias, dynamo):
    # On cuda the cells run fused kernels (_thnn_fused_lstm_cell, _thnn_fused_gru_cell); the
    # LSTM one's fake kernel fails without biases (capture/quirks/fused_cells.py).
    torch.manual_seed(0)
    model = _Cell(kind, bias).eval().cuda()
    args = tuple(torch.randn(3, n, device="cuda") for n in (5, 7, 7))
    program = onnxport.export(model, args, dynamo=dynamo)
    _compare(program, model, (args, {}))


@PATHS
def test_native_batch_norm_in_eval_from_cuda(dynamo):
    # CUDA's kernel returns the running mean and 1/sqrt(var + eps) where the CPU's returns empty
    # tensors.
    class Model(torch.nn.Module):
        def forward(self, x, w, b, m, v):
            return torch.ops.aten.native_batch_norm(x, w, b, m, v, False, 0.1, 1e-5)

    torch.manual_seed(0)
    args = (torch.randn(2, 3, 4, 4, device="cuda"), *(torch.rand(3, device="cuda") + 0.5
                                                      for _ in range(4)))
    program = onnxport.export(Model(), args, dynamo=dynamo)
    _compare(program, Model(), (args, {}))


class _Lstsq(torch.nn.Module):
    def forward(self, a, b):
        return torch.linalg.lstsq(a, b)


@PATHS
def test_lstsq_with_cuda_s_default_driver(dynamo):
    # CUDA's only driver is gels: residuals when rows > columns, an empty rank.
    torch.manual_seed(0)
    args = (torch.randn(2, 6, 3, device="cuda"), torch.randn(2, 6, 2, device="cuda"))
    program = onnxport.export(_Lstsq(), args, dynamo=dynamo)
    _compare(program, _Lstsq(), (args, {}))


class _CellsInADynamicLoop(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTMCell(4, 3)
        self.gru = torch.nn.GRUCell(4, 3)

    def forward(self, x):
        h = torch.zeros(x.size(1), 3, device=x.device)
        c = torch.zeros(x.size(1), 3, device=x.device)
        g = torch.zeros(x.size(1), 3, device=x.device)
        for t in range(x.size(0)):
            h, c = self.lstm(x[t], (h, c))
            g = self.gru(x[t], g)
        return h + g


@PATHS
def test_scripted_cells_in_a_loop_of_a_dynamic_count_from_cuda(dynamo):
    # The loop's body reads the cells' weights, lifted out of it (capture/torchscript/loops.py).
    torch.manual_seed(0)
    model = torch.jit.script(_CellsInADynamicLoop().cuda())
    x = torch.randn(5, 2, 4, device="cuda")
    program = onnxport.export(model, (x,), input_names=["x"],
                              dynamic_axes={"x": {0: "t", 1: "b"}}, dynamo=dynamo)
    _compare(program, model, ((x,), {}), ((torch.randn(8, 3, 4, device="cuda"),), {}))


@torch.jit.script
def _rows_scaled_by_their_index(x: torch.Tensor) -> torch.Tensor:
    out = []
    for i in range(x.size(0)):
        out.append(x[i] * float(i))
    return torch.stack(out) if len(out) > 0 else x


def _fake_quantized(x):
    return torch.fake_quantize_per_channel_affine(
        x, torch.full((x.size(1),), 0.1, device=x.device),
        torch.zeros(x.size(1), dtype=torch.int32, device=x.device), 1, 0, 255)


# The issue-18 behaviours (data-dependent sizes, scripted code, the ops added for it), each a
# function of inputs made at a size n (5 for the example, 3 for the second run); an input's
# axis 0 is dynamic. Made on cuda, run on the CPU in ONNX Runtime.
BEHAVIOURS = {
    "arange by a traced size": (lambda x: x * torch.arange(x.size(1), device=x.device),
                                lambda n: (torch.randn(n, 4),)),
    "float-step arange": (lambda x: x[:1] + torch.arange(0.0, 2.0, 0.25, device=x.device),
                          lambda n: (torch.randn(n, 8),)),
    "boolean mask read": (lambda x: x[x > 0], lambda n: (torch.randn(n, 4),)),
    "boolean mask written": (lambda x: x.masked_fill(x < 0, 0.0).index_put(
        (x > 1,), torch.tensor(7.0, device=x.device)), lambda n: (torch.randn(n, 4),)),
    "repeat_interleave by a tensor": (lambda x, r: x.repeat_interleave(r, dim=0),
                                      lambda n: (torch.randn(n, 2), torch.arange(n) % 3)),
    ".item() as a size": (lambda x, k: x[:, :int(k.item())] * 2,
                          lambda n: (torch.randn(n, 6), torch.tensor(4))),
    "chunk of a dynamic axis": (lambda x: x.chunk(3, dim=0)[0] + 1,
                                lambda n: (torch.randn(n, 2),)),
    "narrow by a traced size": (lambda x: x.narrow(0, 1, x.size(0) - 1),
                                lambda n: (torch.randn(n, 3),)),
    "index_select by a 0-d index": (lambda x: torch.index_select(
        x, 1, torch.tensor(1, device=x.device)), lambda n: (torch.randn(n, 4),)),
    "std, var_mean unbiased=False": (lambda x: (torch.std(x, unbiased=False),
                                                *torch.var_mean(x, 1, unbiased=False)),
                                     lambda n: (torch.randn(n, 4),)),
    "argmax keepdim, no dim": (lambda x: torch.argmax(x, keepdim=True),
                               lambda n: (torch.randn(n, 4, 2),)),
    "meshgrid, eye": (lambda x, y: (*torch.meshgrid(x, y, indexing="ij"),
                                    torch.eye(x.size(0), y.size(0), device=x.device)),
                      lambda n: (torch.randn(n), torch.randn(n + 1))),
    "hann_window, stft": (lambda x: torch.stft(
        x, 8, hop_length=2, window=torch.hann_window(8, periodic=True, device=x.device),
        return_complex=True).abs(), lambda n: (torch.randn(n, 40),)),
    "fake_quantize per channel": (_fake_quantized, lambda n: (torch.randn(n, 3, 2),)),
    "scripted loop over rows": (lambda x: _rows_scaled_by_their_index(x) + 1,
                                lambda n: (torch.randn(n, 3),)),
}


class _Function(torch.nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, *args):
        return self.function(*args)


@PATHS
@pytest.mark.parametrize("name", list(BEHAVIOURS))
def test_issue_18_behaviours_from_cuda(name, dynamo):
    function, make = BEHAVIOURS[name]
    model = _Function(function)
    torch.manual_seed(0)
    example = tuple(t.cuda() for t in make(5))
    names = [f"in{i}" for i in range(len(example))]
    axes = {n: {0: f"n{i}"} for i, (n, t) in enumerate(zip(names, example)) if t.dim() > 0}
    program = onnxport.export(model, example, input_names=names, dynamic_axes=axes,
                              dynamo=dynamo)
    _compare(program, model, (example, {}), (tuple(t.cuda() for t in make(3)), {}))
