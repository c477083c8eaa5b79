"""torch.unique's inverse indices and counts: older torch's fake kernel (2.11) gave them the
input's dtype, and a float input's export was refused by onnx.checker (int64 computed, float
declared). Exported on both paths and compared with eager on whichever torch is installed."""

import pytest
import torch

import onnxport
from onnxport.capture.quirks.unique_indices import _torch_gives_the_input_dtype


class _Unique(torch.nn.Module):
    def forward(self, x):
        values, inverse, counts = torch.unique(x.round(), return_inverse=True,
                                               return_counts=True)
        return values, inverse + 1, counts


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "dynamo=False"])
def test_the_inverse_and_counts_of_unique_are_int64(dynamo):
    model = _Unique()
    x = torch.randn(2, 3, 4) * 3
    program = onnxport.export(model, (x,), dynamo=dynamo)
    for actual, expected in zip(program(x), model(x)):
        assert actual.dtype == expected.dtype
        torch.testing.assert_close(actual, expected)


def test_the_kernel_is_replaced_only_where_torch_gets_the_dtype_wrong():
    # (torch 2.12 and later give int64 themselves: their own kernel stays)
    wrong = _torch_gives_the_input_dtype()
    assert wrong == (tuple(int(p) for p in torch.__version__.split(".")[:2]) < (2, 12)) or \
        not wrong
