"""GatherNDAsReshape: a gather whose constant indices read every element in order is a Reshape
(transformers' padding mask, read over an index grid)."""

import torch

import model_zoo
import onnxport
from test_models import assert_matches_eager


def _op_types(program):
    return [n.op_type for n in program.model.graph]


def test_bert_padding_mask_is_a_reshape_not_a_gather():
    model, args, kwargs = model_zoo.build("bert")
    kwargs = dict(kwargs, attention_mask=kwargs["attention_mask"].clone())
    kwargs["attention_mask"][0, 11:] = 0  # padded keys, so that the mask is read
    program = onnxport.export(model, args, kwargs=kwargs, opset_version=18)
    assert "GatherND" not in _op_types(program)
    assert_matches_eager(program, model, args, kwargs)


def test_index_grid_in_order_is_a_reshape():
    def f(mask):
        return mask[torch.arange(2)[:, None, None, None], torch.arange(5)[None, None, None, :]]

    mask = torch.randn(2, 5)
    program = onnxport.export(f, (mask,), opset_version=18)
    assert "GatherND" not in _op_types(program) and "Reshape" in _op_types(program)
    torch.testing.assert_close(program(mask)[0], f(mask))


def test_index_grid_out_of_order_stays_a_gather():
    def f(mask):
        return mask[torch.arange(2)[:, None], torch.arange(4, -1, -1)[None, :]]

    mask = torch.randn(2, 5)
    program = onnxport.export(f, (mask,), opset_version=18)
    assert "Reshape" not in _op_types(program)
    torch.testing.assert_close(program(mask)[0], f(mask))


def test_dynamic_padding_mask_runs_at_a_second_size():
    def f(x, mask):
        batch, keys = mask.shape
        picked = mask[torch.arange(batch)[:, None], torch.arange(keys)[None, :]]
        return x * picked

    batch, keys = torch.export.Dim("batch"), torch.export.Dim("keys")
    program = onnxport.export(f, (torch.randn(2, 5), torch.randn(2, 5)), opset_version=18,
                              dynamic_shapes=({0: batch, 1: keys}, {0: batch, 1: keys}))
    for size in ((2, 5), (3, 7)):
        x, mask = torch.randn(*size), torch.randn(*size)
        torch.testing.assert_close(program(x, mask)[0], f(x, mask))
