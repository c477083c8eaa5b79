"""Recurrent layers on packed sequences (pack_padded_sequence -> LSTM/GRU/RNN ->
pad_packed_sequence) with a lengths input, dynamic batch and sequence, on both paths: one ONNX
LSTM/GRU/RNN per layer with sequence_lens. A sample of the combinations in which every mode,
layer count, direction, layout, initial state and path occurs."""

import warnings

import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import onnxport

FEATURES, HIDDEN = 4, 5


class PackedRecurrent(torch.nn.Module):
    def __init__(self, mode, layers, bidirectional, batch_first, enforce_sorted=False,
                 padding_value=0.0):
        super().__init__()
        options = dict(num_layers=layers, bidirectional=bidirectional, batch_first=batch_first,
                       dropout=0.25 if layers > 1 else 0.0)  # between layers; eval: none
        if mode == "LSTM":
            self.rnn = torch.nn.LSTM(FEATURES, HIDDEN, **options)
        elif mode == "GRU":
            self.rnn = torch.nn.GRU(FEATURES, HIDDEN, **options)
        else:
            self.rnn = torch.nn.RNN(FEATURES, HIDDEN, nonlinearity=mode[4:].lower(), **options)
        self.enforce_sorted, self.padding_value = enforce_sorted, padding_value

    def forward(self, x, lengths, h0=None, c0=None):
        packed = pack_padded_sequence(x, lengths, batch_first=self.rnn.batch_first,
                                      enforce_sorted=self.enforce_sorted)
        state = None if h0 is None else (h0, c0) if c0 is not None else h0
        output, state = self.rnn(packed, state)
        padded, lengths = pad_packed_sequence(output, batch_first=self.rnn.batch_first,
                                              padding_value=self.padding_value)
        states = state if isinstance(state, tuple) else (state,)
        return (padded, *states)


def _inputs(model, batch, steps, initial_state, descending=False):
    rnn = model.rnn
    x = torch.randn(batch, steps, FEATURES) if rnn.batch_first else torch.randn(steps, batch,
                                                                                 FEATURES)
    lengths = torch.randint(1, steps + 1, (batch,))
    lengths[batch // 2] = steps  # the longest fills the padded length, as eager's output has it
    if descending:
        lengths = lengths.sort(descending=True).values
    inputs = {"x": x, "lengths": lengths}
    if initial_state:
        shape = (rnn.num_layers * (2 if rnn.bidirectional else 1), batch, HIDDEN)
        inputs["h0"] = torch.randn(shape)
        if rnn.mode == "LSTM":
            inputs["c0"] = torch.randn(shape)
    return inputs


def _export_and_compare(model, initial_state, dynamo, descending=False):
    torch.manual_seed(0)
    inputs = _inputs(model, 3, 5, initial_state, descending)
    batch_axis, step_axis = (0, 1) if model.rnn.batch_first else (1, 0)
    axes = {"x": {batch_axis: "batch", step_axis: "steps"}, "lengths": {0: "batch"},
            "h0": {1: "batch"}, "c0": {1: "batch"}}
    axes = {name: dims for name, dims in axes.items() if name in inputs}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = onnxport.export(model, tuple(inputs.values()), input_names=list(inputs),
                                  dynamic_axes=axes, dynamo=dynamo)
    assert not [w for w in caught if issubclass(w.category, onnxport.errors.FallbackWarning)]
    expected_strategy = "tracing" if dynamo is False else "torch.export (non-strict)"
    assert program.capture_strategy == expected_strategy
    assert {node.op_type for node in program.model.graph} & {"LSTM", "GRU", "RNN"}
    for batch, steps in ((3, 5), (6, 8)):  # the export's size, then another
        inputs = _inputs(model, batch, steps, initial_state, descending)
        with torch.no_grad():
            expected = model(*inputs.values())
        actual = program(*inputs.values())
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            torch.testing.assert_close(a, e, rtol=1e-3, atol=1e-4)


# mode, layers, bidirectional, batch_first, initial state, dynamo (None: the default path)
CASES = [
    ("LSTM", 1, False, False, False, None),
    ("LSTM", 2, True, True, True, False),
    ("LSTM", 3, True, False, False, None),
    ("LSTM", 2, False, True, False, False),
    ("GRU", 1, True, True, False, False),
    ("GRU", 2, False, False, True, None),
    ("GRU", 3, False, True, False, False),
    ("GRU", 2, True, False, True, None),
    ("RNN_TANH", 1, False, True, True, None),
    ("RNN_TANH", 2, True, False, False, False),
    ("RNN_RELU", 1, True, False, True, None),
    ("RNN_RELU", 3, False, True, False, False),
]


@pytest.mark.parametrize("mode, layers, bidirectional, batch_first, initial_state, dynamo", CASES)
def test_packed_recurrent_layer(mode, layers, bidirectional, batch_first, initial_state, dynamo):
    model = PackedRecurrent(mode, layers, bidirectional, batch_first).eval()
    _export_and_compare(model, initial_state, dynamo)


@pytest.mark.parametrize("dynamo", [None, False])
def test_sorted_lengths(dynamo):
    model = PackedRecurrent("GRU", 1, True, True, enforce_sorted=True).eval()
    _export_and_compare(model, False, dynamo, descending=True)


@pytest.mark.parametrize("optimize", [True, False])
def test_a_padding_value(optimize):
    model = PackedRecurrent("GRU", 1, True, True, padding_value=-1.0).eval()
    inputs = _inputs(model, 3, 5, False)
    program = onnxport.export(model, tuple(inputs.values()), input_names=list(inputs),
                              dynamic_axes={"x": {0: "batch", 1: "steps"},
                                            "lengths": {0: "batch"}}, optimize=optimize)
    for batch, steps in ((3, 5), (6, 8)):
        inputs = _inputs(model, batch, steps, False)
        with torch.no_grad():
            expected = model(*inputs.values())
        for a, e in zip(program(*inputs.values()), expected):
            torch.testing.assert_close(a, e, rtol=1e-3, atol=1e-4)


def test_the_layer_runs_as_before_outside_the_export():
    model = PackedRecurrent("LSTM", 2, True, False).eval()
    inputs = _inputs(model, 3, 5, False)
    with torch.no_grad():
        before = model(*inputs.values())
        onnxport.export(model, tuple(inputs.values()), dynamo=False)
        after = model(*inputs.values())
    for b, a in zip(before, after):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert torch.nn.LSTM.forward.__qualname__ == "LSTM.forward"


class GatheredArguments(torch.nn.Module):
    """The form torch's own exporter tests give their packed-sequence models: the state and the
    lengths gathered by ``*args``, so dynamic_axes name inputs no parameter is called."""

    def __init__(self):
        super().__init__()
        self.inner = PackedRecurrent("LSTM", 1, True, False)

    def forward(self, x, *args):
        *state, lengths = args
        return self.inner(x, lengths, *state)


@pytest.mark.parametrize("dynamo", [None, False])
def test_dynamic_axes_on_inputs_gathered_by_star_args(dynamo):
    model = GatheredArguments().eval()

    def inputs(batch, steps):
        lengths = torch.randint(1, steps + 1, (batch,))
        lengths[0] = steps
        return (torch.randn(steps, batch, FEATURES), torch.randn(2, batch, HIDDEN),
                torch.randn(2, batch, HIDDEN), lengths)

    names = ["x", "h0", "c0", "lengths"]
    axes = {"x": {0: "steps", 1: "batch"}, "h0": {1: "batch"}, "c0": {1: "batch"},
            "lengths": {0: "batch"}}
    program = onnxport.export(model, inputs(3, 5), input_names=names, dynamic_axes=axes,
                              dynamo=dynamo)
    assert [i.name for i in program.model.graph.inputs] == names
    for batch, steps in ((3, 5), (6, 8)):
        given = inputs(batch, steps)
        with torch.no_grad():
            expected = model(*given)
        for a, e in zip(program(*given), expected):
            torch.testing.assert_close(a, e, rtol=1e-3, atol=1e-4)


class _ScriptablePacked(torch.nn.Module):
    def __init__(self, mode, layers, bidirectional, batch_first):
        super().__init__()
        self.rnn = PackedRecurrent(mode, layers, bidirectional, batch_first).rnn
        self.batch_first = batch_first

    def forward(self, x, lengths):
        packed = pack_padded_sequence(x, lengths, batch_first=self.batch_first)
        output, state = self.rnn(packed)
        padded, _ = pad_packed_sequence(output, batch_first=self.batch_first)
        return padded, state


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
@pytest.mark.parametrize("mode, layers, bidirectional, batch_first", [
    ("LSTM", 2, True, True), ("GRU", 1, False, False), ("RNN_TANH", 3, True, False)])
def test_a_scripted_packed_recurrent_layer(mode, layers, bidirectional, batch_first, dynamo):
    # Scripted, the packing ran as torch's kernels: an isinstance of the lengths stopped it,
    # then torch's fake packing (a float batch_sizes, sizes that are values). The chain is one
    # call on the padded batch, as while tracing.
    torch.manual_seed(0)
    model = torch.jit.script(_ScriptablePacked(mode, layers, bidirectional, batch_first).eval())
    inputs = _inputs(model, 3, 5, False, descending=True)
    batch_axis, step_axis = (0, 1) if batch_first else (1, 0)
    program = onnxport.export(model, tuple(inputs.values()), input_names=list(inputs),
                              dynamic_axes={"x": [batch_axis, step_axis], "lengths": [0]},
                              dynamo=dynamo)
    assert {node.op_type for node in program.model.graph} & {"LSTM", "GRU", "RNN"}
    for batch, steps in ((3, 5), (6, 8)):
        inputs = _inputs(model, batch, steps, False, descending=True)
        expected = torch.utils._pytree.tree_leaves(model(*inputs.values()))
        actual = program(*inputs.values())
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            torch.testing.assert_close(a, e, rtol=1e-3, atol=1e-4)
