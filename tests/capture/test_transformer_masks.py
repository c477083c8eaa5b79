"""The word-language Transformer of pytorch/examples: nn.TransformerEncoder with a causal mask,
captured by torch.export (it compared the mask with a causal one by value)."""

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
