"""Special functions of ops/special.py that need more than one ONNX op: nextafter, bit-exact
without a bit cast, and hash_tensor, which XORs the bits of float64 values."""

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


_HASH_CASES = [
    (torch.tensor(1.5), {}),
    (torch.tensor(7), {"dim": -1}),
    # -0, NaN, inf, float32 subnormals and the largest float32: each bit pattern matters.
    (torch.tensor([[1.5, -2.0, 0.0, 1e-40], [-0.0, float("nan"), float("-inf"), 3e38]]),
     {"dim": 1}),
    (torch.randn(4, 5, generator=torch.Generator().manual_seed(0)) * 1e3,
     {"dim": (0,), "keepdim": True}),
    # float64 subnormals and values whose 52-bit fraction needs every bit.
    (torch.tensor([[1e-310, -5e-324, 1e300], [0.1, -1.0 / 3.0, 2.0 ** 70]], dtype=torch.float64),
     {}),
    (torch.tensor([[-3, 5], [2 ** 62, -2 ** 63]]), {"dim": 0}),
    (torch.tensor([-3, 4], dtype=torch.int8), {}),
    (torch.tensor([True, True, False]), {}),
    (torch.zeros(2, 0), {"dim": 0}),
]


@pytest.mark.parametrize("index", range(len(_HASH_CASES)))
def test_hash_tensor_xors_the_bits_torch_does(index):
    x, options = _HASH_CASES[index]
    program = onnxport.export(lambda t: torch.hash_tensor(t, **options), (x,))
    actual, expected = program(x)[0], torch.hash_tensor(x, **options)
    assert actual.dtype == torch.uint64 and actual.shape == expected.shape
    assert torch.equal(actual.view(torch.int64), expected.view(torch.int64)), (actual, expected)


@pytest.mark.parametrize("opset", [13, 17])
def test_hash_tensor_before_bitwise_xor(opset):
    x = torch.randn(2, 5, generator=torch.Generator().manual_seed(2))
    program = onnxport.export(lambda t: torch.hash_tensor(t, dim=1), (x,), opset_version=opset)
    expected = torch.hash_tensor(x, dim=1)
    assert torch.equal(program(x)[0].view(torch.int64), expected.view(torch.int64))


def test_hash_tensor_of_another_mode_is_a_clear_error():
    with pytest.raises(TranslationError, match="hash_tensor is translated for mode 0"):
        onnxport.export(lambda t: torch.hash_tensor(t, mode=1), (torch.randn(3),))


def test_hash_tensor_of_a_large_tensor_is_a_small_graph():
    x = torch.randn(3, 1001, generator=torch.Generator().manual_seed(1))
    program = onnxport.export(lambda t: torch.hash_tensor(t, dim=1), (x,))
    expected = torch.hash_tensor(x, dim=1)
    assert torch.equal(program(x)[0].view(torch.int64), expected.view(torch.int64))
    assert len(program.model.graph) < 80  # one bit-parity pass, not a node per element
