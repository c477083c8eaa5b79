"""PiecewiseTensor: written a slice at a time, it gives the same bytes as the whole tensor."""

from __future__ import annotations

import io

import onnx_ir as ir
import pytest
import torch

from onnxport import piecewise_tensor
from onnxport.piecewise_tensor import PiecewiseTensor


@pytest.mark.parametrize("piece_bytes", [1, 7 * 4, 1 << 20])
def test_pieces_make_the_whole(monkeypatch, piece_bytes):
    monkeypatch.setattr(piecewise_tensor, "_PIECE_BYTES", piece_bytes)
    source = torch.randn(5, 7, 3)
    transposed = source.permute(2, 0, 1)
    tensor = PiecewiseTensor(lambda rows: transposed[rows], dtype=ir.DataType.FLOAT,
                             shape=ir.Shape([3, 5, 7]), name="t")
    stream = io.BytesIO()
    tensor.tofile(stream)
    whole = transposed.contiguous().numpy().tobytes()
    assert stream.getvalue() == whole
    assert tensor.tobytes() == whole
    assert tensor.nbytes == len(whole)
