"""Writes through views inside scripted loops of a run-time count and scripted branches (issue
18): ``b[:, 1:3].copy_(...)``, ``b[0] = 5``, ``b.t()[1] += 3`` on a tensor the body made, or on
one from outside it. ONNX Loop and If bodies cannot alias, so capture/script_mutations.py
puts each write back into the tensor viewed (select/slice/diagonal scatters, a transpose or
reshape back) and later reads see it. The copy into a slice, the writes through a transpose
and a narrow were silently wrong answers before (the written view changed, the tensor did
not); most others were refused. Each exported on both
paths with a dynamic count, run in ONNX Runtime at three sizes and compared with the script."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import onnxport
from onnxport.errors import CaptureError

PATHS = pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])


class _CopyIntoASlice(nn.Module):
    def forward(self, x):
        acc = torch.zeros(3, 4)
        for i in range(x.size(0)):
            b = torch.zeros(3, 4)
            b[:, 1:3].copy_(x[i, :, :2])
            acc = acc + b
        return acc


class _NumberIntoARowAndAnItem(nn.Module):
    def forward(self, x):
        acc = torch.zeros(3, 4)
        for i in range(x.size(0)):
            b = x[i] * 2
            b[0] = 5.0
            b[1, 2] = 7.0
            b[:, 0] += 1.0
            acc = acc + b
        return acc


class _RowOfTheIteration(nn.Module):
    def forward(self, x):
        acc = torch.zeros(3, 4)
        for i in range(x.size(0)):
            m = torch.ones(3, 4)
            m[i % 3] = 0.0
            acc = acc + x[i] * m
        return acc


class _ThroughATranspose(nn.Module):
    def forward(self, x):
        acc = torch.zeros(4, 3)
        for i in range(x.size(0)):
            b = x[i] * 1.0
            b.t()[1] += 3.0
            acc = acc + b.t()
        return acc


class _ViewsReadAfterTheWrite(nn.Module):
    def forward(self, x):
        acc = torch.zeros(4)
        for i in range(x.size(0)):
            b = x[i] + 0.0
            row = b[1]  # made before the write, read after it: sees the write
            col = b[:, 0]
            b[1, 0] = 9.0
            acc = acc + row + col.sum() + b[0]
        return acc


class _ThroughAFlatView(nn.Module):
    def forward(self, x):
        acc = torch.zeros(3, 4)
        for i in range(x.size(0)):
            b = x[i] + 0.0
            flat = b.view(12)
            flat[5] = -2.0
            acc = acc + b
        return acc


class _OutsideTensorThroughATranspose(nn.Module):
    def forward(self, x):
        acc = torch.zeros(4, 3)
        for i in range(x.size(0)):
            acc.t()[0] += x[i, 0, :4]
        return acc


class _BranchInTheBody(nn.Module):
    def forward(self, x):
        acc = torch.zeros(3, 4)
        for i in range(x.size(0)):
            b = x[i] * 1.0
            if bool(b.sum() > 0):
                b[0, 0] = 100.0
            acc = acc + b
        return acc


class _TriangleOfNumbers(nn.Module):
    def forward(self, x):
        n = x.size(0)
        bias = torch.zeros(n, n)
        for i in range(n):
            for j in range(i):
                bias[i, j] = 5
        return x[:, 0, 0].unsqueeze(1) + bias


class _OnlyTheNarrowedViewRead(nn.Module):
    def forward(self, x):
        acc = torch.zeros(3, 2)
        for i in range(x.size(0)):
            n = (x[i] + 0.0).narrow(1, 1, 2)
            n.mul_(3.0)
            acc = acc + n
        return acc


class _NarrowedViewWrittenTensorReadAgain(nn.Module):
    def forward(self, x):
        acc = torch.zeros(3, 4)
        for i in range(x.size(0)):
            b = x[i] + 0.0
            b.narrow(1, 1, 2).mul_(3.0)
            acc = acc + b
        return acc


class _DiagonalWrittenTensorReadAgain(nn.Module):
    def forward(self, x):
        acc = torch.zeros(3, 4)
        for i in range(x.size(0)):
            b = x[i] + 0.0
            b.diagonal().mul_(3.0)
            acc = acc + b
        return acc


class _WindowsWrittenTensorReadAgain(nn.Module):
    def forward(self, x):
        acc = torch.zeros(3, 4)
        for i in range(x.size(0)):
            b = x[i] + 0.0
            b.unfold(1, 2, 2).mul_(3.0)
            acc = acc + b
        return acc


MODELS = [_CopyIntoASlice, _NumberIntoARowAndAnItem, _RowOfTheIteration, _ThroughATranspose,
          _ViewsReadAfterTheWrite, _ThroughAFlatView, _OutsideTensorThroughATranspose,
          _BranchInTheBody, _TriangleOfNumbers, _OnlyTheNarrowedViewRead,
          _NarrowedViewWrittenTensorReadAgain, _DiagonalWrittenTensorReadAgain]


def _export(model, dynamo):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return onnxport.export(model, (torch.randn(5, 3, 4),), dynamo=dynamo,
                               input_names=["x"], dynamic_axes={"x": {0: "n"}})


@PATHS
@pytest.mark.parametrize("cls", MODELS, ids=[cls.__name__.strip("_") for cls in MODELS])
def test_writes_in_a_loop_of_a_run_time_count(cls, dynamo):
    model = torch.jit.script(cls())
    program = _export(model, dynamo)
    assert any(node.op_type == "Loop" for node in program.model.graph)
    for n in (5, 2, 7):
        x = torch.randn(n, 3, 4)
        (actual,) = program(x)
        torch.testing.assert_close(actual, model(x), rtol=1e-3, atol=1e-4)


class _LocalWritesInABranch(nn.Module):
    def forward(self, x):
        if bool(x.sum() > 0):
            b = x * 2
            b[0] = 1.0
            b[:, 1] += 5.0
        else:
            b = x * 3
        return b


@PATHS
def test_writes_through_views_in_a_scripted_branch(dynamo):
    model = _LocalWritesInABranch()
    x = torch.rand(4, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = onnxport.export(torch.jit.script(model), (x,), dynamo=dynamo)
    for inputs in (x, -x):
        torch.testing.assert_close(program(inputs)[0], model(inputs))


@PATHS
def test_a_write_into_windows_of_a_tensor_read_again_is_refused(dynamo):
    # (unfold's windows are not put back into the tensor)
    model = torch.jit.script(_WindowsWrittenTensorReadAgain())
    with pytest.raises(CaptureError, match="unfold view of a tensor it reads again"):
        _export(model, dynamo)
