"""Recurrent layers (ops/recurrent.py): nn.LSTM, nn.GRU, nn.RNN and their cells become ONNX
LSTM/GRU/RNN nodes (one per layer), with the weights reordered into initializers at export."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import onnxport
from onnxport.errors import TranslationError
from op_check import assert_matches_eager, check, count, op_types

INPUT, HIDDEN, SEQ, BATCH = 3, 5, 4, 2
# What an unrolled or looped recurrence would leave in the graph.
NOT_RECURRENT_NODES = {"Loop", "Scan", "MatMul", "Gemm", "Sigmoid", "Tanh", "Relu"}


def _seeded(factory):
    torch.manual_seed(0)
    return factory()


def _x(seq=SEQ, batch=BATCH, batch_first=False):
    return torch.randn(batch, seq, INPUT) if batch_first else torch.randn(seq, batch, INPUT)


def _state(layers=1, directions=1, batch=BATCH, size=HIDDEN):
    return torch.randn(layers * directions, batch, size)


class WithState(torch.nn.Module):
    """A recurrent module called with its initial state(s) as inputs."""

    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x, h0, c0=None):
        return self.rnn(x, h0 if c0 is None else (h0, c0))


def assert_recurrent_nodes(program, op_type: str, expected: int,
                           not_expected=NOT_RECURRENT_NODES) -> None:
    """``expected`` nodes of ``op_type``, nothing that unrolls the recurrence, and the weights
    already in ONNX's gate order (initializers, not reordered at every run)."""
    types = op_types(program)
    assert count(program, op_type) == expected, types
    assert not set(not_expected) & set(types), types
    for node in program.model.graph:
        if node.op_type == op_type:
            weights = [v for v in node.inputs[1:4] if v is not None]
            assert all(v.is_initializer() for v in weights), [v.name for v in weights]


def _layer(kind, **options):
    return lambda: getattr(torch.nn, kind)(INPUT, HIDDEN, **options)


# id -> (module factory, ONNX op type, number of layers)
LAYERS = {
    "lstm": (_layer("LSTM"), "LSTM", 1),
    "lstm 2 layers": (_layer("LSTM", num_layers=2), "LSTM", 2),
    "lstm bidirectional 2 layers batch_first": (
        _layer("LSTM", num_layers=2, bidirectional=True, batch_first=True), "LSTM", 2),
    "lstm bias=False": (_layer("LSTM", bias=False), "LSTM", 1),
    "lstm dropout between layers (eval)": (_layer("LSTM", num_layers=3, dropout=0.5), "LSTM", 3),
    "gru": (_layer("GRU"), "GRU", 1),
    "gru bidirectional 2 layers": (_layer("GRU", num_layers=2, bidirectional=True), "GRU", 2),
    "gru batch_first bias=False": (_layer("GRU", batch_first=True, bias=False), "GRU", 1),
    "rnn tanh 2 layers": (_layer("RNN", num_layers=2), "RNN", 2),
    "rnn relu bidirectional": (_layer("RNN", nonlinearity="relu", bidirectional=True), "RNN", 1),
    "rnn relu bias=False batch_first": (
        _layer("RNN", nonlinearity="relu", bias=False, batch_first=True), "RNN", 1),
}


@pytest.mark.parametrize("factory, op_type, layers", LAYERS.values(), ids=list(LAYERS))
def test_layer_without_initial_state(factory, op_type, layers):
    rnn = _seeded(factory)
    torch.manual_seed(1)
    program = check(rnn, _x(batch_first=rnn.batch_first))
    assert_recurrent_nodes(program, op_type, layers)


@pytest.mark.parametrize("factory, op_type, layers", LAYERS.values(), ids=list(LAYERS))
def test_layer_with_initial_state(factory, op_type, layers):
    rnn = _seeded(factory)
    torch.manual_seed(1)
    directions = 2 if rnn.bidirectional else 1
    states = [_state(layers, directions) for _ in range(2 if op_type == "LSTM" else 1)]
    program = check(WithState(rnn), _x(batch_first=rnn.batch_first), *states)
    assert_recurrent_nodes(program, op_type, layers)


class _ScriptedWithState(torch.nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x, h0):
        return self.rnn(x, h0)


class _ScriptedLSTM(_ScriptedWithState):
    def forward(self, x, h0, c0):
        return self.rnn(x, (h0, c0))


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_scripted_layer_with_initial_state(kind):
    # Scripted and frozen, the layer's weights are one constant list of tensors (a GRU's or
    # RNN's, when given its state): each must become an initializer, not stay a call argument.
    rnn = _seeded(_layer(kind, num_layers=2, bidirectional=True))
    torch.manual_seed(1)
    states = [_state(2, 2) for _ in range(2 if kind == "LSTM" else 1)]
    scripted = torch.jit.script((_ScriptedLSTM if kind == "LSTM" else _ScriptedWithState)(rnn))
    names = ["x", "h0", "c0"][:1 + len(states)]
    axes = {"x": {0: "seq", 1: "batch"}, **{name: {1: "batch"} for name in names[1:]}}
    program = check(scripted, _x(), *states, dynamo=False, dynamic_axes=axes, input_names=names,
                    run_with=[(_x(seq=6, batch=3), *[_state(2, 2, batch=3) for _ in states])])
    assert_recurrent_nodes(program, kind, 2)


@pytest.mark.parametrize("opset", [13, 18, 23])
@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_bidirectional_two_layers_at_opsets(kind, opset):
    rnn = _seeded(_layer(kind, num_layers=2, bidirectional=True))
    torch.manual_seed(1)
    program = check(rnn, _x(), opset=opset)
    assert_recurrent_nodes(program, kind, 2)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_dynamic_sequence_and_batch(kind):
    rnn = _seeded(_layer(kind, num_layers=2, bidirectional=True))
    torch.manual_seed(1)
    seq, batch = torch.export.Dim("seq"), torch.export.Dim("batch")
    program = check(rnn, _x(4, 2), dynamic_shapes=({0: seq, 1: batch},),
                    run_with=[(_x(7, 3),), (_x(1, 1),)])
    assert_recurrent_nodes(program, kind, 2)
    assert [str(d) for d in program.model.graph.inputs[0].shape] == ["seq", "batch", str(INPUT)]


@pytest.mark.parametrize("with_state", [False, True], ids=["no state", "initial state"])
@pytest.mark.parametrize("factory, op_type, layers", LAYERS.values(), ids=list(LAYERS))
def test_dynamic_sequence_and_batch_through_the_trace(factory, op_type, layers, with_state):
    # dynamo=False: the fake run of the traced layer computes its shapes only (torch's
    # decomposition loops over the steps, which fixed the sequence to the example's).
    rnn = _seeded(factory)
    torch.manual_seed(1)
    directions = 2 if rnn.bidirectional else 1
    states = [_state(layers, directions) for _ in range(2 if op_type == "LSTM" else 1)] \
        if with_state else []
    seq, batch = (1, 0) if rnn.batch_first else (0, 1)
    names = ["x", "h0", "c0"][:1 + len(states)]
    axes = {"x": {seq: "seq", batch: "batch"}, **{name: {1: "batch"} for name in names[1:]}}
    other = [(_x(7, 3, rnn.batch_first),
              *[_state(layers, directions, batch=3) for _ in states])]
    program = check(WithState(rnn) if states else rnn, _x(batch_first=rnn.batch_first),
                    *states, dynamo=False, dynamic_axes=axes, input_names=names,
                    run_with=other)
    assert_recurrent_nodes(program, op_type, layers)


def test_dynamic_batch_first_with_initial_states():
    rnn = _seeded(_layer("LSTM", num_layers=2, batch_first=True))
    torch.manual_seed(1)
    seq, batch = torch.export.Dim("seq"), torch.export.Dim("batch")
    shapes = ({0: batch, 1: seq}, {1: batch}, {1: batch})
    program = check(WithState(rnn), _x(4, 2, batch_first=True), _state(2), _state(2),
                    dynamic_shapes=shapes,
                    run_with=[(_x(6, 3, batch_first=True), _state(2, batch=3),
                               _state(2, batch=3))])
    assert_recurrent_nodes(program, "LSTM", 2)


class WritesIntoItsOutput(torch.nn.Module):
    """An in-place write into a view of the LSTM's output: the capture functionalizes the
    graph, tracing the layer a second time."""

    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.LSTM(INPUT, HIDDEN, num_layers=2)

    def forward(self, x):
        y, (h, c) = self.rnn(x)
        y[:, :, :2].mul_(2.0)
        return y, h


def test_dynamic_sequence_survives_functionalization():
    model = _seeded(WritesIntoItsOutput)
    torch.manual_seed(1)
    program = check(model, _x(4), dynamic_shapes=({0: torch.export.Dim("seq")},),
                    run_with=[(_x(9),)])
    assert count(program, "LSTM") == 2


CELLS = {
    "lstm_cell": (lambda: torch.nn.LSTMCell(INPUT, HIDDEN), "LSTM", 2),
    "lstm_cell bias=False": (lambda: torch.nn.LSTMCell(INPUT, HIDDEN, bias=False), "LSTM", 2),
    "gru_cell": (lambda: torch.nn.GRUCell(INPUT, HIDDEN), "GRU", 1),
    "rnn_tanh_cell": (lambda: torch.nn.RNNCell(INPUT, HIDDEN), "RNN", 1),
    "rnn_relu_cell bias=False": (
        lambda: torch.nn.RNNCell(INPUT, HIDDEN, nonlinearity="relu", bias=False), "RNN", 1),
}


@pytest.mark.parametrize("factory, op_type, states", CELLS.values(), ids=list(CELLS))
def test_cell(factory, op_type, states):
    cell = _seeded(factory)
    torch.manual_seed(1)
    x = torch.randn(BATCH, INPUT)
    program = check(cell, x)
    assert_recurrent_nodes(program, op_type, 1)
    given = [torch.randn(BATCH, HIDDEN) for _ in range(states)]
    program = check(lambda x, *s: cell(x, tuple(s) if len(s) > 1 else s[0]), x, *given)
    assert_recurrent_nodes(program, op_type, 1)


def test_cell_steps_with_dynamic_batch():
    """A cell applied over a few steps (the way decoders use them), batch dynamic."""
    cell = _seeded(lambda: torch.nn.LSTMCell(INPUT, HIDDEN))

    def steps(x, h, c):
        outputs = []
        for t in range(x.shape[0]):
            h, c = cell(x[t], (h, c))
            outputs.append(h)
        return torch.stack(outputs), c

    torch.manual_seed(1)
    batch = torch.export.Dim("batch")
    program = check(steps, _x(3, 2), _state(batch=2)[0], _state(batch=2)[0],
                    dynamic_shapes=({1: batch}, {0: batch}, {0: batch}),
                    run_with=[(_x(3, 5), _state(batch=5)[0], _state(batch=5)[0])])
    assert count(program, "LSTM") == 3
    assert weight_sets(program, "LSTM") == 1


def weight_sets(program, op_type: str) -> int:
    """How many distinct (W, R, B) the ``op_type`` nodes read: a layer called several times
    reads the same reordered initializers, not a copy per call."""
    nodes = [n for n in program.model.graph if n.op_type == op_type]
    return len({tuple(v.name for v in n.inputs[1:4] if v is not None) for n in nodes})


def test_layer_called_at_each_step_shares_its_weights():
    rnn = _seeded(_layer("GRU", num_layers=2))

    def steps(x):
        h = torch.zeros(2, x.shape[1], HIDDEN)
        outputs = []
        for t in range(x.shape[0]):
            y, h = rnn(x[t:t + 1], h)
            outputs.append(y)
        return torch.cat(outputs), h

    torch.manual_seed(1)
    program = check(steps, _x(3))
    assert count(program, "GRU") == 6
    assert weight_sets(program, "GRU") == 2  # one per layer


def test_unbatched_input():
    rnn = _seeded(_layer("LSTM", num_layers=2, bidirectional=True))
    torch.manual_seed(1)
    program = check(rnn, torch.randn(SEQ, INPUT))
    assert_recurrent_nodes(program, "LSTM", 2)


def test_weights_beyond_the_constant_folding_limit_are_reordered_at_export():
    """4 * 513 * 513 elements in weight_hh: more than FoldConstants folds, so a reordering
    left in the graph would run at every inference."""
    rnn = _seeded(lambda: torch.nn.LSTM(2, 513))
    torch.manual_seed(1)
    program = check(rnn, torch.randn(2, 1, 2))
    assert_recurrent_nodes(program, "LSTM", 1)
    assert not {"Split", "Concat", "Slice", "Gather"} & set(op_types(program))


def test_weights_fed_as_inputs_are_reordered_in_the_graph():
    """With keep_initializers_as_inputs the user may feed other weights: they cannot be
    reordered at export, so the graph reorders whatever it is given."""
    rnn = _seeded(_layer("GRU", num_layers=2, bidirectional=True)).eval()
    torch.manual_seed(1)
    x = _x()
    program = onnxport.export(rnn, (x,), keep_initializers_as_inputs=True)
    assert_matches_eager(program, rnn, (x,))
    assert count(program, "GRU") == 2 and count(program, "Split") > 0


def test_lstm_with_projection_is_a_clear_error():
    rnn = _seeded(_layer("LSTM", proj_size=2))
    with pytest.raises(TranslationError, match="proj_size"):
        check(rnn, _x())


def test_training_dropout_is_a_clear_error():
    rnn = _seeded(_layer("LSTM", num_layers=2))
    params = list(rnn._flat_weights)

    def train_mode(x):
        h = torch.zeros(2, x.shape[1], HIDDEN)
        return torch.lstm(x, (h, h), params, True, 2, 0.5, True, False, False)[0]

    with pytest.raises(TranslationError, match="model.eval"):
        check(train_mode, _x())


# -- the word-language model of pytorch/examples ----------------------------------------------
class RNNModel(torch.nn.Module):
    """pytorch/examples' word_language_model/model.py RNNModel (encoder, recurrent module,
    decoder), with the hidden state passed in and returned."""

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
        decoded = self.decoder(output)
        decoded = decoded.view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, batch):
        weight = next(self.parameters())
        if self.rnn_type == "LSTM":
            return (weight.new_zeros(self.nlayers, batch, self.nhid),
                    weight.new_zeros(self.nlayers, batch, self.nhid))
        return weight.new_zeros(self.nlayers, batch, self.nhid)


@pytest.mark.parametrize("rnn_type, tied", [("LSTM", False), ("GRU", False), ("LSTM", True),
                                             ("RNN_TANH", False)])
def test_word_language_model_with_dynamic_sequence_axis(rnn_type, tied):
    ntoken, batch = 50, 3
    model = _seeded(lambda: RNNModel(rnn_type, ntoken, 12, 12, 2, tie_weights=tied))
    op_type = rnn_type.split("_")[0]
    torch.manual_seed(1)

    def tokens(seq):
        return torch.randint(0, ntoken, (seq, batch))

    def hidden():  # a state carried over from earlier text: not zeros
        state = model.init_hidden(batch)
        if isinstance(state, tuple):
            return tuple(torch.randn_like(t) * 0.5 for t in state)
        return torch.randn_like(state) * 0.5

    program = check(model, tokens(6), hidden(), input_names=["input"],
                    dynamic_axes={"input": {0: "sequence"}},
                    run_with=[(tokens(11), hidden()), (tokens(2), model.init_hidden(batch))])
    assert_recurrent_nodes(program, op_type, 2, not_expected={"Loop", "Scan", "Sigmoid"})
    assert count(program, "MatMul") + count(program, "Gemm") == 1  # the decoder's only
    assert str(program.model.graph.inputs[0].shape[0]) == "sequence"
