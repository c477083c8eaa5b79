"""LSTMCell and GRUCell without biases on a GPU: there, torch runs them as the fused
kernels ``_thnn_fused_lstm_cell``/``_thnn_fused_gru_cell``, whose fake kernel reads the device
of each bias and fails on a missing one (``'NoneType' object has no attribute 'device'``), on
every capture path. While capture runs the model, a missing bias of a cell on an accelerator
is given as zeros: the same numbers, one Add of zeros that constant folding removes.

A scripted graph calls the cells' ATen ops itself, and its fake run (the "replay" step)
reaches the fused kernels with the biases it has: there they get fake kernels of their own,
the GRU's having none in torch."""

from __future__ import annotations

import contextlib
from typing import Iterator

_CELLS = ("lstm_cell", "gru_cell")


def _with_zero_biases(original):
    def cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
        if b_ih is None and b_hh is None and input.device.type not in ("cpu", "meta"):
            b_ih = w_ih.new_zeros(w_ih.shape[0])
            b_hh = w_hh.new_zeros(w_hh.shape[0])
        return original(input, hx, w_ih, w_hh, b_ih, b_hh)

    return cell


@contextlib.contextmanager
def zero_biases_for_fused_cells() -> Iterator[None]:
    """While active, ``nn.LSTMCell``/``nn.GRUCell`` calls on an accelerator without biases
    pass zero biases to torch's cell functions."""
    from torch.nn.modules import rnn

    vf = rnn._VF
    patched = []
    for name in _CELLS:
        if name in vars(vf):  # already patched (a nested capture): left as it is
            continue
        setattr(vf, name, _with_zero_biases(getattr(vf, name)))
        patched.append(name)
    try:
        yield
    finally:
        for name in patched:
            delattr(vf, name)


def _fused_gru_shapes(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    """hy, and the workspace CUDA's kernel keeps for backward: five gates a row."""
    return hx.new_empty(hx.shape), hx.new_empty((hx.shape[0], 5 * hx.shape[1]))


def _fused_lstm_shapes(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    """hy, cy, and the workspace: the gates' shape."""
    return cx.new_empty(cx.shape), cx.new_empty(cx.shape), input_gates.new_empty(
        input_gates.shape)


def fake_fused_cells() -> contextlib.AbstractContextManager:
    """While active, the fused cell kernels run on fake tensors, with or without biases."""
    from onnxport.capture.quirks.fake_kernels import fake_kernels

    return fake_kernels({"aten::_thnn_fused_gru_cell": _fused_gru_shapes,
                         "aten::_thnn_fused_lstm_cell": _fused_lstm_shapes})
