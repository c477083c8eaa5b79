"""SplitAfterHeadTranspose: a fused Q/K/V projection goes to heads through one Reshape and one
Transpose, then a Split on the head axis; numbers stay eager's, at static and dynamic shapes."""

import torch

import model_zoo
import onnxport
from test_models import assert_matches_eager


class FusedQKV(torch.nn.Module):
    """GPT-2's attention input, its key returned (a present key) beside the attention; with
    ``kv_heads`` < 4 the key and value have fewer heads than the query (grouped)."""

    def __init__(self, kv_heads=4):
        super().__init__()
        self.widths = [16, 4 * kv_heads, 4 * kv_heads]
        self.qkv = torch.nn.Linear(8, sum(self.widths))

    def forward(self, x):
        q, k, v = self.qkv(x).split(self.widths, dim=-1)
        q, k, v = [t.reshape(*t.shape[:-1], -1, 4).transpose(1, 2) for t in (q, k, v)]
        attention = torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        return attention, k


def _head_transposes(program):
    """perms of the Transposes taking the projection's [B, S, H, D] to heads [B, H, S, D]."""
    return [list(n.attributes["perm"].value) for n in program.model.graph
            if n.op_type == "Transpose" and list(n.attributes["perm"].value) == [0, 2, 1, 3]
            and n.outputs[0].uses() and n.outputs[0].uses()[0].node.op_type == "Split"]


def _assert_one_head_transpose(program, splits=1):
    ops = [n.op_type for n in program.model.graph]
    assert len(_head_transposes(program)) == splits == ops.count("Split"), ops
    split = next(n for n in program.model.graph if n.op_type == "Split")
    assert split.attributes["axis"].value == 1


def test_fused_qkv_goes_to_heads_with_one_transpose():
    model, x = FusedQKV(), torch.randn(2, 5, 8)
    program = onnxport.export(model, (x,), opset_version=18)
    # One Transpose for q, k and v (it was three), and the key's own k^T; no other.
    _assert_one_head_transpose(program)
    assert [n.op_type for n in program.model.graph].count("Transpose") == 2
    for actual, expected in zip(program(x), model(x)):
        torch.testing.assert_close(actual, expected, rtol=1e-3, atol=1e-4)


def test_grouped_heads_split_unevenly():
    model, x = FusedQKV(kv_heads=2), torch.randn(2, 5, 8)
    program = onnxport.export(model, (x,), opset_version=18)
    _assert_one_head_transpose(program)
    split = next(n for n in program.model.graph if n.op_type == "Split")
    assert split.inputs[1].const_value.numpy().tolist() == [4, 2, 2]
    for actual, expected in zip(program(x), model(x)):
        torch.testing.assert_close(actual, expected, rtol=1e-3, atol=1e-4)


def test_dynamic_batch_and_sequence():
    model, x = FusedQKV(), torch.randn(2, 5, 8)
    batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
    program = onnxport.export(model, (x,), dynamic_shapes={"x": {0: batch, 1: sequence}},
                              opset_version=18)
    _assert_one_head_transpose(program)
    for shape in [(2, 5, 8), (3, 7, 8)]:
        x = torch.randn(*shape)
        for actual, expected in zip(program(x), model(x)):
            torch.testing.assert_close(actual, expected, rtol=1e-3, atol=1e-4)


def test_part_used_elsewhere_keeps_its_transposes():
    class KeyUsedTwice(FusedQKV):
        def forward(self, x):
            q, k, v = self.qkv(x).split(self.widths, dim=-1)
            heads = [t.reshape(*t.shape[:-1], -1, 4).transpose(1, 2) for t in (q, k, v)]
            return torch.nn.functional.scaled_dot_product_attention(*heads), k.relu()

    model, x = KeyUsedTwice(), torch.randn(2, 5, 8)
    program = onnxport.export(model, (x,), opset_version=18)
    assert not _head_transposes(program)
    for actual, expected in zip(program(x), model(x)):
        torch.testing.assert_close(actual, expected, rtol=1e-3, atol=1e-4)


def test_gpt2_heads_come_from_one_transpose_per_layer():
    model, args, kwargs = model_zoo.build("gpt2")
    program = onnxport.export(model, args, kwargs=kwargs, opset_version=18)
    # GPT-2's q, k, v: one Transpose per layer, not three; its present keys and values are
    # Split outputs (so ONNX Runtime folds k^T into its MatMul).
    _assert_one_head_transpose(program, splits=2)
    graph = program.model.graph
    for present in graph.outputs[1:]:
        assert present.producer().op_type == "Split", present
    assert [n.op_type for n in graph].count("Transpose") == 6
    assert_matches_eager(program, model, args, kwargs)
