"""index_reduce and put at every opset: ScatterElements' reductions (mul/add from opset 16,
max/min from 18), or scatter_reduce's one-hot composition before them."""

from __future__ import annotations

import pytest
import torch

from op_check import check, op_types

INDEX = torch.tensor([0, 2, 0])


@pytest.mark.parametrize("opset", [13, 17, 18])
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_index_reduce_at_opsets(dtype, reduce, opset):
    x = (torch.randn(4, 5) * 3).to(dtype)
    source = (torch.randn(4, 3) * 3).to(dtype)
    program = check(lambda x, s: (x.index_reduce(1, INDEX, s, reduce),
                                  x.index_reduce(1, INDEX, s, reduce, include_self=False)),
                    x, source, opset=opset)
    needs = 18 if reduce in ("amax", "amin") else 16
    reducing = any(node.op_type == "ScatterElements" and "reduction" in node.attributes
                   for node in program.model.graph)
    assert reducing == (opset >= needs)


@pytest.mark.parametrize("opset", [13, 16])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_put_at_opsets(dtype, opset):
    x = (torch.randn(3, 4) * 3).to(dtype)
    values = (torch.randn(4) * 3).to(dtype)
    index = torch.tensor([0, 7, 0, -1])
    program = check(lambda x, v: (x.put(index, v, accumulate=True), x.put(index[1:], v[1:])),
                    x, values, opset=opset)
    assert "ScatterElements" in op_types(program)
