"""capture/quirks/fused_cells.py: the fused cell kernels CUDA runs for LSTMCell/GRUCell, on
fake tensors during the "replay" step (a scripted loop's body calls aten::gru_cell itself:
from cuda its fake run failed, "aten._thnn_fused_gru_cell: no fake impl or Meta kernel").
CI has no GPU: the kernels are called here directly, on fake CPU tensors."""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from onnxport.capture import quirks

aten = torch.ops.aten


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no bias"])
def test_fused_gru_cell_runs_on_fake_tensors(bias):
    with quirks.applied("replay"), FakeTensorMode():
        gates, hx = torch.empty(3, 12), torch.empty(3, 4)
        biases = (torch.empty(12), torch.empty(12)) if bias else (None, None)
        hy, workspace = aten._thnn_fused_gru_cell(gates, gates, hx, *biases)
    assert (tuple(hy.shape), tuple(workspace.shape)) == ((3, 4), (3, 20))


def test_fused_lstm_cell_without_biases_runs_on_fake_tensors():
    # torch's own meta kernel reads each bias's device ('NoneType' has no attribute 'device').
    with quirks.applied("replay"), FakeTensorMode():
        gates, cx = torch.empty(3, 16), torch.empty(3, 4)
        hy, cy, workspace = aten._thnn_fused_lstm_cell(gates, gates, cx)
    assert [tuple(t.shape) for t in (hy, cy, workspace)] == [(3, 4), (3, 4), (3, 16)]


def test_the_kernels_are_gone_after_the_step():
    # (sizes no test above uses: fake tensors cache an op's results by its inputs' metadata)
    with FakeTensorMode(), pytest.raises(Exception, match="_thnn_fused_gru_cell"):
        aten._thnn_fused_gru_cell(torch.empty(2, 9), torch.empty(2, 9), torch.empty(2, 3))
