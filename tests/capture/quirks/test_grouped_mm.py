"""capture/quirks/grouped_mm.py: aten::_grouped_mm on fake tensors of float32, which the CPU
runs and the meta kernel (CUDA's rule) refuses."""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from onnxport.capture import quirks


@pytest.mark.parametrize("a, b, offs, expected", [
    ((6, 8), (3, 8, 4), (3,), (6, 4)),  # rows grouped over experts
    ((8, 6), (6, 4), (3,), (3, 8, 4)),  # groups along K
    ((3, 5, 8), (8, 4), (3,), (5, 4)),  # columns grouped along N
    ((3, 5, 8), (3, 8, 4), None, (3, 5, 4)),  # a batched product
])
@pytest.mark.parametrize("step", ["replay", "torch.export"])
def test_float32_grouped_mm_has_its_shape_on_fake_tensors(a, b, offs, expected, step):
    with quirks.applied(step), FakeTensorMode():
        ends = torch.empty(offs, dtype=torch.int32) if offs else None
        out = torch._grouped_mm(torch.empty(a), torch.empty(b), offs=ends)
    assert tuple(out.shape) == expected and out.dtype == torch.float32
