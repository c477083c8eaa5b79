"""nn.TransformerEncoder and nn.MultiheadAttention exported under torch.no_grad() or
torch.inference_mode(), as users often wrap an export: with gradients off they run fused
inference kernels, which the tracer recorded as one call with no ONNX translation."""

import pytest
import torch

import onnxport


def _encoder():
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    return torch.nn.TransformerEncoder(layer, 2).eval()


@pytest.mark.parametrize("context", [torch.no_grad, torch.inference_mode],
                         ids=["no_grad", "inference_mode"])
@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_transformer_encoder_exported_with_gradients_off(context, dynamo):
    torch.manual_seed(0)
    model = _encoder()
    with context():
        program = onnxport.export(model, (torch.randn(2, 5, 8),), input_names=["x"],
                                  dynamic_axes={"x": {0: "batch", 1: "sequence"}},
                                  dynamo=dynamo)
    assert torch.backends.mha.get_fastpath_enabled()  # (the user's setting, put back)
    for shape in ((2, 5, 8), (3, 7, 8)):
        x = torch.randn(shape)
        with torch.no_grad():
            expected = model(x)
        torch.testing.assert_close(program(x)[0], expected, rtol=1e-3, atol=1e-4)


class _Attention(torch.nn.Module):
    """Self-attention of its input, with the padding mask when given one."""

    def __init__(self, batch_first):
        super().__init__()
        self.attention = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first)

    def forward(self, x):
        return self.attention(x, x, x)[0]


class _Padded(torch.nn.Module):
    def __init__(self, batch_first):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(8, 2, 16, 0.0, batch_first=batch_first)
        self.encoder = torch.nn.TransformerEncoder(layer, 2)

    def forward(self, x, padding):
        return self.encoder(x, src_key_padding_mask=padding)


def _scripted_models():
    # (built when the test runs: torch.manual_seed(0) first)
    return {
        "encoder": lambda: torch.nn.TransformerEncoder(
            torch.nn.TransformerEncoderLayer(8, 2, 16, 0.0), 2),
        "encoder, batch first": _encoder,
        "encoder, norm first": lambda: torch.nn.TransformerEncoder(
            torch.nn.TransformerEncoderLayer(8, 2, 16, 0.0, norm_first=True), 2),
        "attention": lambda: _Attention(False),
        "attention, batch first": lambda: _Attention(True),
        "decoder layer": lambda: torch.nn.TransformerDecoderLayer(8, 2, 16, 0.0),
        "transformer": lambda: torch.nn.Transformer(8, 2, 1, 1, 16, 0.0),
    }


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
@pytest.mark.parametrize("name", list(_scripted_models()))
def test_scripted_transformers_take_the_composed_path(name, dynamo):
    # Scripted, the fast path's switch is the constant True and its branch hangs on what
    # only a run knows (grad and autocast enabled, the devices); its list of device checks
    # failed the conversion (PyTorch's own test of a scripted nn.TransformerEncoder). The
    # second layer's checks read the first's output's rank and dtype; a decoder's query
    # is checked against its memory with `is`.
    torch.manual_seed(0)
    model = _scripted_models()[name]().eval()
    x = torch.randn(5, 3, 8)
    arguments = (x, x) if name in ("decoder layer", "transformer") else (x,)
    program = onnxport.export(torch.jit.script(model), arguments, dynamo=dynamo)
    torch.testing.assert_close(program(*arguments)[0], model(*arguments), rtol=1e-3,
                               atol=1e-4)


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["", "batch first"])
def test_a_scripted_encoder_with_a_padding_mask(batch_first, dynamo):
    torch.manual_seed(0)
    model = _Padded(batch_first).eval()
    x = torch.randn(3, 5, 8) if batch_first else torch.randn(5, 3, 8)
    padding = torch.zeros(3, 5, dtype=torch.bool)
    padding[0, -2:] = True
    program = onnxport.export(torch.jit.script(model), (x, padding), dynamo=dynamo)
    # (gradients on: eager takes the composed path too, which gives the padded places values)
    torch.testing.assert_close(program(x, padding)[0], model(x, padding), rtol=1e-3,
                               atol=1e-4)


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_a_scripted_encoder_with_dynamic_batch_and_sequence(dynamo):
    torch.manual_seed(0)
    model = _encoder()
    program = onnxport.export(torch.jit.script(model), (torch.randn(2, 5, 8),),
                              input_names=["x"], dynamo=dynamo,
                              dynamic_axes={"x": {0: "batch", 1: "sequence"}})
    for shape in ((2, 5, 8), (3, 7, 8)):
        x = torch.randn(shape)
        torch.testing.assert_close(program(x)[0], model(x), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["", "batch first"])
def test_a_scripted_encoder_with_a_padding_mask_and_dynamic_sizes(batch_first, dynamo):
    # The attention's mask is made float in scripted code (is_floating_point of a value made
    # from the mask, folded), and viewed by a branch on `size(0) == 1` of a batch times heads,
    # which the sizes decide (4 * b is never 1): both were left to torch.export, which
    # refused a branch on sizes (torch.cond of Python bools, of symbolic operands).
    torch.manual_seed(0)
    model = _Padded(batch_first).eval()

    def inputs(batch, length):
        x = torch.randn(batch, length, 8) if batch_first else torch.randn(length, batch, 8)
        padding = torch.zeros(batch, length, dtype=torch.bool)
        padding[0, -1:] = True
        return x, padding

    axes = {"x": {0: "batch", 1: "length"} if batch_first else {1: "batch", 0: "length"},
            "padding": {0: "batch", 1: "length"}}
    program = onnxport.export(torch.jit.script(model), inputs(2, 5), dynamo=dynamo,
                              input_names=["x", "padding"], dynamic_axes=axes)
    for batch, length in ((2, 5), (3, 7), (1, 4)):
        x, padding = inputs(batch, length)
        torch.testing.assert_close(program(x, padding)[0], model(x, padding), rtol=1e-3,
                                   atol=1e-4)


class _CrossAttention(torch.nn.Module):
    def __init__(self, batch_first, need_weights):
        super().__init__()
        self.attention = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first)
        self.need_weights = need_weights

    def forward(self, query, memory, padding, mask):
        return self.attention(query, memory, memory, key_padding_mask=padding, attn_mask=mask,
                              need_weights=self.need_weights)[0]


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
@pytest.mark.parametrize("need_weights", [False, True], ids=["", "weights"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["", "batch first"])
def test_scripted_cross_attention_with_masks(batch_first, need_weights, dynamo):
    # `query is key` of two inputs, and of the two transposes batch_first makes of them
    # (a list built by appends, unpacked), is decided: two tensors.
    torch.manual_seed(0)
    model = _CrossAttention(batch_first, need_weights).eval()
    query = torch.randn(2, 4, 8) if batch_first else torch.randn(4, 2, 8)
    memory = torch.randn(2, 5, 8) if batch_first else torch.randn(5, 2, 8)
    padding = torch.zeros(2, 5, dtype=torch.bool)
    padding[1, -1] = True
    mask = torch.zeros(4, 5)
    mask[0, 1] = float("-inf")
    arguments = (query, memory, padding, mask)
    program = onnxport.export(torch.jit.script(model), arguments, dynamo=dynamo)
    torch.testing.assert_close(program(*arguments)[0], model(*arguments), rtol=1e-3, atol=1e-4)


class _SameOrNot(torch.nn.Module):
    def forward(self, a, b):
        if a is b:
            return a * 2
        return a - b


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_is_of_two_scripted_inputs_follows_the_example(dynamo):
    # Two different tensors: `a is b` is False in the file; one tensor given for both: the
    # file computes what the model does with it.
    x, y = torch.randn(3), torch.randn(3)
    scripted = torch.jit.script(_SameOrNot())
    program = onnxport.export(scripted, (x, y), dynamo=dynamo)
    torch.testing.assert_close(program(x, y)[0], x - y)
    program = onnxport.export(scripted, (x, x), dynamo=dynamo)
    torch.testing.assert_close(program(x, x)[0], x * 2)


class _SelfOrCross(torch.nn.Module):
    def __init__(self, batch_first):
        super().__init__()
        self.attention = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first)

    def forward(self, query, key, value, padding):
        return self.attention(query, key, value, key_padding_mask=padding)[0]


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["", "batch first"])
def test_scripted_attention_given_one_tensor_as_key_and_value(batch_first, dynamo):
    # Two inputs given one tensor: `key is value` stays a branch, which read the packed
    # in_proj_weight from before it ("Attribute ... not found") and, batch first, built the
    # list of transposes by appends in it (torch's append read a list as a node).
    torch.manual_seed(0)
    model = _SelfOrCross(batch_first).eval()

    def inputs(batch, length, memory):
        query = torch.randn(batch, length, 8) if batch_first else torch.randn(length, batch, 8)
        key = torch.randn(batch, memory, 8) if batch_first else torch.randn(memory, batch, 8)
        padding = torch.zeros(batch, memory, dtype=torch.bool)
        padding[-1, -1] = True
        return query, key, key, padding

    axes = [0, 1]
    program = onnxport.export(torch.jit.script(model), inputs(2, 3, 4), dynamo=dynamo,
                              input_names=["q", "k", "v", "pad"],
                              dynamic_axes={name: axes for name in ("q", "k", "v", "pad")})
    for sizes in ((2, 3, 4), (3, 5, 6)):
        arguments = inputs(*sizes)
        torch.testing.assert_close(program(*arguments)[0], model(*arguments), rtol=1e-3,
                                   atol=1e-4)


def test_a_scripted_self_attention_gives_no_warning_of_torch_s_internals():
    # Each branch the graph had decided gave torch.cond's "Pred is a Python constant" note
    # (72 for a scripted ViT).
    import warnings

    model = torch.jit.script(_SelfOrCross(True).eval())
    x = torch.randn(2, 3, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        onnxport.export(model, (x, x, x, torch.zeros(2, 3, dtype=torch.bool)), dynamo=False)
    assert not [w for w in caught if "Pred is a Python constant" in str(w.message)]
