"""The word-language Transformer of pytorch/examples: nn.TransformerEncoder with a causal mask,
captured by torch.export (it compared the mask with a causal one by value)."""

import pytest
import torch

import onnxport


class WordLanguageTransformer(torch.nn.Module):
    def __init__(self, tokens=50, width=16):
        super().__init__()
        self.embed = torch.nn.Embedding(tokens, width)
        layer = torch.nn.TransformerEncoderLayer(width, 2, 32, dropout=0.0)
        self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.decoder = torch.nn.Linear(width, tokens)

    def forward(self, src):
        mask = torch.nn.Transformer.generate_square_subsequent_mask(src.shape[0])
        return self.decoder(self.encoder(self.embed(src), mask=mask))


def test_word_language_transformer_is_captured_by_torch_export():
    torch.manual_seed(0)
    model = WordLanguageTransformer().eval()
    src = torch.randint(0, 50, (7, 2))
    program = onnxport.export(model, (src,), input_names=["src"],
                              dynamic_axes={"src": {0: "sequence", 1: "batch"}})
    assert program.capture_strategy.startswith("torch.export"), program.capture_strategy
    for shape in ((7, 2), (11, 3)):
        src = torch.randint(0, 50, shape)
        torch.testing.assert_close(program(src)[0], model(src), rtol=1e-3, atol=1e-4)


class MaskFromLength(WordLanguageTransformer):
    """As pytorch/examples writes it: the mask's size is len(src), a Python int."""

    def forward(self, src):
        mask = torch.log(torch.tril(torch.ones(len(src), len(src))))
        return self.decoder(self.encoder(self.embed(src), mask=mask))


def test_a_size_read_by_len_stays_dynamic_through_strict_capture(recwarn):
    # Non-strict capture runs forward in Python, where len(src) is an int that fixes the
    # sequence; strict capture (dynamo) traces it as a symbol, so it is tried before fixing.
    torch.manual_seed(0)
    model = MaskFromLength().eval()
    program = onnxport.export(model, (torch.randint(0, 50, (6, 3)),), input_names=["src"],
                              dynamic_axes={"src": {0: "sequence"}})
    assert program.capture_strategy == "torch.export (strict)", program.capture_strategy
    assert not [w for w in recwarn if "fixed" in str(w.message)]
    for length in (6, 11):
        src = torch.randint(0, 50, (length, 3))
        torch.testing.assert_close(program(src)[0], model(src), rtol=1e-3, atol=1e-4)


class _MaskedTransformer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = torch.nn.Transformer(8, 2, 1, 1, 16, dropout=0.0)

    def forward(self, src, tgt, tgt_mask):
        return self.transformer(src, tgt, tgt_mask=tgt_mask)


def test_a_traced_transformer_applies_the_mask_it_is_given(recwarn):
    # Traced with a causal example mask, the decoder's check of the mask by value was kept as
    # its answer: the file ignored the mask (is_causal), silently wrong for any other mask at
    # the example's size, and the grown check then fixed every axis.
    torch.manual_seed(0)
    model = _MaskedTransformer().eval()
    causal = torch.nn.Transformer.generate_square_subsequent_mask
    program = onnxport.export(model, (torch.randn(5, 2, 8), torch.randn(4, 2, 8), causal(4)),
                              dynamo=False, input_names=["src", "tgt", "mask"],
                              dynamic_axes={"src": [0, 1], "tgt": [0, 1], "mask": [0, 1]})
    assert not [w for w in recwarn if "fixed" in str(w.message) or "kept" in str(w.message)]
    for s, t, b in ((5, 4, 2), (6, 3, 3)):
        for mask in (causal(t), torch.randn(t, t), torch.zeros(t, t)):
            inputs = (torch.randn(s, b, 8), torch.randn(t, b, 8), mask)
            torch.testing.assert_close(program(*inputs)[0], model(*inputs), rtol=1e-3,
                                       atol=1e-4)


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_a_scripted_transformer_applies_the_mask_it_is_given(dynamo):
    # Scripted, the decoder's check of the mask by value was a branch on the mask's values
    # returning a bool, which capture refused.
    torch.manual_seed(0)
    model = _MaskedTransformer().eval()
    causal = torch.nn.Transformer.generate_square_subsequent_mask
    program = onnxport.export(torch.jit.script(model),
                              (torch.randn(5, 2, 8), torch.randn(4, 2, 8), causal(4)),
                              dynamo=dynamo, input_names=["src", "tgt", "mask"],
                              dynamic_axes={"src": [0, 1], "tgt": [0, 1], "mask": [0, 1]})
    for s, t, b in ((5, 4, 2), (6, 3, 3)):
        for mask in (causal(t), torch.randn(t, t)):
            inputs = (torch.randn(s, b, 8), torch.randn(t, b, 8), mask)
            torch.testing.assert_close(program(*inputs)[0], model(*inputs), rtol=1e-3,
                                       atol=1e-4)
