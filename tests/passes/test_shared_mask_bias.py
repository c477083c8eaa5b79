import torch
import torch.nn.functional as F

import model_zoo
import onnxport
from onnxport.passes import SharedMaskBias
from test_models import assert_matches_eager


def _op_types(program):
    return [n.op_type for n in program.model.graph]


def _minus_infinity_wheres(program):
    """The Wheres that put -inf into scores (the others zero the rows a mask hides entirely,
    after the softmax)."""
    def minus_infinity(value):
        tensor = value.const_value if value is not None else None
        return (tensor is not None and tensor.size == 1
                and float(tensor.numpy().reshape(-1)[0]) == float("-inf"))

    return [n for n in program.model.graph if n.op_type == "Where"
            and any(minus_infinity(v) for v in n.inputs)]


def test_two_attentions_share_one_mask_bias():
    def f(q, k, v, mask):
        first = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return F.scaled_dot_product_attention(first, k, v, attn_mask=mask)

    q, k, v = (torch.randn(2, 3, 5, 8) for _ in range(3))
    mask = torch.rand(5, 5) > 0.4
    mask[:, 0] = True  # no fully masked row
    program = onnxport.export(f, (q, k, v, mask), opset_version=18)
    # One Where makes the additive bias; each attention adds it to its scores.
    wheres = _minus_infinity_wheres(program)
    assert len(wheres) == 1 and len(wheres[0].outputs[0].uses()) == 2
    torch.testing.assert_close(program(q, k, v, mask)[0], f(q, k, v, mask), rtol=1e-3, atol=1e-4)


def test_llama_layers_add_one_bias():
    model, args, kwargs = model_zoo.build("llama")
    program = onnxport.export(model, args, kwargs=kwargs, opset_version=18)
    assert len(_minus_infinity_wheres(program)) == 1
    assert_matches_eager(program, model, args, kwargs)


def _masked_attention(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _masked_attention_export():
    """SDPA with a boolean mask (no row all masked), exported; and its inputs."""
    q, k, v = (torch.randn(1, 2, 4, 8) for _ in range(3))
    mask = torch.rand(4, 4) > 0.4
    mask[:, 0] = True
    inputs = (q, k, v, mask)
    return onnxport.export(_masked_attention, inputs, opset_version=18), inputs


def test_mask_bias_zero_is_an_initializer_not_a_constant_node():
    program, inputs = _masked_attention_export()
    assert "Constant" not in _op_types(program)
    torch.testing.assert_close(program(*inputs)[0], _masked_attention(*inputs), rtol=1e-3,
                               atol=1e-4)


def test_the_bias_is_not_found_again():
    # The bias Where(mask, 0, -inf) matches the pattern itself: a second run (the manager's
    # confirming round) must leave it, not wrap it in one more Add per run.
    program, _ = _masked_attention_export()
    nodes = _op_types(program)
    assert not SharedMaskBias()(program.model).modified
    assert _op_types(program) == nodes
