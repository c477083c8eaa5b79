"""FlatSplit: a fused Q/K/V projection is split on its [M, 3E] rows, so each part reaches its
head shape in one Reshape; numbers stay eager's, at static and dynamic shapes."""

import onnx_ir as ir
import torch

import model_zoo
import onnxport
from test_models import assert_matches_eager


class FusedQKV(torch.nn.Module):
    """GPT-2's attention input: one Linear making q, k and v, split and cut into heads."""

    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(8, 24)

    def forward(self, x):
        q, k, v = self.qkv(x).split(8, dim=-1)
        heads = [t.reshape(*t.shape[:-1], 2, 4).transpose(1, 2) for t in (q, k, v)]
        return torch.nn.functional.scaled_dot_product_attention(*heads)


def _split_inputs_are_rows(program):
    """Each Split cuts the [M, 3E] rows, or (SplitAfterHeadTranspose) their one head
    Transpose(Reshape(rows))."""
    def rows(value):
        node = value.producer()
        if node is not None and node.op_type == "Transpose":
            value = node.inputs[0].producer().inputs[0]
        return len(value.shape) == 2

    splits = [n for n in program.model.graph if n.op_type == "Split"]
    return splits and all(rows(n.inputs[0]) for n in splits)


def test_fused_qkv_is_split_on_rows():
    model, x = FusedQKV(), torch.randn(2, 5, 8)
    program = onnxport.export(model, (x,), opset_version=18)
    assert _split_inputs_are_rows(program)
    # Into rows for the Gemm, then from rows to heads once (for all three parts).
    assert [n.op_type for n in program.model.graph].count("Reshape") == 2
    torch.testing.assert_close(program(x)[0], model(x), rtol=1e-3, atol=1e-4)


def test_dynamic_batch_and_sequence():
    model, x = FusedQKV(), torch.randn(2, 5, 8)
    batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
    program = onnxport.export(model, (x,), dynamic_shapes={"x": {0: batch, 1: sequence}},
                              opset_version=18)
    assert _split_inputs_are_rows(program)
    for shape in [(2, 5, 8), (3, 7, 8)]:
        x = torch.randn(*shape)
        torch.testing.assert_close(program(x)[0], model(x), rtol=1e-3, atol=1e-4)


def test_gpt2_splits_rows():
    model, args, kwargs = model_zoo.build("gpt2")
    program = onnxport.export(model, args, kwargs=kwargs, opset_version=18)
    assert _split_inputs_are_rows(program)
    # Two layers: three Reshapes fewer each than with the split on [B, S, 3E]. (The boolean
    # padding mask's Reshape, a gather before GatherNDAsReshape, and the row flags of
    # ZeroMaskedRows, [B * S, 1] once for both layers, are not the split's.)
    assert sum(n.op_type == "Reshape" and n.outputs[0].dtype != ir.DataType.BOOL
               and not n.outputs[0].name.endswith("_keep_rows")
               for n in program.model.graph) <= 7
    assert_matches_eager(program, model, args, kwargs)
