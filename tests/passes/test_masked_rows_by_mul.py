"""MaskedRowsByMul: the rows a boolean attention mask hides entirely are zeroed by a Mul with the
0/1 row flag (the mask bias is the lowest finite number), not a Where per layer; numbers stay
eager's, the hidden rows' zeros included, at static and dynamic shapes."""

import pytest
import torch

import model_zoo
import onnxport
from test_models import assert_matches_eager


class TwoLayers(torch.nn.Module):
    """Two attentions sharing one boolean mask, as a decoder's layers do."""

    def forward(self, q, k, v, mask):
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return torch.nn.functional.scaled_dot_product_attention(out, k, v, attn_mask=mask)


def _inputs(batch, length):
    q, k, v = (torch.randn(batch, 2, length, 4) for _ in range(3))
    mask = torch.ones(length, length, dtype=torch.bool).tril().expand(batch, 1, -1, -1).clone()
    mask[0, :, :, :2] = False  # the first row left-padded: its first two queries see no key
    return q, k, v, mask


def _ops(program):
    return [n.op_type for n in program.model.graph]


def test_fully_masked_rows_are_zeroed_by_mul():
    model, args = TwoLayers(), _inputs(2, 5)
    program = onnxport.export(model, args, opset_version=18)
    # One Where making the shared bias; each layer's zeroing is a Mul (no Equal left).
    assert _ops(program).count("Where") == 1 and "Equal" not in _ops(program), _ops(program)
    bias = next(n for n in program.model.graph if n.op_type == "Where")
    assert float(bias.inputs[2].const_value.numpy()) == torch.finfo(torch.float32).min
    expected = model(*args)
    assert (expected[0, :, :2] == 0).all()
    torch.testing.assert_close(program(*args)[0], expected, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("opset", [18, 23])
def test_dynamic_batch_and_length(opset):
    model, args = TwoLayers(), _inputs(2, 5)
    batch, length = torch.export.Dim("batch"), torch.export.Dim("length")
    shapes = ({0: batch, 2: length}, {0: batch, 2: length}, {0: batch, 2: length},
              {0: batch, 2: length, 3: length})
    program = onnxport.export(model, args, dynamic_shapes=shapes, opset_version=opset)
    assert _ops(program).count("Where") == 1, _ops(program)
    for size in [(2, 5), (3, 7)]:
        args = _inputs(*size)
        torch.testing.assert_close(program(*args)[0], model(*args), rtol=1e-3, atol=1e-4)


def test_gpt2_left_padded():
    model, args, kwargs = model_zoo.build("gpt2")
    program = onnxport.export(model, args, kwargs=kwargs, opset_version=18)
    # GPT-2's two layers: no Where each on the attention weights, only the mask bias's.
    assert _ops(program).count("Where") == 1, _ops(program)
    mask = kwargs["attention_mask"].clone()
    mask[0, :3] = 0  # left padding: with the causal mask, the first three rows see nothing
    assert_matches_eager(program, model, args, {**kwargs, "attention_mask": mask})


def test_opset_23_attention_takes_the_finite_bias():
    model, args = TwoLayers(), _inputs(2, 5)
    program = onnxport.export(model, args, opset_version=23)
    graph = program.model.graph
    attentions = [n for n in graph if n.op_type == "Attention"]
    # Each Attention adds the one finite float bias; its hidden rows are zeroed by a Mul.
    assert len(attentions) == 2 and _ops(program).count("Where") == 1, _ops(program)
    assert all(a.inputs[3].dtype == onnxport_float32() for a in attentions)
    assert all(a.outputs[0].uses()[0].node.op_type == "Mul" for a in attentions)
    torch.testing.assert_close(program(*args)[0], model(*args), rtol=1e-3, atol=1e-4)


def test_opset_23_gpt2_left_padded():
    model, args, kwargs = model_zoo.build("gpt2")
    program = onnxport.export(model, args, kwargs=kwargs, opset_version=23)
    assert _ops(program).count("Attention") == 2 and _ops(program).count("Where") == 1
    mask = kwargs["attention_mask"].clone()
    mask[0, :3] = 0
    assert_matches_eager(program, model, args, {**kwargs, "attention_mask": mask})


def onnxport_float32():
    import onnx_ir as ir

    return ir.DataType.FLOAT
