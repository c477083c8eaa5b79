"""Shape-only kernels for LSTM/GRU/RNN while torch.export traces, so that a dynamic sequence
axis stays dynamic: torch computes these layers' fake outputs by running its decomposition,
which loops over the time steps and so fixes the sequence length to the example's."""

from __future__ import annotations

import contextlib

import torch
from torch._C import DispatchKey
from torch._subclasses.fake_tensor import is_fake

# The kernels torch's decompositions register in Python (torch/_decomp/decompositions.py);
# the calls are kept whole in the captured graph and become ONNX LSTM/GRU/RNN nodes.
_KEYS = (DispatchKey.CompositeImplicitAutograd, DispatchKey.Autograd)


def _layer_outputs(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                   batch_first):
    """Empty output, h_n (and c_n) of the shapes the layer computes."""
    states = list(hx) if isinstance(hx, (list, tuple)) else [hx]
    directions = 2 if bidirectional else 1
    # h0's last dim is the output's size per direction (proj_size when an LSTM projects).
    output = input.new_empty((input.shape[0], input.shape[1], directions * states[0].shape[2]))
    return (output, *[state.new_empty(state.shape) for state in states])


def _shape_only(original):
    def kernel(input, hx, params, *rest):
        tensors = [input, *(hx if isinstance(hx, (list, tuple)) else [hx])]
        if not all(is_fake(t) for t in tensors):
            return original(input, hx, params, *rest)
        return _layer_outputs(input, hx, params, *rest)

    return kernel


def _ops():
    aten = torch.ops.aten
    return (aten.lstm.input, aten.gru.input, aten.rnn_tanh.input, aten.rnn_relu.input)


def calls_recurrent_layers(targets) -> bool:
    """Whether a graph calling ``targets`` calls a recurrent layer: a fake run of it needs the
    python dispatcher, through which alone the kernels patched here replace torch's C++
    decomposition (which loops over the steps)."""
    layers = set(_ops())
    return any(target in layers for target in targets)


def _forget_dispatch(op) -> None:
    """Drop every kernel the python dispatcher cached for ``op``, as torch does when a kernel
    is registered: it caches them by the runtime key (AutogradCPU), not the key patched here
    (Autograd), and a kernel cached before the patch outlived it (a first export through the
    trace fixed the sequence axis of every later export in the process, torch.export's too)."""
    op._dispatch_cache.clear()


@contextlib.contextmanager
def shape_only_recurrent_layers():
    """While active, fake (traced) calls of the recurrent layers compute only their output
    shapes; calls on real tensors run torch's kernels as before."""
    from torch._decomp import decomposition_table

    saved, saved_decompositions = [], []
    for op in _ops():
        for key in _KEYS:
            original = op.py_kernels.get(key)
            if original is None:
                continue
            saved.append((op, key, original))
            op.py_kernels[key] = _shape_only(original)
            _forget_dispatch(op)
        # FakeTensorMode runs this table's entry itself when a call reaches it below autograd
        # (re-tracing to functionalize).
        original = decomposition_table.get(op)
        if original is not None:
            saved_decompositions.append((op, original))
            decomposition_table[op] = _shape_only(original)
    try:
        yield
    finally:
        for op, key, original in saved:
            op.py_kernels[key] = original
            _forget_dispatch(op)
        for op, original in saved_decompositions:
            decomposition_table[op] = original
