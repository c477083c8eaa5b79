"""Special functions of ops/special.py that need more than one ONNX op: nextafter, bit-exact
without a bit cast."""

from __future__ import annotations

import pytest
import torch

import onnxport
from onnxport.errors import TranslationError


def _neighbour_cases(dtype):
    info = torch.finfo(dtype)
    special = torch.tensor([0.0, -0.0, info.tiny, -info.tiny, info.smallest_normal,
                            -info.smallest_normal, info.smallest_normal * 2, info.max, -info.max,
                            1.0, -1.0, 2.0, 0.5, 3.0, 1e-30, 1e30, float("inf"), float("-inf"),
                            float("nan")], dtype=dtype)
    generator = torch.Generator().manual_seed(0)
    exponents = torch.randint(-45, 38, (300,), generator=generator).to(dtype)
    spread = torch.randn(300, generator=generator, dtype=dtype) * 10.0 ** exponents
    if dtype == torch.float64:  # its subnormals, and the binades where the step is scaled
        spread = torch.cat([spread, torch.tensor([1e-310, 5e-324, 2.0 ** -1021, 2.0 ** -969,
                                                  2.0 ** -900, 2.0 ** -901], dtype=dtype)])
    x = torch.cat([special.repeat_interleave(len(special)), spread, spread, spread])
    y = torch.cat([special.repeat(len(special)), spread + 1, -spread,
                   torch.full_like(spread, float("inf"))])
    return x, y


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("opset", [13, 18])
def test_nextafter_is_bit_exact(dtype, opset):
    x, y = _neighbour_cases(dtype)
    program = onnxport.export(lambda a, b: torch.nextafter(a, b), (x, y), opset_version=opset)
    actual, expected = program(x, y)[0], torch.nextafter(x, y)
    same = (actual == expected) & (torch.signbit(actual) == torch.signbit(expected))
    same |= actual.isnan() & expected.isnan()
    assert same.all(), [(x[i].item(), y[i].item(), expected[i].item(), actual[i].item())
                        for i in (~same).nonzero().flatten()[:5]]


def test_nextafter_of_half_is_a_clear_error():
    x = torch.tensor([1.0, 0.0], dtype=torch.float16)
    with pytest.raises(TranslationError, match="nextafter of FLOAT16 .* cast the inputs"):
        onnxport.export(lambda a, b: torch.nextafter(a, b), (x, x + 1))
