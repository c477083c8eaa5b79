"""Recurrent layers fed a PackedSequence (pack_padded_sequence -> LSTM/GRU/RNN ->
pad_packed_sequence), captured as one call on the padded batch and its lengths, which ONNX's
LSTM/GRU/RNN take as ``sequence_lens``; torch.onnx removed the packing around the layer the
same way. Captured as torch runs it, a packed sequence's size is the sum of the lengths (a
value), and the layer's zero state is sized by ``batch_sizes[0]`` (a value), so neither
torch.export nor a dynamic batch can follow it."""

from __future__ import annotations

import contextlib
import threading

import torch
import torch.nn.utils.rnn as rnn_utils
from torch.nn.utils.rnn import PackedSequence

_VF = torch._C._VariableFunctions
_RUN = {"LSTM": _VF.lstm, "GRU": _VF.gru, "RNN_TANH": _VF.rnn_tanh, "RNN_RELU": _VF.rnn_relu}


def _packed_run(mode: str, input, lengths, hx: list, params: list, has_biases: bool,
                num_layers: int, bidirectional: bool):
    """Eager: torch's own packed layer on the time-major padded ``input`` (lengths sorted,
    longest first), padded again to the input's length."""
    data, batch_sizes = _VF._pack_padded_sequence(input, lengths.cpu(), False)
    state = tuple(hx) if mode == "LSTM" else hx[0]
    output, *states = _RUN[mode](data, batch_sizes, state, params, has_biases, num_layers, 0.0,
                                 False, bidirectional)
    padded, _ = _VF._pad_packed_sequence(output, batch_sizes, False, 0.0, input.shape[0])
    return padded, *states


@torch.library.custom_op("onnxport::packed_lstm", mutates_args=())
def packed_lstm(input: torch.Tensor, lengths: torch.Tensor, hx: list[torch.Tensor],
                params: list[torch.Tensor], has_biases: bool, num_layers: int,
                bidirectional: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _packed_run("LSTM", input, lengths, hx, params, has_biases, num_layers, bidirectional)


@torch.library.custom_op("onnxport::packed_rnn", mutates_args=())
def packed_rnn(input: torch.Tensor, lengths: torch.Tensor, hx: torch.Tensor,
               params: list[torch.Tensor], mode: str, has_biases: bool, num_layers: int,
               bidirectional: bool) -> tuple[torch.Tensor, torch.Tensor]:
    return _packed_run(mode, input, lengths, [hx], params, has_biases, num_layers, bidirectional)


def _output_like(input, hidden_size: int, bidirectional: bool):
    directions = 2 if bidirectional else 1
    return input.new_empty((input.shape[0], input.shape[1], directions * hidden_size))


@packed_lstm.register_fake
def _(input, lengths, hx, params, has_biases, num_layers, bidirectional):
    return (_output_like(input, hx[0].shape[2], bidirectional), hx[0].new_empty(hx[0].shape),
            hx[1].new_empty(hx[1].shape))


@packed_rnn.register_fake
def _(input, lengths, hx, params, mode, has_biases, num_layers, bidirectional):
    return _output_like(input, hx.shape[2], bidirectional), hx.new_empty(hx.shape)


class _PackedAsPadded:
    """Packing keeps the batch padded: ``data`` is the time-major padded batch flattened to
    [length * batch, features], and ``batch_sizes`` a stand-in of the padded length whose
    padded batch and lengths are remembered here (by identity) for the layer and unpacking.
    It stands in for torch.nn.utils.rnn's ``_VF`` (its packing kernels), delegating the rest,
    so that nothing else of the capture runs through it."""

    def __init__(self, vf):
        self._vf = vf
        self._thread = threading.get_ident()  # the exporting thread; others pack as before
        self.packed: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}

    def __getattr__(self, name):
        return getattr(self._vf, name)

    def _pack_padded_sequence(self, input, lengths, batch_first):
        if threading.get_ident() != self._thread:
            return self._vf._pack_padded_sequence(input, lengths, batch_first)
        return self._pack(input, lengths, batch_first)

    def _pad_packed_sequence(self, data, batch_sizes, batch_first, padding_value, total_length):
        if id(batch_sizes) not in self.packed:
            return self._vf._pad_packed_sequence(data, batch_sizes, batch_first, padding_value,
                                                 total_length)
        return self._pad(data, batch_sizes, batch_first, padding_value, total_length)

    def _pack(self, input, lengths, batch_first):
        padded = input.transpose(0, 1) if batch_first else input
        data = padded.reshape(-1, padded.shape[2])
        # pad_packed_sequence reads the padded length as batch_sizes.size(0); PackedSequence
        # takes batch_sizes on the CPU only (the input may be on cuda).
        batch_sizes = torch.zeros_like(padded[:, 0, 0], dtype=torch.int64, device="cpu")
        self.packed[id(batch_sizes)] = (batch_sizes, padded, lengths)
        return data, batch_sizes

    def _pad(self, data, batch_sizes, batch_first, padding_value, total_length):
        _, padded, lengths = self.packed[id(batch_sizes)]
        output = data.reshape(padded.shape[0], padded.shape[1], data.shape[-1])
        if padding_value != 0:  # ONNX's layers leave zeros past each length
            steps = torch.arange(output.shape[0], device=output.device).unsqueeze(1)
            valid = steps < lengths.to(output.device).unsqueeze(0)
            output = torch.where(valid.unsqueeze(-1), output,
                                 torch.full_like(output, padding_value))
        return (output.transpose(0, 1) if batch_first else output), lengths

    def layer(self, module, input, hx):
        """The layer's (output, state) on a packed input this mode made, else None."""
        if not isinstance(input, PackedSequence) or id(input.batch_sizes) not in self.packed:
            return None
        if module.training and module.dropout > 0:
            return None  # random between layers: torch's own, which tracing fixes
        data, batch_sizes, sorted_indices, unsorted_indices = input
        _, padded, lengths = self.packed[id(batch_sizes)]
        x = data.reshape(padded.shape[0], padded.shape[1], data.shape[-1])
        batch = x.shape[1]
        layers = module.num_layers * (2 if module.bidirectional else 1)
        hidden = module.proj_size if getattr(module, "proj_size", 0) > 0 else module.hidden_size
        weights = list(module._flat_weights)
        if module.mode == "LSTM":
            if hx is None:
                hx = (x.new_zeros(layers, batch, hidden),
                      x.new_zeros(layers, batch, module.hidden_size))
            else:
                hx = module.permute_hidden(hx, sorted_indices)
            output, *state = torch.ops.onnxport.packed_lstm(
                x, lengths, list(hx), weights, module.bias, module.num_layers,
                module.bidirectional)
            state = module.permute_hidden(tuple(state), unsorted_indices)
        else:
            hx = (x.new_zeros(layers, batch, hidden) if hx is None
                  else module.permute_hidden(hx, sorted_indices))
            output, state = torch.ops.onnxport.packed_rnn(
                x, lengths, hx, weights, module.mode, module.bias, module.num_layers,
                module.bidirectional)
            state = module.permute_hidden(state, unsorted_indices)
        packed = PackedSequence(output.reshape(-1, output.shape[-1]), batch_sizes,
                                sorted_indices, unsorted_indices)
        return packed, state


@contextlib.contextmanager
def packed_sequences_as_padded():
    """While active, pack_padded_sequence, nn.LSTM/GRU/RNN on its result and
    pad_packed_sequence compute on the padded batch and its lengths (one onnxport::packed_lstm
    or packed_rnn call); other uses of recurrent layers run as before."""
    mode = _PackedAsPadded(rnn_utils._VF)
    classes = (torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN)
    originals = {cls: cls.forward for cls in classes}

    def patched(original):
        def forward(self, input, hx=None):
            result = mode.layer(self, input, hx)
            return original(self, input, hx) if result is None else result

        return forward

    for cls in classes:
        cls.forward = patched(originals[cls])
    rnn_utils._VF = mode
    try:
        yield
    finally:
        rnn_utils._VF = mode._vf
        for cls, forward in originals.items():
            cls.forward = forward
