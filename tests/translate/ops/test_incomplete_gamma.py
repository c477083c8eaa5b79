"""igamma and igammac (ops/incomplete_gamma.py): every branch of torch's Math.h (boundary
values, asymptotic series near a = x, power series, continued fraction, the small-x series of
igammac) compared with eager."""

from __future__ import annotations

import pytest
import torch

from op_check import check, op_types

_VALUES = [0.0, 1e-3, 0.3, 0.5, 0.9, 1.0, 1.05, 1.1, 1.5, 3.5, 10.0, 19.0, 25.0, 150.0, 250.0,
           1e4, float("inf"), float("nan"), -1.0]


def _arguments(dtype):
    a = torch.tensor(_VALUES).repeat_interleave(len(_VALUES))
    x = torch.tensor(_VALUES).repeat(len(_VALUES))
    # Near a = x, where the asymptotic series holds (20 < a < 200, and beyond 200), and just
    # outside its region, where the power series and the continued fraction take long.
    centre = torch.tensor([21.0, 100.0, 199.0, 250.0, 1e4, 1e5]).repeat_interleave(7)
    scale = torch.tensor([0.6, 0.8, 0.99, 1.0, 1.01, 1.2, 1.5]).repeat(6)
    generator = torch.Generator().manual_seed(0)
    spread_a = torch.rand(200, generator=generator) * 30
    spread_x = torch.rand(200, generator=generator) * 30
    return (torch.cat([a, centre, spread_a]).to(dtype),
            torch.cat([x, centre * scale, spread_x]).to(dtype))


@pytest.mark.parametrize("function", [torch.igamma, torch.igammac])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_every_branch_matches_eager(function, dtype):
    program = check(function, *_arguments(dtype), opset=13 if dtype == torch.float64 else 18)
    # Math.h iterates until convergence: an ONNX Loop, not 2000 unrolled steps.
    assert op_types(program).count("Loop") == 2


def test_broadcast_scalar_a_and_special_alias():
    x = torch.tensor([[0.2, 1.0, 4.0], [30.0, 0.0, 7.5]])
    check(torch.special.gammaincc, torch.tensor(2.5), x)
