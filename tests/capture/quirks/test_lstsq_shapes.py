"""linalg_lstsq's fake kernel while torch.export traces (capture/quirks/lstsq_shapes.py)."""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import DynamicOutputShapeException

from onnxport.capture.quirks.lstsq_shapes import static_lstsq_shapes


class Lstsq(torch.nn.Module):
    def __init__(self, driver=None):
        super().__init__()
        self.driver = driver

    def forward(self, a, b):
        return torch.linalg.lstsq(a, b, driver=self.driver)


@pytest.mark.parametrize("driver, a, b", [
    (None, (2, 6, 3), (2, 6, 2)),
    ("gels", (6, 3), (6,)),
    ("gels", (3, 6), (3, 2)),
    ("gelsd", (3, 6), (3, 2)),
])
def test_output_shapes_are_eagers(driver, a, b):
    args = (torch.randn(a), torch.randn(b))
    with static_lstsq_shapes():
        program = torch.export.export(Lstsq(driver), args)
    output = next(n for n in program.graph.nodes if n.op == "output")
    shapes = [tuple(node.meta["val"].shape) for node in output.args[0]]
    assert shapes == [tuple(t.shape) for t in Lstsq(driver)(*args)]


def test_data_dependent_residuals_still_fail():
    with static_lstsq_shapes(), pytest.raises(DynamicOutputShapeException):
        torch.export.export(Lstsq("gelsd"), (torch.randn(6, 3), torch.randn(6, 2)))


def test_kernel_is_removed_afterwards():
    with static_lstsq_shapes():
        pass
    with pytest.raises(DynamicOutputShapeException):
        torch.export.export(Lstsq(), (torch.randn(6, 3), torch.randn(6, 2)))
