"""Recurrent layers: nn.LSTM, nn.GRU and nn.RNN (and their cells) as ONNX LSTM, GRU and RNN
nodes, one per layer, with PyTorch's weights reordered into ONNX's gate order."""

from __future__ import annotations

import weakref

import torch

from onnxport.errors import TranslationError
from onnxport.translate.ops._helpers import split, squeeze, unsqueeze
from onnxport.translate.registry import translates

# Where ONNX's gates are in PyTorch's weight rows: PyTorch stacks LSTM gates as (i, f, g, o)
# and ONNX as (i, o, f, c); GRU as (r, z, n) against ONNX's (z, r, h). RNN has one gate.
_GATE_ORDER = {"LSTM": (0, 3, 1, 2), "GRU": (1, 0, 2), "RNN": (0,)}


# Per graph builder: the initializers made for each set of parameters.
_REORDERED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _reorder_gates(g, weight, kind: str, hidden: int):
    """``weight`` ([gates * hidden, ...] or [gates * hidden]) with its gate blocks in ONNX's
    order, computed in the graph (for weights that are not constants)."""
    order = _GATE_ORDER[kind]
    if order == tuple(range(len(order))):
        return weight
    parts = split(g, weight, [hidden] * len(order), 0)
    return g.op("Concat", *[parts[i] for i in order], axis_i=0)


def _reorder_gates_now(tensor: torch.Tensor, kind: str, hidden: int) -> torch.Tensor:
    blocks = tensor.split(hidden, 0)
    return torch.cat([blocks[i] for i in _GATE_ORDER[kind]], 0)


def _constant(value) -> torch.Tensor | None:
    """The tensor of a weight that is a constant of the graph (a parameter exported as an
    initializer, not a graph input the user may feed), else None."""
    if value is None or value.const_value is None or value.is_graph_input():
        return None
    raw = getattr(value.const_value, "raw", None)
    if isinstance(raw, torch.Tensor):
        return raw.detach()
    return torch.from_numpy(value.const_value.numpy().copy())


def _direction_weights(g, kind: str, hidden: int, directions: list[tuple], suffix: str):
    """ONNX's W [D, G*H, I], R [D, G*H, H] and B [D, 2*G*H] (or None) from each direction's
    (w_ih, w_hh, b_ih, b_hh).

    Parameters are reordered here, into initializers named after the node (``lstm__W_l0``):
    nothing is reordered at run time, whatever the weights' size (FoldConstants would leave a
    graph reordering of weights over its size limit, e.g. a 1024-wide LSTM, to every run).
    Weights that are not constants (export_params=False, computed weights) are reordered by
    Split/Concat in the graph."""
    gates = len(_GATE_ORDER[kind]) * hidden
    has_bias = any(b is not None for _, _, *biases in directions for b in biases)
    constants = [[_constant(v) for v in direction] for direction in directions]
    if all(c is not None or v is None
           for direction, found in zip(directions, constants) for v, c in zip(direction, found)):
        # A layer called again (a decoder stepping an LSTM) uses the same initializers.
        # By the tensors' memory: a closure's layer is lifted to new constants at each call.
        key = (kind, tuple(None if c is None else (c.data_ptr(), c.shape, c.stride(), c.dtype)
                           for found in constants for c in found))
        cache = _REORDERED.setdefault(g, {})
        if key in cache:
            return cache[key]
        prefix = g.provenance.value_prefix
        stacked = {
            "W": torch.stack([_reorder_gates_now(c[0], kind, hidden) for c in constants]),
            "R": torch.stack([_reorder_gates_now(c[1], kind, hidden) for c in constants]),
        }
        if has_bias:
            zeros = torch.zeros(gates, dtype=constants[0][0].dtype)
            stacked["B"] = torch.stack([
                torch.cat([_reorder_gates_now(b if b is not None else zeros, kind, hidden)
                           for b in c[2:]]) for c in constants])
        values = {letter: g.initializer(f"{prefix}__{letter}{suffix}", tensor.contiguous())
                  for letter, tensor in stacked.items()}
        cache[key] = values["W"], values["R"], values.get("B")
        return cache[key]

    ws, rs, bs = [], [], []
    for w_ih, w_hh, b_ih, b_hh in directions:
        ws.append(unsqueeze(g, _reorder_gates(g, w_ih, kind, hidden), [0]))
        rs.append(unsqueeze(g, _reorder_gates(g, w_hh, kind, hidden), [0]))
        if has_bias:
            zeros = torch.zeros(gates, dtype=torch.float32)
            b_ih = b_ih if b_ih is not None else g.const(zeros, w_ih.dtype)
            b_hh = b_hh if b_hh is not None else g.const(zeros, w_ih.dtype)
            bias = g.op("Concat", _reorder_gates(g, b_ih, kind, hidden),
                        _reorder_gates(g, b_hh, kind, hidden), axis_i=0)
            bs.append(unsqueeze(g, bias, [0]))

    def stack(values):
        return values[0] if len(values) == 1 else g.op("Concat", *values, axis_i=0)

    return stack(ws), stack(rs), (stack(bs) if bs else None)


def _hidden_size(w_hh) -> int:
    size = w_hh.shape[1]
    if not isinstance(size, int):
        raise TranslationError("a recurrent layer's hidden size must be static (it is the "
                               f"size of its weight_hh, here {size})")
    return size


def _attributes(kind: str, hidden: int, num_directions: int, nonlinearity: str | None):
    attributes = {"hidden_size_i": hidden,
                  "direction_s": "bidirectional" if num_directions == 2 else "forward"}
    if kind == "GRU":
        # PyTorch applies the reset gate after the hidden state's linear map (n = tanh(W_in x
        # + b_in + r * (W_hn h + b_hn))); ONNX's default applies it before.
        attributes["linear_before_reset_i"] = 1
    if kind == "RNN":
        attributes["activations_s"] = [nonlinearity] * num_directions
    return attributes


def _recurrent(g, kind: str, input, states: list, params: list, has_biases: bool,
               num_layers: int, bidirectional: bool, batch_first: bool,
               nonlinearity: str | None = None, sequence_lens=None):
    """The layers of an LSTM/GRU/RNN, one ONNX node each: (output, final state(s)...), in
    PyTorch's layouts. ``states`` are h0 (and c0), each [layers * directions, batch, hidden];
    ``sequence_lens`` (int32 [batch]) each sequence's length, for a packed sequence."""
    num_directions = 2 if bidirectional else 1
    per_direction = 4 if has_biases else 2
    if len(params) != num_layers * num_directions * per_direction:
        # Only an LSTM with proj_size > 0 adds a weight (weight_hr) per layer and direction.
        raise TranslationError(
            f"nn.LSTM with proj_size > 0 ({g.provenance.aten} at "
            f"{g.provenance.source or g.provenance.scope or '?'}) has no ONNX form: ONNX's "
            "LSTM has no projection of the hidden state, and composing one would unroll the "
            "sequence. Export an LSTM with proj_size=0 (a Linear on its output projects the "
            "output, though not the state fed back).")
    hidden = _hidden_size(params[1])
    x = g.op("Transpose", input, perm_i=[1, 0, 2]) if batch_first else input
    # Each state as one [directions, batch, hidden] piece per layer.
    layer_states = [split(g, s, [num_directions] * num_layers, 0) if num_layers > 1 else (s,)
                    for s in states]
    finals: list[list] = [[] for _ in states]
    attributes = _attributes(kind, hidden, num_directions, nonlinearity)
    for layer in range(num_layers):
        directions = []
        for direction in range(num_directions):
            start = (layer * num_directions + direction) * per_direction
            w_ih, w_hh, *biases = params[start:start + per_direction]
            directions.append((w_ih, w_hh, *(biases or (None, None))))
        w, r, b = _direction_weights(g, kind, hidden, directions, f"_l{layer}")
        initial = [pieces[layer] for pieces in layer_states]
        outputs = g.op(kind, x, w, r, b, sequence_lens, *initial, outputs=1 + len(states),
                       **attributes)
        y, *final = outputs
        for collected, state in zip(finals, final):
            collected.append(state)
        # Y is [seq, directions, batch, hidden]; the next layer and PyTorch want
        # [seq, batch, directions * hidden].
        if num_directions == 1:
            x = squeeze(g, y, [1])
        else:
            x = g.op("Reshape", g.op("Transpose", y, perm_i=[0, 2, 1, 3]), g.const([0, 0, -1]))
    output = g.op("Transpose", x, perm_i=[1, 0, 2]) if batch_first else x
    final_states = [c[0] if len(c) == 1 else g.op("Concat", *c, axis_i=0) for c in finals]
    return (output, *final_states)


def _check_inference(train: bool, dropout: float) -> None:
    if train and dropout > 0:
        raise TranslationError(
            "a recurrent layer in training mode with dropout between layers is random; an "
            "exported graph is an inference graph: call model.eval() before exporting")


@translates("aten::lstm.input", since_opset=7)
def lstm(g, input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
         batch_first):
    """lstm.input(Tensor input, Tensor[] hx, Tensor[] params, bool has_biases, int num_layers, float dropout, bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor, Tensor)"""
    _check_inference(train, dropout)
    return _recurrent(g, "LSTM", input, list(hx), list(params), has_biases, num_layers,
                      bidirectional, batch_first)


@translates("aten::gru.input", since_opset=7)
def gru(g, input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
        batch_first):
    """gru.input(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers, float dropout, bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor)"""
    _check_inference(train, dropout)
    return _recurrent(g, "GRU", input, [hx], list(params), has_biases, num_layers,
                      bidirectional, batch_first)


@translates("aten::rnn_tanh.input", since_opset=7)
def rnn_tanh(g, input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
             batch_first):
    """rnn_tanh.input(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers, float dropout, bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor)"""
    _check_inference(train, dropout)
    return _recurrent(g, "RNN", input, [hx], list(params), has_biases, num_layers,
                      bidirectional, batch_first, "Tanh")


@translates("aten::rnn_relu.input", since_opset=7)
def rnn_relu(g, input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
             batch_first):
    """rnn_relu.input(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers, float dropout, bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor)"""
    _check_inference(train, dropout)
    return _recurrent(g, "RNN", input, [hx], list(params), has_biases, num_layers,
                      bidirectional, batch_first, "Relu")


# -- packed sequences: the padded batch and its lengths (capture/quirks/packed_sequences.py) ----
@translates("onnxport::packed_lstm", since_opset=7)
def packed_lstm(g, input, lengths, hx, params, has_biases, num_layers, bidirectional):
    """packed_lstm(Tensor input, Tensor lengths, Tensor[] hx, Tensor[] params, bool has_biases, int num_layers, bool bidirectional) -> (Tensor, Tensor, Tensor)"""
    return _recurrent(g, "LSTM", input, list(hx), list(params), has_biases, num_layers,
                      bidirectional, False, sequence_lens=g.op("Cast", lengths, to_i=6))


@translates("onnxport::packed_rnn", since_opset=7)
def packed_rnn(g, input, lengths, hx, params, mode, has_biases, num_layers, bidirectional):
    """packed_rnn(Tensor input, Tensor lengths, Tensor hx, Tensor[] params, str mode, bool has_biases, int num_layers, bool bidirectional) -> (Tensor, Tensor)"""
    kind, nonlinearity = {"GRU": ("GRU", None), "RNN_TANH": ("RNN", "Tanh"),
                          "RNN_RELU": ("RNN", "Relu")}[mode]
    return _recurrent(g, kind, input, [hx], list(params), has_biases, num_layers,
                      bidirectional, False, nonlinearity,
                      sequence_lens=g.op("Cast", lengths, to_i=6))


# -- cells: one step, as the same node over a sequence of length 1 -----------------------------
def _cell(g, kind: str, input, states: list, w_ih, w_hh, b_ih, b_hh,
          nonlinearity: str | None = None):
    if input.shape is None or len(input.shape) != 2:
        raise TranslationError(f"{g.provenance.aten} expects a [batch, input_size] input; got "
                               f"shape {input.shape}")
    hidden = _hidden_size(w_hh)
    w, r, b = _direction_weights(g, kind, hidden, [(w_ih, w_hh, b_ih, b_hh)], "")
    x = unsqueeze(g, input, [0])
    initial = [unsqueeze(g, s, [0]) for s in states]
    outputs = g.op(kind, x, w, r, b, None, *initial, outputs=1 + len(states),
                   **_attributes(kind, hidden, 1, nonlinearity))
    return tuple(squeeze(g, state, [0]) for state in outputs[1:])


@translates("aten::lstm_cell", since_opset=7)
def lstm_cell(g, input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """lstm_cell(Tensor input, Tensor[] hx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None, Tensor? b_hh=None) -> (Tensor, Tensor)"""
    return _cell(g, "LSTM", input, list(hx), w_ih, w_hh, b_ih, b_hh)


@translates("aten::gru_cell", since_opset=7)
def gru_cell(g, input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """gru_cell(Tensor input, Tensor hx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None, Tensor? b_hh=None) -> Tensor"""
    return _cell(g, "GRU", input, [hx], w_ih, w_hh, b_ih, b_hh)[0]


@translates("aten::rnn_tanh_cell", since_opset=7)
def rnn_tanh_cell(g, input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """rnn_tanh_cell(Tensor input, Tensor hx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None, Tensor? b_hh=None) -> Tensor"""
    return _cell(g, "RNN", input, [hx], w_ih, w_hh, b_ih, b_hh, "Tanh")[0]


@translates("aten::rnn_relu_cell", since_opset=7)
def rnn_relu_cell(g, input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """rnn_relu_cell(Tensor input, Tensor hx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None, Tensor? b_hh=None) -> Tensor"""
    return _cell(g, "RNN", input, [hx], w_ih, w_hh, b_ih, b_hh, "Relu")[0]


# -- CUDA's fused cell kernels: what an LSTMCell or GRUCell on cuda records, once its gates'
# matmuls are done ------------------------------------------------------------------------------
def _fused_gates(g, gates, hidden_gates, input_bias, hidden_bias, state):
    """(hidden size, input gates + their bias, hidden gates + theirs)."""
    hidden = state.shape[1] if state.shape is not None and len(state.shape) == 2 else None
    if not isinstance(hidden, int):
        raise TranslationError(f"{g.provenance.aten} needs a static hidden size; got the state "
                               f"shape {state.shape}")
    if input_bias is not None:
        gates = g.op("Add", gates, input_bias)
    if hidden_gates is not None and hidden_bias is not None:
        hidden_gates = g.op("Add", hidden_gates, hidden_bias)
    return hidden, gates, hidden_gates


@translates("aten::_thnn_fused_lstm_cell", since_opset=13)
def fused_lstm_cell(g, input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    """_thnn_fused_lstm_cell(Tensor input_gates, Tensor hidden_gates, Tensor cx, Tensor? input_bias=None, Tensor? hidden_bias=None) -> (Tensor, Tensor, Tensor)"""
    hidden, gates, hidden_gates = _fused_gates(g, input_gates, hidden_gates, input_bias,
                                               hidden_bias, cx)
    gates = g.op("Add", gates, hidden_gates)
    i, f, c, o = split(g, gates, [hidden] * 4, 1)
    i, f, o = (g.op("Sigmoid", v) for v in (i, f, o))
    cy = g.op("Add", g.op("Mul", f, cx), g.op("Mul", i, g.op("Tanh", c)))
    hy = g.op("Mul", o, g.op("Tanh", cy))
    # The third result is the kernel's workspace for the backward pass: nothing reads it.
    return hy, cy, None


@translates("aten::_thnn_fused_gru_cell", since_opset=13)
def fused_gru_cell(g, input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    """_thnn_fused_gru_cell(Tensor input_gates, Tensor hidden_gates, Tensor hx, Tensor? input_bias=None, Tensor? hidden_bias=None) -> (Tensor, Tensor)"""
    hidden, gates, hidden_gates = _fused_gates(g, input_gates, hidden_gates, input_bias,
                                               hidden_bias, hx)
    i_r, i_z, i_n = split(g, gates, [hidden] * 3, 1)
    h_r, h_z, h_n = split(g, hidden_gates, [hidden] * 3, 1)
    r = g.op("Sigmoid", g.op("Add", i_r, h_r))
    z = g.op("Sigmoid", g.op("Add", i_z, h_z))
    n = g.op("Tanh", g.op("Add", i_n, g.op("Mul", r, h_n)))
    # hy = (1 - z) * n + z * hx = n + z * (hx - n)
    hy = g.op("Add", n, g.op("Mul", z, g.op("Sub", hx, n)))
    return hy, None
