"""Searching sorted boundaries: bucketize (searchsorted of one row) over dynamic lengths."""

from __future__ import annotations

import pytest
import torch

from op_check import BOTH_PATHS, PATH_IDS, check


class _Buckets(torch.nn.Module):
    def forward(self, v, boundaries):
        return (torch.bucketize(v, boundaries), torch.bucketize(v, boundaries, right=True,
                                                                out_int32=True),
                torch.bucketize(v[0, 0], boundaries), torch.bucketize(2.5, boundaries),
                torch.bucketize(3, boundaries.long(), right=True))


def _sorted(n):
    return torch.sort(torch.randn(n) * 3)[0]


@pytest.mark.parametrize("dynamo", BOTH_PATHS, ids=PATH_IDS)
def test_bucketize_over_dynamic_lengths_of_values_and_boundaries(dynamo):
    # torch's decomposition searches a length it reads as a number: the boundaries' length
    # was fixed to the example's, and ONNX Runtime refused every other.
    boundaries = torch.tensor([-2.0, 0.0, 1.0, 3.0, 4.0])
    program = check(_Buckets(), torch.randn(2, 3) * 3, boundaries, dynamo=dynamo,
                    input_names=["v", "boundaries"], dynamic_axes={"v": [1], "boundaries": [0]},
                    run_with=[(torch.randn(2, 6) * 3, _sorted(8)),
                              (torch.tensor([[-2.0, 3.0, 3.5], [0.0, 1.0, 9.0]]), boundaries[:2])])
    assert str(program.model.graph.inputs[1].shape[0]) == "boundaries_dynamic_axes_1"
