import pytest
import torch

import onnxport
from onnxport.passes.fuse_unsqueeze import _merged_axes


@pytest.mark.parametrize("rank,inner,outer", [(1, [0], [1]), (2, [1], [0]), (2, [-1], [0, 3]),
                                              (3, [0, 2], [1]), (1, [0], [-1])])
def test_merged_axes_match_two_unsqueezes(rank, inner, outer):
    x = torch.zeros([2 + i for i in range(rank)])
    y = x
    for axis in sorted(a % (rank + len(inner)) for a in inner):
        y = y.unsqueeze(axis)
    for axis in sorted(a % (rank + len(inner) + len(outer)) for a in outer):
        y = y.unsqueeze(axis)
    z = x
    for axis in _merged_axes(rank, inner, outer):
        z = z.unsqueeze(axis)
    assert y.shape == z.shape


def test_chain_becomes_one_unsqueeze():
    def f(x):
        return x.unsqueeze(0).unsqueeze(2) + 1

    x = torch.randn(3, 4)
    program = onnxport.export(f, (x,))
    assert [n.op_type for n in program.model.graph].count("Unsqueeze") == 1
    torch.testing.assert_close(program(x)[0], f(x))
