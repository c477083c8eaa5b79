"""WhereBeforeBias: a constant bias selected against finfo.min by a broadcast condition becomes
the bias plus a Where on the small condition (T5's position bias and padding mask)."""

import math

import pytest
import torch

import model_zoo
import onnxport
from test_models import assert_matches_eager


def _padded_t5():
    model, args, kwargs = model_zoo.build("t5")
    mask = kwargs["attention_mask"].clone()
    mask[0, 12:] = 0  # padded keys: finfo.min where T5 adds the padding mask
    return model, args, dict(kwargs, attention_mask=mask)


@pytest.mark.parametrize("opset", [18, 23])
def test_t5_selects_on_the_padding_mask_and_adds_the_bias(opset):
    model, args, kwargs = _padded_t5()
    program = onnxport.export(model, args, kwargs=kwargs, opset_version=opset)
    # One Where, on the B * S padding mask (shared by the encoder and the cross attention),
    # not one per mask broadcasting [B, 1, L, S] against the [1, H, L, S] bias.
    wheres = [n for n in program.model.graph if n.op_type == "Where"]
    assert len(wheres) == 1
    assert math.prod(wheres[0].outputs[0].shape) == 2 * 16
    assert_matches_eager(program, model, args, kwargs)


def test_bias_changed_by_the_fill_stays_a_where():
    bias = torch.randn(1, 2, 4, 4)

    def f(scores, padding):
        # A fill of -1: bias + fill is not the fill, so the Where is not an Add.
        mask = torch.where(padding[:, None, :, None].bool(), bias, -1.0)
        return scores + mask

    padding = torch.tensor([[1, 1, 0, 1], [0, 1, 1, 1]])
    scores = torch.randn(2, 2, 4, 4)
    program = onnxport.export(f, (scores, padding), opset_version=18)
    assert [n.op_type for n in program.model.graph].count("Where") == 1
    assert list(next(n for n in program.model.graph if n.op_type == "Where")
                .outputs[0].shape) == [2, 2, 4, 4]
    torch.testing.assert_close(program(scores, padding)[0], f(scores, padding))
