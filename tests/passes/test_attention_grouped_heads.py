import pytest
import torch

import model_zoo
import onnxport
from test_models import _resized, assert_matches_eager
from onnxport.capture import parameter_names


def _op_types(program):
    return [n.op_type for n in program.model.graph]


@pytest.mark.parametrize("dynamic", [False, True])
def test_llama_attention_reads_the_grouped_heads_once(dynamic):
    model, args, kwargs = model_zoo.build("llama")  # 4 query heads, 2 key/value heads
    axes = model_zoo.dynamic_axes_for("llama", args, kwargs, parameter_names(model))
    program = onnxport.export(model, args, kwargs=kwargs, opset_version=23,
                              dynamic_axes=axes if dynamic else None)
    ops = _op_types(program)
    assert ops.count("Attention") == 2 and "Softmax" not in ops
    # transformers' repeat_kv (Unsqueeze, Expand, Reshape) is gone: Attention takes the 2 heads.
    # (In Attention's 3-D form, which Attention3D makes, the heads are counted in attributes.)
    for node in program.model.graph:
        if node.op_type == "Attention":
            assert node.attributes["kv_num_heads"].value == 2
            assert [v.shape[-1] for v in node.inputs[1:3]] == [2 * 16, 2 * 16]
            for value in node.inputs[1:3]:
                while value.producer() is not None and value.producer().op_type != "Gemm":
                    assert value.producer().op_type in ("Reshape", "RotaryEmbedding"), value
                    value = value.producer().inputs[0]
    assert_matches_eager(program, model, args, kwargs)
    if dynamic:
        assert_matches_eager(program, model, *_resized("llama", args, kwargs, batch=3, sequence=11))


def test_below_opset_23_attention_stays_portable():
    model, args, kwargs = model_zoo.build("llama")
    program = onnxport.export(model, args, kwargs=kwargs, opset_version=18)
    assert "Attention" not in _op_types(program) and "Softmax" in _op_types(program)


def test_repeat_on_another_axis_is_kept():
    # The heads repeated as a whole (torch.repeat: h0 h1 h0 h1), not each in place: not GQA.
    def f(q, k, v):
        k, v = (t.unsqueeze(1).expand(2, 2, 2, 5, 8).reshape(2, 4, 5, 8) for t in (k, v))
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)

    q, k, v = torch.randn(2, 4, 5, 8), torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8)
    program = onnxport.export(f, (q, k, v), opset_version=23)
    assert "Expand" in _op_types(program)
    torch.testing.assert_close(program(q, k, v)[0], f(q, k, v), rtol=1e-3, atol=1e-4)
