"""DropNeverTakenWhere: the guard that zeroes attention rows a mask hides entirely is dropped
where the mask cannot hide a row (a finfo.min float mask, a constant one), kept where it can."""

import pytest
import torch
import torch.nn.functional as F

import model_zoo
import onnxport
from test_models import assert_matches_eager


def _row_guards(program):
    """Wheres whose kept value is an attention's weights (Softmax) or output (Attention)."""
    def made_by(value, op_type):
        node = value.producer() if value is not None else None
        return node is not None and node.op_type == op_type

    return [n for n in program.model.graph if n.op_type == "Where"
            and (made_by(n.inputs[2], "Softmax") or made_by(n.inputs[2], "Attention"))]


@pytest.mark.parametrize("opset", [18, 23])
def test_t5_attentions_have_no_row_guard(opset):
    model, args, kwargs = model_zoo.build("t5")
    program = onnxport.export(model, args, kwargs=kwargs, opset_version=opset)
    # T5's six attentions add position bias + finfo.min padding (encoder, cross attention) or
    # a constant causal bias (decoder): no row is ever all -inf, so none keeps a guard.
    assert _row_guards(program) == []
    assert_matches_eager(program, model, args, kwargs)


class PaddedAttention(torch.nn.Module):
    """Attention under a float padding mask as transformers makes it: 0 or a filler."""

    def __init__(self, filler):
        super().__init__()
        self.filler = filler

    def forward(self, q, k, v, padding):
        mask = torch.where(padding[:, None, None, :].bool(), 0.0, self.filler)
        # [B, 1, L, S]: ONNX Runtime's Attention (opset 23) refuses a mask broadcast over L.
        mask = mask.expand(-1, -1, q.shape[2], -1)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _inputs(batch, sequence, hidden):
    """``hidden`` keys of the first batch row padded."""
    q, k, v = (torch.randn(batch, 2, sequence, 8) for _ in range(3))
    padding = torch.ones(batch, sequence, dtype=torch.long)
    padding[0, :hidden] = 0
    return q, k, v, padding


@pytest.mark.parametrize("opset", [18, 23])
def test_finfo_min_mask_drops_the_guard_at_a_dynamic_size(opset):
    model = PaddedAttention(torch.finfo(torch.float32).min)
    batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
    program = onnxport.export(model, _inputs(2, 5, 2), opset_version=opset, dynamic_shapes=(
        {0: batch, 2: sequence}, {0: batch, 2: sequence}, {0: batch, 2: sequence},
        {0: batch, 1: sequence}))
    assert _row_guards(program) == []
    for size in ((2, 5), (3, 7)):
        # Not every key hidden: ONNX Runtime's Attention gives a row of finfo.min zeros where
        # torch averages the values (so did the graph with the guard, which never fires).
        inputs = _inputs(*size, hidden=2)
        torch.testing.assert_close(program(*inputs)[0], model(*inputs), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("opset", [18, 23])
def test_minus_infinity_mask_keeps_the_guard(opset):
    model = PaddedAttention(float("-inf"))
    inputs = _inputs(2, 5, hidden=5)  # the first row hides every key
    program = onnxport.export(model, inputs, opset_version=opset)
    assert len(_row_guards(program)) == 1
    result = program(*inputs)[0]
    assert torch.equal(result[0], torch.zeros_like(result[0]))  # torch's zeros, not nan
    torch.testing.assert_close(result, model(*inputs), rtol=1e-3, atol=1e-4)
