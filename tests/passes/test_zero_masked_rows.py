"""ZeroMaskedRows: the queries a mask hides entirely are zeroed by one Mul on the merged heads'
rows, not by a Where after every softmax; numbers stay eager's, hidden rows included, at static
and dynamic shapes."""

import onnx
import onnx_ir as ir
import pytest
import torch
import torch.nn.functional as F

import model_zoo
import onnxport
from onnxport.capture import parameter_names
from test_models import _resized, assert_matches_eager


def _softmax_wheres(program):
    return [n for n in program.model.graph if n.op_type == "Where"
            and any(v is not None and v.producer() is not None
                    and v.producer().op_type == "Softmax" for v in n.inputs)]


def _left_padded(kwargs, hidden=3):
    """The same inputs with the first row's first ``hidden`` tokens padding: with the causal
    mask, those queries see no key at all."""
    mask = kwargs["attention_mask"].clone()
    mask[0, :hidden] = 0
    return {**kwargs, "attention_mask": mask}


@pytest.mark.parametrize("dynamic", [False, True])
def test_llama_zeroes_hidden_queries_on_the_merged_rows(dynamic):
    model, args, kwargs = model_zoo.build("llama")
    axes = model_zoo.dynamic_axes_for("llama", args, kwargs, parameter_names(model))
    program = onnxport.export(model, args, kwargs=kwargs, opset_version=18,
                              dynamic_axes=axes if dynamic else None)
    # Llama's Where after each Softmax is gone; each o_proj Gemm reads its rows times keep.
    assert not _softmax_wheres(program)
    gemm_inputs = [n.inputs[0].producer() for n in program.model.graph if n.op_type == "Gemm"
                   and "o_proj" in n.inputs[1].name]
    assert len(gemm_inputs) == 2 and {n.op_type for n in gemm_inputs} == {"Mul"}
    assert gemm_inputs[0].inputs[1] is gemm_inputs[1].inputs[1]  # one keep for both layers
    # The row flags are computed after the first attention: the nodes are sorted again.
    onnx.checker.check_model(ir.serde.serialize_model(program.model))
    assert_matches_eager(program, model, args, _left_padded(kwargs))
    if dynamic:
        args, kwargs = _resized("llama", args, kwargs, batch=3, sequence=11)
        assert_matches_eager(program, model, args, _left_padded(kwargs, hidden=5))


@pytest.mark.parametrize("dynamic", [False, True])
def test_llama_attention_op_output_is_multiplied_by_keep(dynamic):
    # Opset 23: Attention takes the mask with the hidden queries let through; its 3-D output
    # is multiplied by keep [B, S, 1] where a Where picked zeros.
    model, args, kwargs = model_zoo.build("llama")
    axes = model_zoo.dynamic_axes_for("llama", args, kwargs, parameter_names(model))
    program = onnxport.export(model, args, kwargs=kwargs, opset_version=23,
                              dynamic_axes=axes if dynamic else None)
    attentions = [n for n in program.model.graph if n.op_type == "Attention"]
    assert len(attentions) == 2
    for attention in attentions:
        assert attention.inputs[3].producer().op_type == "Or"
        assert [n.op_type for n, _ in attention.outputs[0].uses()] == ["Mul"]
    assert "Where" not in [n.op_type for n in program.model.graph]
    onnx.checker.check_model(ir.serde.serialize_model(program.model))
    assert_matches_eager(program, model, args, _left_padded(kwargs))
    if dynamic:
        args, kwargs = _resized("llama", args, kwargs, batch=3, sequence=11)
        assert_matches_eager(program, model, args, _left_padded(kwargs, hidden=5))


class _Attention(torch.nn.Module):
    """Multi-head attention whose output heads merge into rows for a Linear, as a transformer
    layer does."""

    def __init__(self):
        super().__init__()
        self.out = torch.nn.Linear(16, 16, bias=False)

    def forward(self, q, k, v, mask):
        heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        batch, _, queries, _ = heads.shape
        return self.out(heads.transpose(1, 2).reshape(batch, queries, 16))


def test_hidden_queries_are_zeros_as_in_torch():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 2, 5, 8), torch.randn(2, 2, 7, 8), torch.randn(2, 2, 7, 8)
    mask = torch.rand(2, 1, 5, 7) > 0.5
    mask[:, :, :, 0] = True
    mask[1, 0, 2] = False  # query 2 of the second batch sees no key
    model = _Attention().eval()
    program = onnxport.export(model, (q, k, v, mask), opset_version=18)
    assert not _softmax_wheres(program)
    actual = program(q, k, v, mask)[0]
    expected = model(q, k, v, mask)
    assert expected[1, 2].abs().max() == 0
    torch.testing.assert_close(actual, expected, rtol=1e-3, atol=1e-4)
    # The same graph where no query is hidden: the Mul keeps every row as it was.
    mask[1, 0, 2, 0] = True
    torch.testing.assert_close(program(q, k, v, mask)[0], model(q, k, v, mask),
                               rtol=1e-3, atol=1e-4)


def test_heads_not_merged_into_rows_keep_the_where():
    # The attention output is returned as heads: no merged rows to zero, the Where stays.
    def f(q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    q, k, v = (torch.randn(1, 2, 4, 8) for _ in range(3))
    mask = torch.rand(1, 1, 4, 4) > 0.4
    mask[0, 0, 1] = False
    program = onnxport.export(f, (q, k, v, mask), opset_version=18)
    assert len(_softmax_wheres(program)) == 1
    torch.testing.assert_close(program(q, k, v, mask)[0], f(q, k, v, mask), rtol=1e-3, atol=1e-4)
