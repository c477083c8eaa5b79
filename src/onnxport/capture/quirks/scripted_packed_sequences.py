"""A scripted model's packed recurrent layer (pack_padded_sequence -> LSTM/GRU/RNN ->
pad_packed_sequence) as one call on the padded batch and its lengths, as
:mod:`.packed_sequences` makes it while tracing: the packed kernels' sizes are values
(torch's fake kernel of ``aten::_pack_padded_sequence`` even gives ``batch_sizes`` a float
dtype), and ONNX's layers take the lengths as ``sequence_lens``."""

from __future__ import annotations

import torch

from onnxport.capture.quirks.packed_sequences import packed_lstm, packed_rnn

_READS_OF_THE_DTYPE = ("prim::dtype", "prim::device")
_LAYERS = {"aten::lstm": "LSTM", "aten::gru": "GRU", "aten::rnn_tanh": "RNN_TANH",
           "aten::rnn_relu": "RNN_RELU"}


def packed_layers_as_padded(graph: torch._C.Graph) -> bool:
    """Rewrite each pack -> layer -> unpack chain of ``graph`` whose packed values go nowhere
    else (enforce_sorted lengths: no reordering); whether there was one."""
    rewritten = False
    for pack in graph.findAllNodes("aten::_pack_padded_sequence", True):
        chain = _chain(pack)
        if chain is not None:
            _rewrite(graph, pack, *chain)
            rewritten = True
    return rewritten


def _constant(value: torch._C.Value):
    return value.toIValue() if value.node().kind() == "prim::Constant" else None


def _chain(pack: torch._C.Node):
    """(layer, unpack, the reads of batch_sizes[0] and of its length) of ``pack``, or None
    where the packed values are read otherwise."""
    data, batch_sizes = pack.outputs()
    uses = [use for use in data.uses() if use.user.kind() not in _READS_OF_THE_DTYPE]
    if not isinstance(_constant(pack.inputsAt(2)), bool) or len(uses) != 1:
        return None
    layer = uses[0].user
    if layer.kind() not in _LAYERS or layer.inputsAt(1).unique() != batch_sizes.unique() \
            or _constant(layer.inputsAt(7)) is not False or len(layer.outputsAt(0).uses()) != 1:
        return None  # (training with dropout between layers: torch's own, random)
    unpack = layer.outputsAt(0).uses()[0].user
    if unpack.kind() != "aten::_pad_packed_sequence" or _constant(unpack.inputsAt(3)) != 0.0 \
            or not isinstance(_constant(unpack.inputsAt(2)), bool):
        return None
    firsts, lengths = [], []
    for use in batch_sizes.uses():
        user = use.user
        if user in (layer, unpack) and use.offset == 1:
            continue
        if user.kind() == "aten::select" and [_constant(v) for v in list(user.inputs())[1:]] \
                == [0, 0] and all(u.user.kind() == "aten::IntImplicit"
                                  for u in user.output().uses()):
            firsts.append(user)
        elif user.kind() == "aten::size" and _constant(user.inputsAt(1)) == 0:
            lengths.append(user)
        else:
            return None
    total = unpack.inputsAt(4)
    if total.node() not in lengths and _constant(total) is not None:
        return None  # (a total_length of its own)
    return layer, unpack, firsts, lengths


def _rewrite(graph, pack, layer, unpack, firsts, lengths) -> None:
    padded, sequence_lengths, batch_first = pack.inputsAt(0), pack.inputsAt(1), pack.inputsAt(2)
    for use in list(pack.outputsAt(0).uses()):  # (the zero state's dtype and device: the input's)
        if use.user.kind() in _READS_OF_THE_DTYPE:
            use.user.replaceInput(use.offset, padded)
    with graph.insert_point_guard(pack):
        zero, one = graph.insertConstant(0), graph.insertConstant(1)
    time_major = padded
    if _constant(batch_first):
        time_major = _node(graph, pack, "aten::transpose", [padded, zero, one]).output()
    batch = _node(graph, pack, "aten::size", [time_major, one]).output()
    steps = _node(graph, pack, "aten::size", [time_major, zero]).output()
    for first in firsts:
        for use in list(first.output().uses()):
            use.user.output().replaceAllUsesWith(batch)
    for length in lengths:
        length.output().replaceAllUsesWith(steps)
    mode = _LAYERS[layer.kind()]
    params = [layer.inputsAt(k) for k in (3, 4, 5)]  # weights, has_biases, num_layers
    bidirectional = layer.inputsAt(8)
    if mode == "LSTM":
        call = _node(graph, layer, packed_lstm._qualname,
                     [time_major, sequence_lengths, layer.inputsAt(2), *params, bidirectional],
                     outputs=3)
    else:
        with graph.insert_point_guard(layer):
            name = graph.insertConstant(mode)
        call = _node(graph, layer, packed_rnn._qualname,
                     [time_major, sequence_lengths, layer.inputsAt(2), params[0], name,
                      params[1], params[2], bidirectional], outputs=2)
    for k in range(1, layer.outputsSize()):
        layer.outputsAt(k).replaceAllUsesWith(call.outputsAt(k))
    output = call.outputsAt(0)
    if _constant(unpack.inputsAt(2)):
        output = _node(graph, unpack, "aten::transpose", [output, zero, one]).output()
    unpack.outputsAt(0).replaceAllUsesWith(output)
    unpack.outputsAt(1).replaceAllUsesWith(sequence_lengths)
    implicit = [use.user for first in firsts for use in first.output().uses()]
    for node in (unpack, layer, *lengths, *implicit, *firsts, pack):
        node.destroy()


def _node(graph, before, kind: str, inputs: list, outputs: int = 1) -> torch._C.Node:
    node = graph.create(kind, inputs, outputs)
    node.insertBefore(before)
    for value in node.outputs():
        value.setType(torch._C.TensorType.get())
    if kind == "aten::size":
        node.output().setType(torch._C.IntType.get())
    return node
