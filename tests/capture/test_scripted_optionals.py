"""Scripted code's Optional values and early returns: what TorchScript makes of them (a loop
carrying an Optional, a branch result a ``return`` leaves uninitialized, a tuple with None
returned from a branch) exported on both paths and compared with the scripted model."""

from __future__ import annotations

from typing import List, Optional

import pytest
import torch
from torch import Tensor, nn

import onnxport

PATHS = pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])


def _compare(program, model, *inputs):
    expected = [t for t in torch.utils._pytree.tree_leaves(model(*inputs))
                if isinstance(t, torch.Tensor)]
    actual = program(*inputs)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape and a.dtype == e.dtype
        torch.testing.assert_close(a, e, rtol=1e-3, atol=1e-4)


class _EarlyReturns(nn.Module):
    def forward(self, y: Optional[Tensor]) -> Optional[Tensor]:
        if y is not None:
            if y.shape[1] < 5:
                if y.size(0) == 1:
                    y = y + 4
                else:
                    return y
        return y


@PATHS
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_results_an_early_return_leaves_uninitialized(dynamo, dynamic):
    # TorchScript returns an uninitialized tensor from the branch that does not return: it
    # was an empty float tensor, so that the If's branches gave int32 and float (an invalid
    # file), or the capture was refused on dynamic sizes. It takes the other's type now.
    model = torch.jit.script(_EarlyReturns())
    y = torch.ones(3, 4, dtype=torch.int32)
    axes = {"y": {0: "rows", 1: "columns"}} if dynamic else None
    program = onnxport.export(model, (y,), input_names=["y"], dynamic_axes=axes, dynamo=dynamo)
    _compare(program, model, y)
    if dynamic:
        for other in (torch.ones(1, 3, dtype=torch.int32), torch.ones(2, 7, dtype=torch.int32)):
            _compare(program, model, other)


class _OptionalInALoop(nn.Module):
    def forward(self, x, y: Optional[Tensor]):
        total = torch.zeros_like(x[0])
        for i in range(x.size(0)):
            if y is not None:
                total = total + y
            total = total + x[i]
        return total


@PATHS
@pytest.mark.parametrize("given", [True, False], ids=["given", "None"])
def test_an_optional_a_loop_carries_unchanged(dynamo, given):
    # TorchScript carries y through the loop: its check against None could not be decided
    # inside, and the capture was refused.
    model = torch.jit.script(_OptionalInALoop())
    x, y = torch.randn(3, 2, 3), torch.randn(2, 3) if given else None
    program = onnxport.export(model, (x, y), dynamo=dynamo)
    _compare(program, model, *((x, y) if given else (x, None)))


class _TupleWithNoneFromABranch(nn.Module):
    def forward(self, x):
        if x.size(0) > 2:
            return x[:2], None
        return x, None


@PATHS
def test_a_tuple_with_none_returned_from_a_branch(dynamo):
    # The If returned the tuple whole, None in it: translation failed on the None.
    model = torch.jit.script(_TupleWithNoneFromABranch())
    program = onnxport.export(model, (torch.randn(3, 4),), input_names=["x"],
                              dynamic_axes={"x": [0]}, dynamo=dynamo)
    for x in (torch.randn(3, 4), torch.randn(2, 4), torch.randn(6, 4)):
        _compare(program, model, x)


class _SetOnAValue(nn.Module):
    def forward(self, x):
        y: Optional[Tensor] = None
        if bool(x.max() > 1):
            y = x * 3
        if y is not None:
            return y + 1
        return x


class _SetOnASize(nn.Module):
    def forward(self, x):
        y: Optional[Tensor] = None
        if x.size(0) > 3:
            y = x[:3]
        if y is None:
            return x * 2
        return y - 1


class _UnsetOnAValue(nn.Module):
    def forward(self, x):
        y: Optional[Tensor] = x
        if bool(x.sum() < 0):
            y = None
        out = x
        if y is not None:
            out = out + y
        return out


@PATHS
@pytest.mark.parametrize("model, inputs", [
    (_SetOnAValue, [torch.randn(3, 4) * 3, torch.randn(5, 4) * 0.1]),
    (_SetOnASize, [torch.randn(5, 4), torch.randn(2, 4), torch.randn(4, 4)]),
    (_UnsetOnAValue, [torch.randn(3, 4).abs(), -torch.randn(5, 4).abs()])],
    ids=["set on a value", "set on a size", "unset on a value"])
def test_an_optional_one_branch_sets_and_a_later_branch_checks(model, inputs, dynamo):
    # torch's branches must agree, and ONNX If returns tensors: a None in one branch was
    # refused. The Optional is a tensor now, its check the first branch's condition.
    model = torch.jit.script(model())
    program = onnxport.export(model, (inputs[0],), input_names=["x"],
                              dynamic_axes={"x": [0]}, dynamo=dynamo)
    for x in inputs:
        _compare(program, model, x)


class _IfSets(nn.Module):
    def forward(self, x) -> Optional[Tensor]:
        y: Optional[Tensor] = None
        if x.size(0) > 1:
            y = x
        return y


class _IfUnsets(nn.Module):
    def forward(self, x) -> Optional[Tensor]:
        y: Optional[Tensor] = x
        if x.size(0) > 1:
            y = None
        return y


class _LoopSets(nn.Module):
    def forward(self, x) -> Optional[Tensor]:
        y: Optional[Tensor] = None
        for _ in range(x.size(0)):
            y = x
        return y


class _LoopUnsets(nn.Module):
    def forward(self, x) -> Optional[Tensor]:
        y: Optional[Tensor] = x
        for _ in range(x.size(0)):
            y = None
        return y


def _optional_of(dim: str):
    import onnx

    return onnx.helper.make_optional_type_proto(
        onnx.helper.make_tensor_type_proto(onnx.TensorProto.FLOAT, (dim,)))


@PATHS
@pytest.mark.parametrize("size", [0, 4])
@pytest.mark.parametrize("module", [_IfSets, _IfUnsets, _LoopSets, _LoopUnsets],
                         ids=["if sets", "if unsets", "loop sets", "loop unsets"])
def test_an_optional_output_of_a_branch_or_loop_on_a_size(module, size, dynamo, tmp_path):
    # A tensor or None, chosen at run time by a dynamic axis: translation failed on the None
    # (or the capture on the loop). It is an ONNX optional now, as torch.onnx writes it: the
    # If's branches and the graph's output of one type, empty where torch gives None.
    import onnx

    model = torch.jit.script(module())
    path = tmp_path / "optional.onnx"
    onnxport.export(model, (torch.ones(size),), str(path), opset_version=16,
                    input_names=["x"], dynamic_axes={"x": {0: "condition"}}, dynamo=dynamo)
    exported = onnx.load(str(path))
    assert exported.graph.output[0].type == _optional_of("condition")
    ifs = [node for node in exported.graph.node if node.op_type == "If"]
    assert len(ifs) == (1 if module in (_IfSets, _IfUnsets) else 0)
    for node in ifs:
        assert [a.g.output[0].type for a in node.attribute] == [_optional_of("condition")] * 2
    program = onnxport.export(model, (torch.ones(size),), opset_version=16, input_names=["x"],
                              dynamic_axes={"x": {0: "condition"}}, dynamo=dynamo)
    for rows in (0, 1, 3):
        x = torch.randn(rows)
        expected, (actual,) = model(x), program(x)
        if expected is None:
            assert actual is None
        else:
            torch.testing.assert_close(actual, expected)


def test_an_optional_output_at_an_older_opset_is_exported_at_16():
    # ONNX If and Loop take optional types from opset 16 (torch.onnx writes them at 15, a
    # model onnx.checker and ONNX Runtime refuse): the export moves to 16 and says so.
    model = torch.jit.script(_IfSets())
    with pytest.warns(UserWarning, match="exported at opset 16, not 15"):
        program = onnxport.export(model, (torch.ones(4),), opset_version=15,
                                  input_names=["x"], dynamic_axes={"x": {0: "n"}})
    assert program.model_proto.opset_import[0].version == 16
    assert program(torch.ones(1)) == [None]
    torch.testing.assert_close(program(torch.ones(3))[0], torch.ones(3))


class _TupleWithAnOptional(nn.Module):
    def forward(self, x):
        y: Optional[Tensor] = None
        if x.size(0) > 2:
            y = x * 2
        return x + 1, y


@PATHS
def test_an_optional_in_a_tuple_output(dynamo):
    model = torch.jit.script(_TupleWithAnOptional())
    program = onnxport.export(model, (torch.randn(4, 2),), input_names=["x"],
                              dynamic_axes={"x": {0: "n"}}, dynamo=dynamo)
    for rows in (2, 5):
        x = torch.randn(rows, 2)
        (first, second), (a, b) = model(x), program(x)
        torch.testing.assert_close(a, first)
        assert (b is None) == (second is None)
        if second is not None:
            torch.testing.assert_close(b, second)


class _LoopReadsItsOptional(nn.Module):
    def forward(self, x) -> Optional[Tensor]:
        y: Optional[Tensor] = None
        for _ in range(x.size(0)):
            if y is None:
                y = x
            else:
                y = y + x
        return y


@PATHS
def test_a_loop_reading_its_optional_is_unrolled_at_the_example_s_count(dynamo):
    # A loop over a static size carrying an Optional was refused: it is unrolled, each
    # `y is None` decided. Over a dynamic size (ONNX Loop carries no Optional), the axis is
    # fixed with a warning that says why, and ONNX Runtime refuses other sizes.
    model = torch.jit.script(_LoopReadsItsOptional())
    x = torch.randn(4, 2)
    _compare(onnxport.export(model, (x,), dynamo=dynamo), model, x)
    with pytest.warns(onnxport.errors.DynamicDimensionFixedWarning, match="fixed to 4.*loop"):
        program = onnxport.export(model, (x,), input_names=["x"],
                                  dynamic_axes={"x": {0: "n"}}, dynamo=dynamo)
    _compare(program, model, x)
    with pytest.raises(Exception, match="dimensions"):
        program(torch.randn(5, 2))


class _SumsAnOptionalList(nn.Module):
    def forward(self, x: Tensor, ys: Optional[List[Tensor]] = None):
        if ys is None:
            return x
        total = x
        for y in ys:
            total = total + y
        return total * len(ys)


@PATHS
def test_an_optional_list_of_tensors_given_a_list(dynamo):
    # The list built of the example's tensors kept the parameter's Optional type, so that
    # `ys is None` stayed undecided and the loop over it had a run-time count: refused.
    model = torch.jit.script(_SumsAnOptionalList())
    x, ys = torch.randn(2, 3), [torch.randn(2, 3), torch.randn(2, 3)]
    program = onnxport.export(model, (x, ys), dynamo=dynamo)
    _compare(program, model, x, ys)
