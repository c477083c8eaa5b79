"""TransposeRowsAroundGemm: the Transposes around MultiheadAttention's out-projection compose
into one; numbers stay eager's, at static and dynamic shapes."""

import torch
from torchvision.models.vision_transformer import VisionTransformer

import onnxport


def _small_vit():
    torch.manual_seed(0)  # torchvision's ViT code (batch-first MultiheadAttention), small sizes
    return VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4,
                             hidden_dim=32, mlp_dim=64).eval()


def _op_types(program):
    return [n.op_type for n in program.model.graph]


def test_vit_out_projection_has_one_transpose():
    model, x = _small_vit(), torch.randn(2, 3, 32, 32)
    program = onnxport.export(model, (x,), opset_version=18)
    # Per layer: [B, S, E] -> [S, B, E] for the in-projection, the q/k/v unbind, one per head
    # split (q, k, v), k's for its MatMul, and the heads back to rows before the out-projection;
    # plus the patches' [B, E, S] -> [B, S, E]. The [S, B, E] -> [B, S, E] after it is gone.
    assert _op_types(program).count("Transpose") == 1 + 2 * 7, _op_types(program)
    torch.testing.assert_close(program(x)[0], model(x), rtol=1e-3, atol=1e-4)


def test_attention_at_opset_23_and_dynamic_batch():
    class SelfAttention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = torch.nn.MultiheadAttention(16, 4, batch_first=True)

        def forward(self, x):
            return self.attention(x, x, x, need_weights=False)[0] + x

    torch.manual_seed(0)
    model, x = SelfAttention().eval(), torch.randn(2, 5, 16)
    program = onnxport.export(model, (x,), opset_version=23,
                              dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
    ops = _op_types(program)
    # The heads are transposed once to [B, S, H, D] rows, not to [S, B, H, D] and back.
    transposes = [n for n in program.model.graph if n.op_type == "Transpose"]
    assert all(list(n.attributes["perm"].value) != [1, 0, 2] for n in transposes
               if n.outputs[0].uses() and n.outputs[0].uses()[0].node.op_type == "Add"), ops
    for shape in [(2, 5, 16), (3, 5, 16)]:
        x = torch.randn(*shape)
        torch.testing.assert_close(program(x)[0], model(x), rtol=1e-3, atol=1e-4)
