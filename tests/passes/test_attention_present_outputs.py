"""AttentionPresentOutputs: at opset 23 the keys and values a decoder returns in heads are the
Attention's present_key/present_value outputs, not a Reshape and Transpose each; numbers stay
eager's, at static and dynamic shapes."""

import pytest
import torch

import model_zoo
import onnxport
from test_models import assert_matches_eager


class ReturnsKeyValue(torch.nn.Module):
    """An attention that returns its keys and values [B, H, S, D], as a KV cache; ``kv_heads`` <
    4 groups the query heads."""

    def __init__(self, kv_heads=4):
        super().__init__()
        self.kv_heads = kv_heads
        self.q = torch.nn.Linear(16, 16)
        self.kv = torch.nn.Linear(16, 8 * kv_heads)

    def forward(self, x):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, 4, 4).transpose(1, 2)
        k, v = (t.reshape(b, s, self.kv_heads, 4).transpose(1, 2)
                for t in self.kv(x).chunk(2, dim=-1))
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        return out.transpose(1, 2).reshape(b, s, 16), k, v


def _check(program, model, x):
    graph = program.model.graph
    attentions = [n for n in graph if n.op_type == "Attention"]
    assert len(attentions) == 1
    # The returned key and value come out of the Attention; no Transpose is left.
    assert [o.producer() for o in graph.outputs[1:]] == [attentions[0]] * 2
    assert "Transpose" not in [n.op_type for n in graph]
    for actual, expected in zip(program(x), model(x)):
        torch.testing.assert_close(actual, expected, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("kv_heads", [4, 2])
def test_returned_keys_and_values_are_attention_outputs(kv_heads):
    model, x = ReturnsKeyValue(kv_heads), torch.randn(2, 5, 16)
    _check(onnxport.export(model, (x,), opset_version=23), model, x)


def test_dynamic_batch_and_sequence():
    model, x = ReturnsKeyValue(), torch.randn(2, 5, 16)
    batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
    program = onnxport.export(model, (x,), dynamic_shapes={"x": {0: batch, 1: sequence}},
                              opset_version=23)
    for shape in [(2, 5, 16), (3, 7, 16)]:
        _check(program, model, torch.randn(*shape))


def test_gpt2_presents_come_from_attention():
    model, args, kwargs = model_zoo.build("gpt2")
    program = onnxport.export(model, args, kwargs=kwargs, opset_version=23)
    graph = program.model.graph
    # GPT-2's present keys and values: the Attention outputs, not a Transpose each per layer.
    assert {o.producer().op_type for o in graph.outputs[1:]} == {"Attention"}
    assert "Transpose" not in [n.op_type for n in graph]
    assert_matches_eager(program, model, args, kwargs)
