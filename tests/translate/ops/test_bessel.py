"""Bessel and Airy functions (ops/bessel.py): torch's Cephes approximations, compared with eager
on every branch, at the branch points, far out, below zero, at 0, inf and NaN."""

from __future__ import annotations

import pytest
import torch

from op_check import check

FUNCTIONS = {
    "bessel_j0": torch.special.bessel_j0, "bessel_j1": torch.special.bessel_j1,
    "bessel_y0": torch.special.bessel_y0, "bessel_y1": torch.special.bessel_y1,
    "modified_bessel_k0": torch.special.modified_bessel_k0,
    "modified_bessel_k1": torch.special.modified_bessel_k1,
    "scaled_modified_bessel_k0": torch.special.scaled_modified_bessel_k0,
    "scaled_modified_bessel_k1": torch.special.scaled_modified_bessel_k1,
    "spherical_bessel_j0": torch.special.spherical_bessel_j0,
    "airy_ai": torch.special.airy_ai,
}

# The branch points of Math.h (1e-5, 0.5, 2, 2.09, 5, 8.32, 103.892) from both sides, values
# where exp overflows in float32, and far out, where only the asymptotic forms hold.
_POINTS = [0.0, 1e-6, 1e-5, 0.3, 0.49, 0.5, 1.0, 1.99, 2.0, 2.01, 2.08, 2.09, 2.1, 2.4048,
           3.8317, 4.99, 5.0, 5.01, 8.0, 8.32, 8.33, 20.0, 88.8, 103.0, 104.0, 1e3, 1e6, 1e20,
           3e38]
EDGES = torch.tensor(_POINTS + [-p for p in _POINTS[1:]]
                     + [float("inf"), float("-inf"), float("nan")])
SPREAD = torch.linspace(-12.0, 12.0, 241)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_float32_on_every_branch(name):
    check(FUNCTIONS[name], torch.cat([EDGES, SPREAD]))


@pytest.mark.parametrize("name", FUNCTIONS)
def test_integers_compute_in_float32(name):
    check(FUNCTIONS[name], torch.arange(-30, 120, 3))


@pytest.mark.parametrize("name", ["bessel_y1", "modified_bessel_k0", "airy_ai"])
def test_float64_computes_in_double(name):
    # Math.h runs in double here: the Airy series takes more terms, exp(88.8) does not overflow.
    check(FUNCTIONS[name], torch.cat([EDGES, SPREAD]).double(), rtol=1e-7, atol=1e-12)


def test_bool_and_opset_13():
    check(torch.special.bessel_j1, torch.tensor([True, False]), opset=13)
