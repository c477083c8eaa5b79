"""Attention3D: at opset 23 attention runs in ONNX Attention's 3-D form ([B, S, heads * D],
q_num_heads/kv_num_heads), without the heads' Transposes, and with eager's numbers."""

import pytest
import torch

import model_zoo
import onnxport


class GroupedAttention(torch.nn.Module):
    def __init__(self, heads=4, kv_heads=2, size=8, return_key=False):
        super().__init__()
        self.heads, self.kv_heads, self.size, self.return_key = heads, kv_heads, size, return_key
        width = heads * size
        self.q = torch.nn.Linear(width, width)
        self.k = torch.nn.Linear(width, kv_heads * size)
        self.v = torch.nn.Linear(width, kv_heads * size)
        self.o = torch.nn.Linear(width, width)

    def forward(self, x, mask):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, self.heads, self.size).transpose(1, 2)
        k = self.k(x).view(b, s, self.kv_heads, self.size).transpose(1, 2)
        v = self.v(x).view(b, s, self.kv_heads, self.size).transpose(1, 2)
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                               enable_gqa=True)
        out = self.o(out.transpose(1, 2).reshape(b, s, -1))
        return (out, k) if self.return_key else out


def _inputs():
    x = torch.randn(2, 6, 32)
    mask = torch.ones(2, 1, 6, 6, dtype=torch.bool).tril()
    mask[1, :, 2] = False  # a fully masked row: zeros in torch, as the Where keeps it
    return x, mask


def _attention(program):
    return [n for n in program.model.graph if n.op_type == "Attention"]


def test_grouped_attention_is_3d_without_transposes():
    model, (x, mask) = GroupedAttention().eval(), _inputs()
    program = onnxport.export(model, (x, mask), opset_version=23)
    (attention,) = _attention(program)
    assert attention.attributes["q_num_heads"].value == 4
    assert attention.attributes["kv_num_heads"].value == 2
    assert len(attention.inputs[0].shape) == 3
    ops = [n.op_type for n in program.model.graph]
    assert "Transpose" not in ops and "Expand" not in ops, ops
    with torch.no_grad():
        torch.testing.assert_close(program(x, mask)[0], model(x, mask), rtol=1e-3, atol=1e-4)


def test_returned_key_is_made_again_in_4d():
    model, (x, mask) = GroupedAttention(return_key=True).eval(), _inputs()
    program = onnxport.export(model, (x, mask), opset_version=23)
    assert len(_attention(program)[0].inputs[0].shape) == 3
    with torch.no_grad():
        expected = model(x, mask)
    for actual, wanted in zip(program(x, mask), expected, strict=True):
        torch.testing.assert_close(actual, wanted, rtol=1e-3, atol=1e-4)


def test_before_opset_23_nothing_changes():
    model, (x, mask) = GroupedAttention().eval(), _inputs()
    program = onnxport.export(model, (x, mask), opset_version=18)
    assert not _attention(program)
    with torch.no_grad():
        torch.testing.assert_close(program(x, mask)[0], model(x, mask), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("name", ["bert", "llama"])
def test_transformers_attention_is_3d(name):
    model, args, kwargs = model_zoo.build(name)
    program = onnxport.export(model, args, kwargs=kwargs, opset_version=23)
    attentions = _attention(program)
    assert attentions and all(len(a.inputs[0].shape) == 3 for a in attentions)
    transposes = [n for n in program.model.graph if n.op_type == "Transpose"]
    # Only Llama's returned key/value caches are still transposed, once each per layer.
    assert all(n.outputs[0].is_graph_output() for n in transposes), transposes
    with torch.no_grad():
        expected = model(*args, **kwargs)
    expected = [t for t in torch.utils._pytree.tree_leaves(expected) if isinstance(t, torch.Tensor)]
    for actual, wanted in zip(program(*args, **kwargs), expected, strict=True):
        torch.testing.assert_close(actual, wanted, rtol=1e-3, atol=1e-4)


def test_dynamic_batch_and_sequence():
    model, (x, mask) = GroupedAttention().eval(), _inputs()
    batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
    program = onnxport.export(model, (x, mask), opset_version=23, dynamic_shapes=(
        {0: batch, 1: sequence}, {0: batch, 2: sequence, 3: sequence}))
    assert len(_attention(program)[0].inputs[0].shape) == 3
    for b, s in [(2, 6), (3, 9)]:
        x = torch.randn(b, s, 32)
        mask = torch.ones(b, 1, s, s, dtype=torch.bool).tril()
        mask[-1, :, 1] = False
        with torch.no_grad():
            torch.testing.assert_close(program(x, mask)[0], model(x, mask), rtol=1e-3, atol=1e-4)
