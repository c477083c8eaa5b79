"""A representative set of ops exported at every supported opset (13..23) and run in ONNX
Runtime: opset-dependent forms (axes as inputs, LayerNormalization, Gelu, HardSwish, Split's
num_outputs...) must all agree with eager."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from op_check import ALL_OPSETS, check, count, op_types


class Representative(torch.nn.Module):
    """Many opset-sensitive ops in one graph, so one export per opset covers them all."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 8, 3, padding=1)
        self.batch_norm = torch.nn.BatchNorm2d(8)
        self.group_norm = torch.nn.GroupNorm(2, 8)
        self.layer_norm = torch.nn.LayerNorm(16)
        with torch.no_grad():
            self.batch_norm.running_mean.uniform_(-0.5, 0.5)
            self.batch_norm.running_var.uniform_(0.5, 2.0)
            self.batch_norm.weight.uniform_(0.5, 1.5)
            self.batch_norm.bias.uniform_(-0.5, 0.5)

    def forward(self, image, tokens, mask):
        # image [N, 4, 8, 8]; tokens [N, 2, 6, 16] (batch, heads, sequence, head size)
        x = self.conv(image)
        x = self.batch_norm(x)
        x = F.hardswish(x)
        x = self.group_norm(x)
        pooled = F.adaptive_avg_pool2d(x, 1).flatten(1)                     # GlobalAveragePool
        windows = F.adaptive_max_pool2d(x, (4, 2))                          # whole windows
        uneven = F.adaptive_avg_pool2d(x, (3, 5))                           # overlapping windows
        y = self.layer_norm(tokens)
        exact = F.gelu(y)
        approximate = F.gelu(y, approximate="tanh")
        mean = y.mean(dim=(-2, -1), keepdim=True)
        soft = torch.softmax(y, dim=-1)
        first, second = y.chunk(2, dim=-1)
        a, b, c = y.split([4, 4, 8], dim=-1)
        squeezed = y.unsqueeze(1).squeeze(1)
        plain = F.scaled_dot_product_attention(y, y, y)
        causal = F.scaled_dot_product_attention(y, y, y, is_causal=True)
        masked = F.scaled_dot_product_attention(y, y, y, attn_mask=mask)
        steps = torch.arange(tokens.shape[2], dtype=torch.float32)
        filled = torch.full((tokens.shape[0], tokens.shape[2]), 0.5)
        return (pooled, windows, uneven, exact, approximate, mean, soft, first * second,
                a + b, c, squeezed, plain, causal, masked, steps, filled)


def _inputs(batch=2, sequence=6):
    torch.manual_seed(0)
    image = torch.randn(batch, 4, 8, 8)
    tokens = torch.randn(batch, 2, sequence, 16)
    mask = torch.rand(sequence, sequence) > 0.3
    mask |= torch.eye(sequence, dtype=torch.bool)  # no row fully masked (that is nan in both)
    return image, tokens, mask


@pytest.mark.parametrize("opset", ALL_OPSETS)
def test_representative_ops_at_every_opset(opset):
    program = check(Representative(), *_inputs(), opset=opset)
    ops = op_types(program)
    assert count(program, "Conv") == 1
    assert ("LayerNormalization" in ops) == (opset >= 17)
    assert ("Gelu" in ops) == (opset >= 20)
    assert ("HardSwish" in ops) == (opset >= 14)
    assert "GlobalAveragePool" in ops


@pytest.mark.parametrize("opset", ALL_OPSETS)
def test_representative_ops_with_dynamic_sizes_at_every_opset(opset):
    """The same graph with a dynamic batch and sequence (arange/full sized by them, causal
    masks of a symbolic size), run at sizes other than the example's."""
    batch = torch.export.Dim("batch", min=1, max=16)
    sequence = torch.export.Dim("sequence", min=2, max=64)
    shapes = {"image": {0: batch}, "tokens": {0: batch, 2: sequence},
              "mask": {0: sequence, 1: sequence}}
    check(Representative(), *_inputs(), opset=opset, dynamic_shapes=shapes,
          run_with=[_inputs(batch=3, sequence=9), _inputs(batch=1, sequence=4)])


class SortingAndSelection(torch.nn.Module):
    """Sorting, data-dependent selections, scatter reductions and bit shifts, whose ONNX forms
    change with the opset (ScatterElements' reduction at 16 and 18, Shape's start/end at 15)."""

    def forward(self, x, index, bits):
        values, positions = torch.topk(x, 3, dim=-1)
        ordered = torch.sort(x, dim=0, descending=True, stable=True).values
        selected = torch.masked_select(x, x > 0.5)
        where = torch.nonzero(x < -0.5)
        summed = x.scatter_reduce(1, index, x[:, :3], "sum", include_self=False)
        biggest = x.scatter_reduce(1, index, x[:, :3], "amax")
        return (values, positions, ordered, selected, where, summed, biggest, bits << 3,
                bits >> 2, torch.diagonal(x), torch.expm1(x), torch.log1p(x.abs()))


@pytest.mark.parametrize("opset", ALL_OPSETS)
def test_sorting_and_selection_at_every_opset(opset):
    torch.manual_seed(0)
    x = torch.randn(4, 6)
    index = torch.randint(0, 6, (4, 3))
    bits = torch.tensor([1, -3, 100, -128], dtype=torch.int32)
    batch = torch.export.Dim("batch")
    program = check(SortingAndSelection(), x, index, bits, opset=opset,
                    dynamic_shapes={"x": {0: batch}, "index": {0: batch}, "bits": None},
                    run_with=[(torch.randn(7, 6), torch.randint(0, 6, (7, 3)), bits)])
    reductions = {n.attributes["reduction"].value for n in program.model.graph
                  if n.op_type == "ScatterElements" and "reduction" in n.attributes}
    assert reductions == ({"add", "max"} if opset >= 18 else {"add"} if opset >= 16 else set())
