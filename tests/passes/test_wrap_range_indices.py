"""WrapRangeIndices: ONNX Runtime's GatherToSliceFusion reads a Range's bounds as a Slice's,
which differ where a bound is negative; such Ranges reach their Gather through a Where."""

import io

import numpy as np
import onnxruntime as ort
import pytest
import torch

import onnxport
from onnxport.passes.wrap_range_indices import WrapRangeIndices


class Reversed(torch.nn.Module):
    def forward(self, x):  # arange(n - 1, -1, -1): a limit of -1
        return x.index_select(0, torch.arange(x.size(0) - 1, -1, -1)) * 2


class FromTheEnd(torch.nn.Module):
    def forward(self, x):  # arange(-n, 0): negative indices, which Gather reads from the end
        return x.index_select(1, torch.arange(-x.size(1), 0) % x.size(1)) + x[:, torch.arange(
            -x.size(1), 0)]


class Positions(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Embedding(16, 4)

    def forward(self, x):  # arange(0, n): left to the fusion, exact there
        return x + self.table(torch.arange(x.size(1)))


class ReversedPositions(Positions):
    def forward(self, x):  # embedding rows n - 1 down to 0
        return x + self.table(torch.arange(x.size(1) - 1, -1, -1))


def _session(model, x, dynamo, level=ort.GraphOptimizationLevel.ORT_ENABLE_ALL):
    buffer = io.BytesIO()
    onnxport.export(model, (x,), buffer, input_names=["x"],
                    dynamic_axes={"x": {0: "rows", 1: "columns"}}, dynamo=dynamo)
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    return ort.InferenceSession(buffer.getvalue(), options, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "dynamo=False"])
@pytest.mark.parametrize("model, shapes", [
    (Reversed(), [(5, 3), (7, 2)]), (FromTheEnd(), [(5, 3), (7, 2)]),
    (ReversedPositions().eval(), [(2, 5, 4), (3, 9, 4)])],
    ids=["reversed", "from the end", "reversed positions"])
def test_a_range_with_a_negative_bound_gathers_what_torch_does(model, shapes, dynamo):
    session = _session(model, torch.randn(shapes[0]), dynamo)
    for shape in shapes:
        x = torch.randn(shape)
        (actual,) = session.run(None, {"x": x.numpy()})
        np.testing.assert_allclose(actual, model(x).detach().numpy(), rtol=1e-3, atol=1e-4)


def test_a_range_of_sizes_is_left_to_the_fusion():
    model = Positions().eval()
    program = onnxport.export(model, (torch.randn(2, 5, 4),),
                              dynamic_shapes=({1: torch.export.Dim("seq", max=16)},))
    ops = [node.op_type for node in program.model.graph]
    assert "Range" in ops and "Where" not in ops
    x = torch.randn(2, 9, 4)
    torch.testing.assert_close(program(x)[0], model(x), rtol=1e-3, atol=1e-4)


def test_the_pass_changes_nothing_without_a_range():
    program = onnxport.export(lambda x: x[torch.tensor([2, 0])], (torch.randn(3, 2),))
    assert not WrapRangeIndices()(program.model).modified
