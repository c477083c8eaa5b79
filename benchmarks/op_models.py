"""Export each model and pattern of issue 8 (recurrent layers, torchvision detection ops,
EmbeddingBag, cumprod, spectral ops, quantized and float16/bfloat16 models; random weights),
run it in ONNX Runtime (bfloat16: onnx's reference evaluator) and compare with eager; prints one
table row per case with the export seconds, the max abs difference, the tolerance and the node
counts of the ops each case is about. Dynamic cases also run at a second size.

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/op_models.py [--cases lstm,nms] [--json out.json]
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import time
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn.functional as F

# The ops the cases are about: their node counts are printed (main graph and subgraphs).
INTERESTING = ["LSTM", "GRU", "RNN", "NonMaxSuppression", "RoiAlign", "MaxRoiPool", "CumSum", "DFT",
               "STFT", "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear",
               "MatMulInteger", "QLinearMatMul", "QLinearConv", "Loop", "Scan"]


@dataclass
class Case:
    """A model, the inputs it is exported with (``runs[0]``) and run at, and how to compare."""

    model: Any
    runs: list[tuple]
    export: dict = field(default_factory=dict)
    rtol: float = 1e-3
    atol: float = 1e-4
    # Instead of rtol/atol: inputs -> an absolute tolerance, and why.
    atol_of: Callable[[tuple], float] | None = None
    why: str = ""
    # Eager's outputs to compare with (default: the model itself).
    reference: Callable | None = None
    runtime: str = "ort"  # or "reference-evaluator"
    full_check: bool = False
    # Also count the QLinear*/MatMulInteger nodes of the graph ONNX Runtime runs after its own
    # fusions (a Q/DQ graph becomes QLinearConv there).
    ort_fused: bool = False


def _seeded(factory, seed=0):
    torch.manual_seed(seed)
    return factory()


def _quiet(function, *args, **kwargs):
    with warnings.catch_warnings():  # torch.ao's notices that it moves to torchao
        warnings.simplefilter("ignore")
        return function(*args, **kwargs)


class Function(torch.nn.Module):
    """A function as a module whose forward has the function's parameters, so that
    dynamic_shapes can name each input."""

    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, *args):
        return self.function(*args)


def _function(function) -> Function:
    import inspect

    class Module(Function):
        def forward(self, *args):
            return self.function(*args)

    signature = inspect.signature(function)
    self_parameter = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    Module.forward.__signature__ = signature.replace(
        parameters=[self_parameter, *signature.parameters.values()])
    return Module(function)


# -- the word-language model of pytorch/examples (word_language_model/model.py) ----------------
class RNNModel(torch.nn.Module):
    """RNNModel: encoder, recurrent module, decoder; the hidden state passed in and returned."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super().__init__()
        self.ntoken = ntoken
        self.drop = torch.nn.Dropout(dropout)
        self.encoder = torch.nn.Embedding(ntoken, ninp)
        if rnn_type in ("LSTM", "GRU"):
            self.rnn = getattr(torch.nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        else:
            nonlinearity = {"RNN_TANH": "tanh", "RNN_RELU": "relu"}[rnn_type]
            self.rnn = torch.nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity,
                                    dropout=dropout)
        self.decoder = torch.nn.Linear(nhid, ntoken)
        if tie_weights:
            self.decoder.weight = self.encoder.weight
        self.rnn_type, self.nhid, self.nlayers = rnn_type, nhid, nlayers

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden


class PositionalEncoding(torch.nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = torch.nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0).transpose(0, 1))

    def forward(self, x):
        return self.dropout(x + self.pe[:x.size(0), :])


class TransformerModel(torch.nn.Transformer):
    """The example's TransformerModel. One change: the causal mask is made at each call, not
    cached on ``self.src_mask`` (an attribute written in forward, which capture refuses), and
    ``tie_weights`` is added (the example's RNN option, here on the embedding and decoder)."""

    def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5, tie_weights=False):
        super().__init__(d_model=ninp, nhead=nhead, dim_feedforward=nhid,
                         num_encoder_layers=nlayers)
        self.pos_encoder = PositionalEncoding(ninp, dropout)
        self.input_emb = torch.nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = torch.nn.Linear(ninp, ntoken)
        if tie_weights:
            self.decoder.weight = self.input_emb.weight

    def forward(self, src):
        mask = torch.log(torch.tril(torch.ones(len(src), len(src))))
        src = self.pos_encoder(self.input_emb(src) * math.sqrt(self.ninp))
        output = self.decoder(self.encoder(src, mask=mask))
        return F.log_softmax(output, dim=-1)


NTOKEN, BATCH = 50, 3


def _tokens(seq, seed):
    return torch.randint(0, NTOKEN, (seq, BATCH), generator=torch.Generator().manual_seed(seed))


def word_language(rnn_type, tied):
    def make():
        model = _seeded(lambda: RNNModel(rnn_type, NTOKEN, 12, 12, 2, tie_weights=tied)).eval()
        torch.manual_seed(1)

        def hidden():  # a state carried over from earlier text: not zeros
            shape = (2, BATCH, 12)
            if rnn_type == "LSTM":
                return (torch.randn(shape) * 0.5, torch.randn(shape) * 0.5)
            return torch.randn(shape) * 0.5

        return Case(model, [(_tokens(6, 0), hidden()), (_tokens(11, 1), hidden())],
                    dict(input_names=["input"], dynamic_axes={"input": {0: "sequence"}}))
    return make


def word_language_transformer(tied, dynamo=None):
    def make():
        model = _seeded(lambda: TransformerModel(NTOKEN, 16, 2, 32, 2, tie_weights=tied)).eval()
        return Case(model, [(_tokens(6, 0),), (_tokens(11, 1),)],
                    dict(dynamo=dynamo, input_names=["input"],
                         dynamic_axes={"input": {0: "sequence"}}))
    return make


# -- the LSTM FAQ of the TorchScript page -----------------------------------------------------
def lstm_faq(dynamo):
    def make():
        model = _seeded(lambda: torch.nn.LSTM(10, 20, num_layers=4, bidirectional=True)).eval()
        torch.manual_seed(1)
        h0, c0 = torch.randn(8, 3, 20), torch.randn(8, 3, 20)
        return Case(model, [(torch.randn(5, 3, 10), (h0, c0)), (torch.randn(8, 3, 10), (h0, c0))],
                    dict(dynamo=dynamo, input_names=["input", "h0", "c0"],
                         output_names=["output", "hn", "cn"],
                         dynamic_axes={"input": {0: "sequence"}, "output": {0: "sequence"}}))
    return make


# -- nn.LSTM/GRU/RNN and the cells -------------------------------------------------------------
class WithState(torch.nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x, h0, c0=None):
        return self.rnn(x, h0 if c0 is None else (h0, c0))


def recurrent_layer(kind, with_state):
    def make():
        rnn = _seeded(lambda: getattr(torch.nn, kind)(3, 5, num_layers=2, bidirectional=True,
                                                      batch_first=True)).eval()
        torch.manual_seed(1)

        def inputs(seq, batch):
            x = torch.randn(batch, seq, 3)
            if not with_state:
                return (x,)
            return (x, *[torch.randn(4, batch, 5) for _ in range(2 if kind == "LSTM" else 1)])

        seq, batch = torch.export.Dim("seq"), torch.export.Dim("batch")
        shapes = [{0: batch, 1: seq}]
        if with_state:
            shapes += [{1: batch}] * (2 if kind == "LSTM" else 1)
        return Case(WithState(rnn) if with_state else rnn, [inputs(4, 2), inputs(7, 3)],
                    dict(dynamic_shapes=tuple(shapes)))
    return make


def recurrent_cell(kind):
    def make():
        cell = _seeded(lambda: getattr(torch.nn, kind)(3, 5)).eval()
        torch.manual_seed(1)
        states = 2 if kind == "LSTMCell" else 1
        model = Function(lambda x, *s: cell(x, tuple(s) if len(s) > 1 else s[0]))
        return Case(model, [(torch.randn(2, 3), *[torch.randn(2, 5) for _ in range(states)])])
    return make


# -- torchvision ops ---------------------------------------------------------------------------
def _boxes(n, seed):
    generator = torch.Generator().manual_seed(seed)
    corner = torch.rand(n, 2, generator=generator) * 20
    size = torch.rand(n, 2, generator=generator) * 10 + 1
    return torch.cat([corner, corner + size], 1)


def _scores(n, seed):  # a permutation: no ties, so the order of the kept boxes is unique
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed)).float() / n


def _rois(k, seed, batch=2):
    generator = torch.Generator().manual_seed(seed)
    index = torch.randint(0, batch, (k, 1), generator=generator).float()
    return torch.cat([index, _boxes(k, seed) * 2], 1)


def nms():
    from torchvision.ops import nms

    n = torch.export.Dim("n", min=2, max=1000)
    return Case(_function(lambda b, s: nms(b, s, 0.5)),
                [(_boxes(30, 0), _scores(30, 0)), (_boxes(50, 1), _scores(50, 1))],
                dict(dynamic_shapes=({0: n}, {0: n})))


def batched_nms():
    from torchvision.ops import batched_nms

    def classes(k, seed):
        return torch.randint(0, 3, (k,), generator=torch.Generator().manual_seed(seed))

    n = torch.export.Dim("n", min=2, max=1000)
    return Case(_function(lambda b, s, c: batched_nms(b, s, c, 0.5)),
                [(_boxes(30, 0), _scores(30, 0), classes(30, 0)),
                 (_boxes(50, 1), _scores(50, 1), classes(50, 1))],
                dict(dynamic_shapes=({0: n}, {0: n}, {0: n})))


def roi_op(name, **options):
    def make():
        import torchvision.ops

        op = getattr(torchvision.ops, name)
        # ps_ ops: channels = output bins x output channels.
        channels = 2 * 3 * 4 if name.startswith("ps_") else 3
        x = torch.randn(2, channels, 24, 24, generator=torch.Generator().manual_seed(2))
        k = torch.export.Dim("k", min=2, max=100)
        return Case(_function(lambda x, rois: op(x, rois, (3, 4), 0.5, **options)),
                    [(x, _rois(5, 0)), (x, _rois(9, 3))], dict(dynamic_shapes=(None, {0: k})))
    return make


# -- EmbeddingBag, cumprod ---------------------------------------------------------------------
INDICES = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0, 2])
OFFSETS = torch.tensor([0, 4, 4, 7])  # bag 1 is empty


def embedding_bag(mode, weighted=False):
    def make():
        bag = _seeded(lambda: torch.nn.EmbeddingBag(10, 3, mode=mode)).eval()
        n, bags = torch.export.Dim("n", min=2, max=100), torch.export.Dim("bags", min=2, max=50)
        other = (torch.tensor([3, 3, 2, 7, 1, 0]), torch.tensor([0, 1, 1, 5, 5]))
        if not weighted:
            return Case(bag, [(INDICES, OFFSETS), other],
                        dict(dynamic_shapes=({0: n}, {0: bags})))
        weights = torch.rand(10, generator=torch.Generator().manual_seed(3))
        return Case(bag, [(INDICES, OFFSETS, weights), (*other, weights[:6])],
                    dict(dynamic_shapes=({0: n}, {0: bags}, {0: n})))
    return make


def cumprod():
    x = torch.randn(3, 7, generator=torch.Generator().manual_seed(4))
    x[1, 2] = 0.0  # exp(cumsum(log)) would give nan here
    n = torch.export.Dim("n", min=2, max=100)
    return Case(_function(lambda t: torch.cumprod(t, 1)), [(x,), (torch.randn(3, 12),)],
                dict(dynamic_shapes=({1: n},)))


# -- spectral ----------------------------------------------------------------------------------
def _hann(n):
    return torch.hann_window(n)


SPECTRAL = {
    "stft": lambda x: torch.view_as_real(torch.stft(x, 16, hop_length=4, window=_hann(16),
                                                    return_complex=True)),
    "istft": lambda x: torch.istft(torch.stft(x, 16, hop_length=4, window=_hann(16),
                                              return_complex=True), 16, hop_length=4,
                                   window=_hann(16)),
    "rfft": lambda x: torch.view_as_real(torch.fft.rfft(x, norm="ortho")),
    "irfft": lambda x: torch.fft.irfft(torch.fft.rfft(x) * 0.5, n=x.shape[-1]),
}


def spectral(name, opset):
    def make():
        batch = torch.export.Dim("batch", min=1, max=64)
        torch.manual_seed(5)
        return Case(_function(SPECTRAL[name]), [(torch.randn(2, 64),), (torch.randn(5, 64),)],
                    dict(opset_version=opset, dynamic_shapes=({0: batch},)))
    return make


# -- quantization ------------------------------------------------------------------------------
quantization = torch.ao.quantization


def _activation_step(x: torch.Tensor, levels: int) -> float:
    """The step of a dynamic per-tensor uint8 grid over ``x``'s range (widened to hold 0)."""
    return float(x.max().clamp(min=0) - x.min().clamp(max=0)) / levels


def dynamic_linear():
    torch.manual_seed(0)
    model = _quiet(quantization.quantize_dynamic, torch.nn.Sequential(torch.nn.Linear(32, 16)),
                   {torch.nn.Linear}, dtype=torch.qint8).eval()
    weight_l1 = float(model[0].weight().dequantize().abs().sum(1).max())

    def atol(inputs):
        # Same int8 weights on both sides; eager rounds the input to 0..127 (reduce_range),
        # DynamicQuantizeLinear to 0..255, each off by half its step per input element.
        x = inputs[0]
        return weight_l1 * (_activation_step(x, 127) + _activation_step(x, 255)) / 2 + 1e-5

    batch = torch.export.Dim("batch", min=1, max=64)
    return Case(model, [(torch.randn(8, 32),), (torch.randn(3, 32) * 4,)],
                dict(dynamic_shapes=({0: batch},)), atol_of=atol,
                why="max_row sum|w| x (eager's + ONNX's input step)/2: input rounding")


def dynamic_lstm():
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(8, 16, num_layers=2, batch_first=True, bidirectional=True)
    model = _quiet(quantization.quantize_dynamic, torch.nn.Sequential(lstm), {torch.nn.LSTM},
                   dtype=torch.qint8).eval()
    dims = {0: torch.export.Dim("batch", min=1, max=64),
            1: torch.export.Dim("seq", min=2, max=100)}
    return Case(model, [(torch.randn(3, 7, 8),), (torch.randn(5, 11, 8),)],
                dict(dynamic_shapes=(dims,)), atol_of=lambda inputs: 3e-2,
                why="eager rounds each step's input to a dynamic uint8 grid, ONNX LSTM has no "
                    "integer form: eager's own distance from the float LSTM (measured 1e-2)")


class QuantizedConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.quant = quantization.QuantStub()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.relu1 = torch.nn.ReLU()
        self.conv2 = torch.nn.Conv2d(8, 8, 3, groups=2)
        self.relu2 = torch.nn.ReLU()
        self.skip = torch.nn.quantized.FloatFunctional()
        self.fc = torch.nn.Linear(8 * 10 * 10, 5)
        self.dequant = quantization.DeQuantStub()

    def forward(self, x):
        x = self.relu1(self.conv1(self.quant(x)))
        y = self.relu2(self.conv2(x))
        y = self.skip.add(y, x[:, :, 1:-1, 1:-1])
        return self.dequant(self.fc(torch.flatten(y, 1)))


def static_conv_net(backend):
    def make():
        model = _seeded(QuantizedConvNet).eval()
        model = quantization.fuse_modules(model, [["conv1", "relu1"], ["conv2", "relu2"]])
        model.qconfig = quantization.get_default_qconfig(backend)
        prepared = _quiet(quantization.prepare, model)
        for _ in range(8):  # calibration
            prepared(torch.randn(4, 3, 12, 12))
        model = _quiet(quantization.convert, prepared)
        step = float(model.fc.scale)
        torch.manual_seed(6)
        return Case(model, [(torch.randn(4, 3, 12, 12),)], ort_fused=True,
                    atol_of=lambda inputs: 2 * step * 1.001,
                    why=f"2 steps of the output grid ({step:.3g}): a sum at a rounding tie lands "
                        "one step away, and may move a later sum one more")
    return make


# -- precision ---------------------------------------------------------------------------------
def _float32_of(model):
    reference = copy.deepcopy(model).float()
    return lambda *inputs: reference(*[x.float() for x in inputs])


def float16_resnet18():
    import torchvision

    model = _seeded(lambda: torchvision.models.resnet18(weights=None)).eval().half()
    torch.manual_seed(7)
    x = torch.randn(1, 3, 64, 64).half()
    reference = _float32_of(model)
    return Case(model, [(x,)], reference=reference, full_check=True,
                atol_of=lambda inputs: 5e-3 * float(reference(*inputs).detach().abs().max()),
                why="vs eager in float32 on the same fp16 weights; 5e-3 x max|y|: fp16's "
                    "relative step 2^-11, rounded differently in 20 layers")


def _bf16_conv_net():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.AvgPool2d(2), torch.nn.Flatten(), torch.nn.Linear(8 * 3 * 3, 4),
        torch.nn.Softmax(-1))


def bfloat16(kind, opset):
    def make():
        if kind == "conv_net":
            model, shape, atol = _seeded(_bf16_conv_net), (2, 3, 14, 14), 1e-2
        else:
            model = _seeded(lambda: torch.nn.TransformerEncoderLayer(
                32, 4, 64, batch_first=True, dropout=0.0))
            shape, atol = (2, 5, 32), 6e-2
        model = model.eval().bfloat16()
        torch.manual_seed(8)
        return Case(model, [(torch.randn(*shape).bfloat16(),)], dict(opset_version=opset),
                    reference=_float32_of(model), runtime="reference-evaluator", full_check=True,
                    atol_of=lambda inputs: atol,
                    why="vs eager in float32 on the same bf16 weights; bf16's relative step "
                        "2^-8 at each rounded intermediate")
    return make


CASES: dict[str, Callable[[], Case]] = {
    "word_language LSTM": word_language("LSTM", False),
    "word_language LSTM tied": word_language("LSTM", True),
    "word_language GRU": word_language("GRU", False),
    "word_language GRU tied": word_language("GRU", True),
    "word_language RNN_TANH": word_language("RNN_TANH", False),
    "word_language RNN_TANH tied": word_language("RNN_TANH", True),
    "word_language Transformer": word_language_transformer(False),
    "word_language Transformer tied": word_language_transformer(True),
    "word_language Transformer dynamo=False": word_language_transformer(False, False),
    "word_language Transformer tied dynamo=False": word_language_transformer(True, False),
    "LSTM FAQ (dynamic_axes)": lstm_faq(None),
    "LSTM FAQ (dynamic_axes) dynamo=False": lstm_faq(False),
    "LSTM 2-layer bidir batch_first": recurrent_layer("LSTM", False),
    "LSTM 2-layer bidir batch_first h0,c0": recurrent_layer("LSTM", True),
    "GRU 2-layer bidir batch_first": recurrent_layer("GRU", False),
    "GRU 2-layer bidir batch_first h0": recurrent_layer("GRU", True),
    "RNN 2-layer bidir batch_first": recurrent_layer("RNN", False),
    "RNN 2-layer bidir batch_first h0": recurrent_layer("RNN", True),
    "LSTMCell": recurrent_cell("LSTMCell"),
    "GRUCell": recurrent_cell("GRUCell"),
    "nms": nms,
    "batched_nms": batched_nms,
    "roi_align aligned=False sr=-1": roi_op("roi_align", sampling_ratio=-1, aligned=False),
    "roi_align aligned=True sr=2": roi_op("roi_align", sampling_ratio=2, aligned=True),
    "roi_align aligned=True sr=-1": roi_op("roi_align", sampling_ratio=-1, aligned=True),
    "roi_pool": roi_op("roi_pool"),
    "ps_roi_align sr=2": roi_op("ps_roi_align", sampling_ratio=2),
    "ps_roi_align sr=-1": roi_op("ps_roi_align", sampling_ratio=-1),
    "ps_roi_pool": roi_op("ps_roi_pool"),
    "EmbeddingBag sum": embedding_bag("sum"),
    "EmbeddingBag mean": embedding_bag("mean"),
    "EmbeddingBag max": embedding_bag("max"),
    "EmbeddingBag sum per_sample_weights": embedding_bag("sum", weighted=True),
    "cumprod": cumprod,
    "stft opset17": spectral("stft", 17),
    "istft opset17": spectral("istft", 17),
    "rfft opset17": spectral("rfft", 17),
    "irfft opset17": spectral("irfft", 17),
    "stft opset18": spectral("stft", 18),
    "irfft opset20": spectral("irfft", 20),
    "quantize_dynamic Linear": dynamic_linear,
    "quantize_dynamic LSTM": dynamic_lstm,
    "static conv net x86": static_conv_net("x86"),
    "static conv net fbgemm": static_conv_net("fbgemm"),
    "float16 resnet18": float16_resnet18,
    "bfloat16 conv net opset18": bfloat16("conv_net", 18),
    "bfloat16 conv net opset22": bfloat16("conv_net", 22),
    "bfloat16 transformer layer": bfloat16("transformer_layer", 18),
}


def _tensors(value) -> list[torch.Tensor]:
    return [t for t in torch.utils._pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


def _reference_evaluator_run(program, inputs) -> list[torch.Tensor]:
    """The model in onnx's reference evaluator; bfloat16 travels as ml_dtypes' bfloat16."""
    import ml_dtypes
    import numpy as np
    from onnx.reference import ReferenceEvaluator

    def numpy(x):
        return x.view(torch.int16).numpy().view(ml_dtypes.bfloat16) \
            if x.dtype == torch.bfloat16 else x.numpy()

    proto = program.model_proto
    feeds = {i.name: numpy(x) for i, x in zip(proto.graph.input, _tensors(inputs))}
    return [torch.from_numpy(np.asarray(out, dtype=np.float32))
            for out in ReferenceEvaluator(proto).run(None, feeds)]


def _op_counts(program) -> dict[str, int]:
    import onnx_ir as ir

    counts: dict[str, int] = {}
    for node in ir.traversal.RecursiveGraphIterator(program.model.graph):
        if node.op_type in INTERESTING:
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts


def _ort_fused_counts(program) -> dict[str, int]:
    """The quantized node counts of the graph ONNX Runtime runs after its fusions."""
    import os
    import tempfile

    import onnx
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "model.onnx")
        program.save(path)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.optimized_model_filepath = os.path.join(directory, "optimized.onnx")
        ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        types = [n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node]
    return {t: types.count(t) for t in ("QLinearConv", "QLinearMatMul", "MatMulInteger")
            if t in types}


def warm_up() -> None:
    """One untimed export, so that the first row does not count imports and registry loading."""
    import onnxport

    onnxport.export(torch.nn.Linear(2, 2).eval(), (torch.randn(1, 2),))


def run_case(name: str) -> dict:
    """Export the case ``name``, compare at each of its inputs; the row as a dict."""
    import onnx

    import onnxport

    row: dict[str, Any] = {"case": name, "status": "", "path": "", "export_seconds": None,
                           "max_abs_diff": None, "tolerance": "", "runtime": "", "ops": {},
                           "error": ""}
    try:
        case = CASES[name]()
        options = dict(case.export)
        row["path"] = "TorchScript (dynamo=False)" if options.get("dynamo") is False else "dynamo"
        if options.get("dynamo", 0) is None:
            del options["dynamo"]
        row["runtime"] = case.runtime
        model = case.model
        start = time.perf_counter()
        program = onnxport.export(model, tuple(case.runs[0]), **options)
        row["export_seconds"] = time.perf_counter() - start
        if program.capture_strategy:
            row["path"] += f" [{program.capture_strategy}]"
        row["ops"] = _op_counts(program)
        if case.ort_fused:
            row["ops"].update({f"ORT-fused {k}": v for k, v in _ort_fused_counts(program).items()})
        if case.full_check:
            onnx.checker.check_model(program.model_proto, full_check=True)
            row["runtime"] += ", checker full_check ok"
        reference = case.reference or model
        worst, failures = 0.0, []
        for run, inputs in enumerate(case.runs):
            with torch.no_grad():
                expected = _tensors(reference(*copy.deepcopy(inputs)))
            actual = (_reference_evaluator_run(program, inputs) if case.runtime != "ort"
                      else program(*copy.deepcopy(inputs)))
            if len(actual) != len(expected):
                raise AssertionError(f"{len(actual)} outputs, eager has {len(expected)}")
            atol = case.atol_of(inputs) if case.atol_of else case.atol
            rtol = 0.0 if case.atol_of else case.rtol
            row["tolerance"] = (f"atol {atol:.3g}" if case.atol_of
                                else f"rtol {rtol:g}, atol {atol:g}")
            for i, (a, e) in enumerate(zip(actual, expected)):
                if a.shape != e.shape:
                    failures.append(f"run {run} output {i}: shape {list(a.shape)} vs "
                                    f"{list(e.shape)}")
                    continue
                a, e = a.double(), e.double()
                if a.numel():
                    diff = (a - e).abs().nan_to_num(0.0)
                    worst = max(worst, float(diff.max()))
                if not torch.allclose(a, e, rtol=rtol, atol=atol, equal_nan=True):
                    failures.append(f"run {run} output {i}: max abs diff "
                                    f"{float((a - e).abs().max()):.3g}")
        if case.why:
            row["tolerance"] += f" ({case.why})"
        if len(case.runs) > 1:
            row["tolerance"] += f"; {len(case.runs)} input sizes"
        row["max_abs_diff"] = worst
        row["status"] = "FAIL" if failures else "pass"
        row["error"] = "; ".join(failures)
    except Exception as error:  # a failing case is reported, and the run goes on
        row["status"] = "FAIL"
        # The first line, and the first reason under it when it announces a list.
        lines = [line.strip() for line in str(error).splitlines() if line.strip()] or [""]
        message = " ".join(lines[:2]) if lines[0].endswith(":") and len(lines) > 1 else lines[0]
        row["error"] = f"{type(error).__name__}: {message}"
        row["traceback"] = traceback.format_exc()
    return row


def format_table(rows: list[dict]) -> str:
    lines = ["| case | export path | export s | max abs diff | status | tolerance | ops |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        seconds = f"{row['export_seconds']:.2f}" if row["export_seconds"] is not None else "-"
        diff = f"{row['max_abs_diff']:.3g}" if row["max_abs_diff"] is not None else "-"
        runtime = row["runtime"].removeprefix("ort").removeprefix(", ")
        runtime = f" [{runtime}]" if runtime else ""
        ops = ", ".join(f"{k} {v}" for k, v in row["ops"].items())
        status = row["status"] + (f": {row['error']}" if row["error"] else "")
        lines.append(f"| {row['case']} | {row['path']} | {seconds} | {diff}{runtime} | "
                     f"{status} | {row['tolerance']} | {ops} |")
    passed = sum(row["status"] == "pass" for row in rows)
    lines.append(f"\n{passed} / {len(rows)} cases pass")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", help="comma-separated case names, or parts of them")
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--verbose", action="store_true", help="print failing cases' tracebacks")
    arguments = parser.parse_args(argv)
    names = list(CASES)
    if arguments.cases:
        wanted = [w.strip() for w in arguments.cases.split(",")]
        # A whole case name selects that case; any other word, every case containing it.
        names = [n for n in names if any(w == n if w in CASES else w.lower() in n.lower()
                                         for w in wanted)]
    warm_up()
    rows = []
    for name in names:
        row = run_case(name)
        rows.append(row)
        print(f"{row['status']:4} {name} ({row['export_seconds'] or 0:.2f} s) {row['error']}",
              flush=True)
        if arguments.verbose and row.get("traceback"):
            print(row["traceback"])
    print()
    print(format_table(rows))
    if arguments.json:
        with open(arguments.json, "w") as file:
            json.dump(rows, file, indent=1, default=str)
    return 0 if all(row["status"] == "pass" for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
