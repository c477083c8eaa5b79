"""The last piece of a split that makes one piece at the example: ``x.chunk(3, 1)[-1]`` of a
width of 1 is the whole width, and so is ``[0]``; the capture records the one piece, and the
graph cannot tell which the model took. At larger sizes torch makes more pieces, and [-1] is
the last: taken as the first, the ONNX model returned other values (found by differential
fuzzing). While Python runs the model, the one piece comes in a tuple whose [-1] is computed
from the axis's size by torch's rule (the last piece starts at the last multiple of the piece
size below the size), which capture records as size arithmetic; [0] stays the one piece."""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch
import torch.utils._pytree as pytree


class _OnePiece(tuple):
    """The one piece of a split, whose [-1] is the last piece at any size of the axis."""

    def __getitem__(self, index):
        if isinstance(index, int) and not isinstance(index, bool) and index == -1:
            return self.last()
        return tuple.__getitem__(self, index)

    def __reduce__(self):  # (copied or pickled, it is the plain tuple it holds)
        return tuple, (tuple(self),)


# Returned by the model (``return x.chunk(2)``), the pieces are a tuple's: its outputs.
pytree.register_pytree_node(
    _OnePiece, lambda pieces: (list(pieces), None), lambda pieces, _: tuple(pieces),
    serialized_type_name="onnxport.capture.quirks.one_piece_splits._OnePiece")


def _one_piece(pieces: tuple, tensor: torch.Tensor, dim: int, piece_size) -> tuple:
    """``pieces`` as they are, or, when they are one piece of an axis whose size the capture
    may see change, in a tuple whose [-1] computes the last piece: ``piece_size(n)`` is the
    size of each piece of an axis of ``n`` (n >= 1)."""
    if len(pieces) != 1 or not isinstance(dim, int) or not -tensor.dim() <= dim < tensor.dim():
        return pieces
    if not torch.jit.is_tracing() and not isinstance(tensor.shape[dim], torch.SymInt):
        return pieces  # (a static size: the one piece is the last)
    axis = dim % tensor.dim()

    def last() -> torch.Tensor:
        n = tensor.size(axis)
        counted = n + 1 // (n + 1)  # n, or 1 for an empty axis: no division by 0 below
        size = piece_size(counted)
        start = (counted - 1) // size * size
        return tensor[(slice(None),) * axis + (slice(start, None),)]

    one = _OnePiece(pieces)
    one.last = last
    return one


@contextlib.contextmanager
def last_of_one_piece() -> Iterator[None]:
    """``chunk`` and ``split`` by a size (methods and functions) give their one piece in a
    tuple whose [-1] is computed (:class:`_OnePiece`) in the block."""
    original_chunk, original_split, original_torch_chunk = (
        torch.Tensor.chunk, torch.Tensor.split, torch.chunk)
    own_chunk = "chunk" in vars(torch.Tensor)  # (else TensorBase's, inherited)

    def chunk(self, chunks, dim=0):
        pieces = original_chunk(self, chunks, dim)
        if not isinstance(chunks, int) or chunks < 1:
            return pieces
        return _one_piece(pieces, self, dim, lambda n: (n + chunks - 1) // chunks)

    def torch_chunk(input, chunks, dim=0):
        return chunk(input, chunks, dim) if isinstance(input, torch.Tensor) else \
            original_torch_chunk(input, chunks, dim)

    def split(self, split_size, dim=0):
        pieces = original_split(self, split_size, dim)
        if not isinstance(split_size, int) or isinstance(split_size, bool) or split_size < 1:
            return pieces
        return _one_piece(pieces, self, dim, lambda n: split_size)

    torch.Tensor.chunk, torch.Tensor.split, torch.chunk = chunk, split, torch_chunk
    try:
        yield
    finally:
        torch.Tensor.split, torch.chunk = original_split, original_torch_chunk
        if own_chunk:
            torch.Tensor.chunk = original_chunk
        else:
            del torch.Tensor.chunk
