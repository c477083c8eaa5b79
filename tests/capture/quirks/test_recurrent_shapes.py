"""Shape-only recurrent kernels while capturing (capture/quirks/recurrent_shapes.py): fake calls get
their shapes without fixing the sequence length, real calls and torch after the capture are
untouched."""

from __future__ import annotations

import pytest
import torch
from torch._C import DispatchKey
from torch._decomp import decomposition_table

from onnxport.capture.quirks.recurrent_shapes import shape_only_recurrent_layers

LSTM = torch.ops.aten.lstm.input


def _kernels():
    return (LSTM.py_kernels.get(DispatchKey.Autograd),
            LSTM.py_kernels.get(DispatchKey.CompositeImplicitAutograd),
            decomposition_table.get(LSTM))


def test_torch_kernels_are_restored_even_after_an_error():
    before = _kernels()
    with pytest.raises(RuntimeError, match="inside"):
        with shape_only_recurrent_layers():
            assert _kernels() != before
            raise RuntimeError("inside")
    assert _kernels() == before


def test_real_tensors_are_computed_inside():
    torch.manual_seed(0)
    rnn = torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True).eval()
    x = torch.randn(5, 2, 3)
    expected = rnn(x)[0]
    with shape_only_recurrent_layers():
        actual = rnn(x)[0]
    torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize("options, shapes", [
    (dict(num_layers=2, bidirectional=True, batch_first=True),
     [(2, "seq", 8), (4, 2, 4), (4, 2, 4)]),
    (dict(proj_size=3), [("seq", 2, 3), (1, 2, 3), (1, 2, 4)]),
])
def test_sequence_stays_symbolic_with_the_layer_shapes(options, shapes):
    rnn = torch.nn.LSTM(3, 4, **options).eval()
    axis = 1 if options.get("batch_first") else 0

    def x(length):
        return torch.randn(2, length, 3) if axis else torch.randn(length, 2, 3)

    with shape_only_recurrent_layers():
        program = torch.export.export(rnn, (x(7),), strict=False,
                                      dynamic_shapes=({axis: torch.export.Dim("seq")},))
    outputs = [n for n in program.graph.nodes if n.op == "output"][0].args[0]
    assert [tuple(d if isinstance(d, int) else "seq" for d in node.meta["val"].shape)
            for node in outputs] == shapes
    assert program.module()(x(11))[0].shape[axis] == 11  # no guard fixed the length
