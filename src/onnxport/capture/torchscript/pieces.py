"""``x.chunk(c, d)[i]`` and ``x.split(k, d)[i]`` in scripted code: a piece of a list whose
length the axis's size gives. The converted graph held the pieces the example made: over a
dynamic axis that was one piece at the example, [-1] was the first piece at every size, and
[0] read its sizes as the whole axis's (``y.new_zeros(y.shape)`` two columns wide where the
piece is one), silently (found by ``fuzz_dynamic --scripted``). The piece is computed from the
axis's size by torch's rule instead, as the traced path computes [-1]
(capture/quirks/one_piece_splits.py)."""

from __future__ import annotations

import operator
from typing import Any

import torch

_INT64_MAX = 2**63 - 1


def convert_piece(converter: Any, node: torch._C.Node) -> bool:
    """Convert ``aten::__getitem__`` of a chunk's or split's pieces at a constant index as a
    slice of the tensor computed from its size; False (nothing converted) for any other
    item. (Past the last piece torch raises; the slice is then empty.)"""
    pieces, index = node.inputsAt(0).node(), node.inputsAt(1).toIValue()
    if pieces.kind() not in ("aten::chunk", "aten::split") or pieces.inputsSize() < 3 or \
            not isinstance(index, int) or isinstance(index, bool):
        return False
    size, dim = pieces.inputsAt(1).toIValue(), pieces.inputsAt(2).toIValue()
    if not isinstance(size, int) or isinstance(size, bool) or size < 1 or \
            not isinstance(dim, int):
        return False
    graph = converter.fx_graph
    tensor = converter.get_fx_value_by_ir_value(pieces.inputsAt(0))

    def call(function, *args):
        return graph.call_function(function, args)

    n = call(torch.ops.aten.sym_size.int, tensor, dim)
    counted = call(torch.sym_max, n, 1)  # (an empty axis makes one empty piece)
    if pieces.kind() == "aten::chunk":  # pieces of ceil(n / chunks)
        piece = call(operator.floordiv, call(operator.add, counted, size - 1), size)
    else:
        piece = size
    if index >= 0:
        start = call(operator.mul, index, piece)
    else:  # (the last piece starts at the last multiple of the piece size below the size)
        last = call(operator.floordiv, call(operator.sub, counted, 1), piece)
        start = call(operator.mul, call(operator.add, last, index + 1), piece)
    # (the end within the size: a slice's end past a symbolic size had torch guard that the
    # size reaches it, and take the piece's size as the example's)
    end = _INT64_MAX if index == -1 else \
        call(torch.sym_min, call(operator.add, start, piece), n)
    converter.name_to_node[node.output().debugName()] = call(
        torch.ops.aten.slice.Tensor, tensor, dim, start, end)
    _drop_the_split(converter, pieces)
    return True


def _drop_the_split(converter: Any, pieces: torch._C.Node) -> None:
    """The split itself, once nothing but pieces counted from the end reads it: propagated,
    torch's split makes its count of pieces a number, which fixes a dynamic axis to the
    example's size. (Where a piece counted from the start is read, the split stays: the
    checks its count makes keep the axis as its guards say, where a guard of a later op on
    the piece's size, which capture does not read as a bound, left values silently wrong.)"""
    split = converter.name_to_node.get(pieces.output().debugName())
    if isinstance(split, torch.fx.Node) and not split._erased and not split.users and all(
            use.user.kind() == "aten::__getitem__" and
            isinstance(index := use.user.inputsAt(1).toIValue(), int) and index < 0
            for use in pieces.output().uses()):
        converter.fx_graph.erase_node(split)
