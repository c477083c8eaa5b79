"""GroupedQueryMatMul: below opset 23, grouped-query attention reads each key/value head once
(the query heads of a group as one taller matrix) instead of copying it per query head; numbers
stay eager's, at static and dynamic shapes."""

import pytest
import torch
import torch.nn.functional as F

import model_zoo
import onnxport
from onnxport.capture import parameter_names
from test_models import _resized, assert_matches_eager


def _op_types(program):
    return [n.op_type for n in program.model.graph]


@pytest.mark.parametrize("dynamic", [False, True])
def test_llama_attention_reads_two_key_value_heads(dynamic):
    model, args, kwargs = model_zoo.build("llama")  # 4 query heads, 2 key/value heads
    axes = model_zoo.dynamic_axes_for("llama", args, kwargs, parameter_names(model))
    program = onnxport.export(model, args, kwargs=kwargs, opset_version=18,
                              dynamic_axes=axes if dynamic else None)
    graph = program.model.graph
    outputs = {v.name: v for v in graph.outputs}
    for layer in range(2):
        key, value = outputs[f"present.{layer}.key"], outputs[f"present.{layer}.value"]
        # repeat_kv's Unsqueeze, Expand (a copy) and Reshape are gone.
        assert {n.op_type for v in (key, value) for n, _ in v.uses()} == {"MatMul", "Transpose"}
        readers = [n for n, _ in value.uses() if n.op_type == "MatMul"]
        assert len(readers) == 1 and readers[0].inputs[1] is value
        transposes = [n for n, _ in key.uses() if n.op_type == "Transpose"]
        (scores,) = [n for n, _ in transposes[0].outputs[0].uses()]
        # The scale stays next to the MatMul (ONNX Runtime folds it into FusedMatMul's alpha).
        (scale,) = [n for n, _ in scores.outputs[0].uses()]
        assert scores.op_type == "MatMul" and scale.op_type == "Mul"
    assert_matches_eager(program, model, args, kwargs)
    if dynamic:
        assert_matches_eager(program, model, *_resized("llama", args, kwargs, batch=3, sequence=11))


def test_repeat_on_another_axis_is_kept():
    # The heads repeated as a whole (torch.repeat: h0 h1 h0 h1), not each in place: not GQA.
    def f(q, k, v):
        k, v = (t.unsqueeze(1).expand(2, 2, 2, 5, 8).reshape(2, 4, 5, 8) for t in (k, v))
        return F.scaled_dot_product_attention(q, k, v)

    q, k, v = torch.randn(2, 4, 5, 8), torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8)
    program = onnxport.export(f, (q, k, v), opset_version=18)
    assert "Expand" in _op_types(program)
    torch.testing.assert_close(program(q, k, v)[0], f(q, k, v), rtol=1e-3, atol=1e-4)
