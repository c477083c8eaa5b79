"""Numbers in scripted code: branches of a loop of a known count decided on the iteration's
number, ints and floats chosen by a branch on run-time data or carried by a loop, and the
sizes of a tensor as a list. Exported on both paths, run in ONNX Runtime and compared with
eager at the example's size and at others."""

from __future__ import annotations

from typing import List

import pytest
import torch

import onnxport


class _RepeatFirstAxis(torch.nn.Module):
    def forward(self, x):
        return x.repeat([2 if i == 0 else 1 for i in range(x.dim())])


class _EvenAndOddSteps(torch.nn.Module):
    def forward(self, x):
        for i in range(4):
            if i % 2 == 0:
                x = x * 2
            else:
                x = x + i
        return x


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
@pytest.mark.parametrize("model", [_RepeatFirstAxis, _EvenAndOddSteps],
                         ids=["list comprehension", "loop"])
def test_a_loop_branching_on_its_iteration_is_decided_per_iteration(model, dynamo):
    # A loop of a known count whose body branches on the iteration's number (a list
    # comprehension over x.dim(), the fuzzer's repeat written for TorchScript): one body
    # called per iteration made it an ONNX If on the number, which onnx.checker refused (its
    # result declared bool). Each iteration's branch is decided while converting.
    scripted = torch.jit.script(model())
    program = onnxport.export(scripted, (torch.randn(3, 5),), dynamo=dynamo, input_names=["x"],
                              dynamic_axes={"x": [0, 1]})
    assert "If" not in [node.op_type for node in program.model.graph]
    for x in (torch.randn(3, 5), torch.randn(6, 2)):
        torch.testing.assert_close(program(x)[0], scripted(x))


class _FloatByData(torch.nn.Module):
    def forward(self, x):
        scale = 2.5 if bool(x.sum() > 0) else 0.5
        return x * scale


class _IntByData(torch.nn.Module):
    def forward(self, x):
        n = 2 if bool(x.sum() > 0) else 3
        return x.repeat(n, 1)


class _SizeOrNumberByData(torch.nn.Module):
    def forward(self, x):
        n = x.size(0) if bool(x.sum() > 0) else 7
        return x + n


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
@pytest.mark.parametrize("model", [_FloatByData, _IntByData, _SizeOrNumberByData],
                         ids=["float", "int", "size or int"])
def test_a_number_chosen_by_a_branch_on_run_time_data(model, dynamo):
    # The If's result took the condition's bool as its dtype where both branches give a
    # float: "Inferred elem type differs" (the file was refused); it is the branches' dtype.
    scripted = torch.jit.script(model())
    program = onnxport.export(scripted, (torch.randn(3, 4),), dynamo=dynamo, input_names=["x"],
                              dynamic_axes={"x": [0]})
    assert "If" in [node.op_type for node in program.model.graph]
    for x in (torch.randn(3, 4).abs(), -torch.randn(3, 4).abs(), torch.randn(5, 4).abs(),
              -torch.randn(5, 4).abs()):
        torch.testing.assert_close(program(x)[0], scripted(x))


class _HalvedPerRow(torch.nn.Module):
    def forward(self, x):
        f = 1.0
        for _ in range(x.size(0)):
            f = f * 0.5
        return x * f


class _AnyRowPositive(torch.nn.Module):
    def forward(self, x):
        found = False
        peaks = 0
        for i in range(x.size(0)):
            found = found or bool(x[i].sum() > 0)
            peaks = peaks + int(x[i].argmax())
        if found:
            return x * 2 + peaks
        return x - peaks


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
@pytest.mark.parametrize("model", [_HalvedPerRow, _AnyRowPositive],
                         ids=["float", "bool and int from data"])
def test_numbers_a_loop_of_a_run_time_count_carries(model, dynamo):
    # A float or bool carried was the first iteration's value: f * 0.5 became the constant
    # 0.5 whatever the count, silently. So was an int the first iteration left as it was
    # (peaks + 0 where the first row's largest value comes first), and a bool the first row
    # left False decided the branch after the loop. The example's first row does both.
    scripted = torch.jit.script(model())
    example = -torch.arange(20.0).view(4, 5)
    program = onnxport.export(scripted, (example,), dynamo=dynamo, input_names=["x"],
                              dynamic_axes={"x": [0]})
    torch.manual_seed(0)
    for x in (example, torch.randn(6, 5), torch.randn(3, 5) - 5, torch.randn(1, 5) + 5):
        torch.testing.assert_close(program(x)[0], scripted(x))


class _ANewAxisOfTwo(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        return y.unsqueeze(1).expand(y.shape[:1] + [2] + y.shape[1:])


class _PooledBackToItsRows(torch.nn.Module):
    def forward(self, x):
        y = x.cumsum(1)
        pooled = torch.nn.functional.max_pool1d(y.reshape(1, -1, y.size(-1)), 2,
                                                ceil_mode=True)
        return pooled.reshape(y.shape[:-1] + [-1])


class _FirstColumnAndTheRest(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        return y.split([1, y.size(1) - 1], 1)[1]


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
@pytest.mark.parametrize("model", [_ANewAxisOfTwo, _PooledBackToItsRows, _FirstColumnAndTheRest],
                         ids=["shape sliced and joined", "shape sliced", "split at a size"])
def test_the_sizes_of_a_tensor_made_in_the_script(model, dynamo):
    # y.shape of a tensor the script makes was one call whose result, a list of symbolic
    # sizes, torch's list slice refused ("Expected a value of type 'List[t]'"); it is a list
    # of the sizes, one read each (the rank the script's inputs give). split with a size of
    # the run ([1, n - 1]) failed in translation (int() of a value): Split at those sizes.
    scripted = torch.jit.script(model())
    program = onnxport.export(scripted, (torch.randn(3, 4),), dynamo=dynamo, input_names=["x"],
                              dynamic_axes={"x": [0, 1]})
    for x in (torch.randn(3, 4), torch.randn(5, 7), torch.randn(2, 2)):
        torch.testing.assert_close(program(x)[0], scripted(x))


class _RanksOfWhatTheScriptMakes(torch.nn.Module):
    def forward(self, x):
        return [x.flip(0).dim(), x[:, ::2].dim(), x.narrow(1, 1, 2).dim(),
                x.sum(1, keepdim=True).dim(), x.sum(1).dim(), x.sum([0, 1]).dim(),
                x.mean(0).dim(), x.flatten(0, 1).dim(), x.max(1)[0].dim(),
                x.max(1, keepdim=True)[1].dim(), x.topk(1, 1)[1].dim(),
                torch.nn.functional.pad(x, [1, 2]).dim(), x.repeat_interleave(2, 1).dim(),
                x.repeat_interleave(2).dim(), x.std(1, True, True).dim(), x.var(1).dim(),
                x.amax([0]).dim(), x.argmax().dim(), x.argmax(1, True).dim(),
                x.cumprod(0).dim(), x.repeat([2, 1, 1]).dim(), x.sum().dim(),
                x.logsumexp([0, 2], False).dim(), x.any(1).dim(), x.mean().dim(),
                x.max().dim(), (x > x.mean()).dim(), x.reshape(-1).view(x.shape).dim(),
                x.sum(dtype=torch.float64).dim(),
                x.repeat([2 if i == 0 else 1 for i in range(x.dim())]).dim(),
                x.var(1, keepdim=True, unbiased=False).dim(), x.std([0, 2], True).dim(),
                torch.var_mean(x, 1, correction=0)[0].dim(), x.var().dim(),
                torch.arange(x.size(0)).dim(), x.tensor_split(2, 1)[1].dim(),
                torch.stack(x.unbind(1)[::-1], 1).dim(), x.reshape(x.shape[:-1] + [-1]).dim(),
                x.unsqueeze(1).expand(x.shape[:1] + [2] + x.shape[1:]).dim(),
                x.sum(1, keepdim=True).relu().squeeze(1).dim(), x.unsqueeze(0).squeeze(0).dim(),
                x.gather(1, x.argmax(1, keepdim=True)).squeeze(-2).dim(),
                torch.nn.functional.interpolate(x.unsqueeze(0), scale_factor=2.0).squeeze(0).dim(),
                (x.mean(0, keepdim=True) * x.amax(0, keepdim=True)).squeeze(0).dim(),
                (x.mean(0, keepdim=True) + x).squeeze(0).dim(),  # (not known to be 1: kept)
                x.var(2, keepdim=True).squeeze(1).dim()]  # (nor this one)


def _twice_along_the_first_axis(y: torch.Tensor) -> torch.Tensor:
    return y.repeat([2 if i == 0 else 1 for i in range(y.dim())])


class _RepeatedAfterOpsOfKnownRank(torch.nn.Module):
    def forward(self, x):
        return [_twice_along_the_first_axis(y) for y in (
            x.var(1, keepdim=True, unbiased=False), torch.var_mean(x, [0, 1], correction=0)[1],
            x.tensor_split(2, 1)[1], x.reshape(x.shape[:-1] + [-1]),
            x.unsqueeze(1).expand(x.shape[:1] + [2] + x.shape[1:]), x + torch.arange(x.size(-1)),
            x.gather(1, x.argmax(1, keepdim=True)).squeeze(1),
            torch.nn.functional.interpolate(x.unsqueeze(0), scale_factor=2.0).squeeze(0))]


class _RepeatedAlongTheFirstAxis(torch.nn.Module):
    def forward(self, x):
        y = x.flip(0)[:, ::2].sum(1, keepdim=True).cumprod(0)
        return y.repeat([2 if i == 0 else 1 for i in range(y.dim())])


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_the_rank_of_a_tensor_the_script_makes(dynamo):
    # Scripted code reads dim() of what it makes (a list comprehension over range(y.dim()),
    # the fuzzer's repeat): the rank of the ops' results is inferred from the inputs', so
    # the loop has a count known while converting. A wrong rank would be folded silently:
    # each dim() here is compared with eager's.
    scripted = torch.jit.script(_RanksOfWhatTheScriptMakes())
    program = onnxport.export(scripted, (torch.randn(3, 4, 5),), dynamo=dynamo,
                              input_names=["x"], dynamic_axes={"x": [0, 1, 2]})
    x = torch.randn(4, 6, 2)
    assert [int(r) for r in program(x)] == scripted(x)
    scripted = torch.jit.script(_RepeatedAlongTheFirstAxis())
    program = onnxport.export(scripted, (torch.randn(3, 4),), dynamo=dynamo, input_names=["x"],
                              dynamic_axes={"x": [0, 1]})
    for x in (torch.randn(3, 4), torch.randn(5, 7)):
        torch.testing.assert_close(program(x)[0], scripted(x))


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_comprehensions_over_the_rank_of_variances_pieces_and_joined_shapes(dynamo):
    # Each value's rank was unknown (var/std/var_mean, tensor_split's pieces, reshape or
    # expand to joined slices of x.shape, arange, squeeze of a dim known to be 1), so the
    # comprehension
    # over range(y.dim()) was a loop of a run-time count whose list repeat could not read.
    scripted = torch.jit.script(_RepeatedAfterOpsOfKnownRank())
    program = onnxport.export(scripted, (torch.randn(3, 4, 5),), dynamo=dynamo,
                              input_names=["x"], dynamic_axes={"x": [0, 1, 2]})
    for x in (torch.randn(3, 4, 5), torch.randn(2, 6, 3)):
        for actual, expected in zip(program(x), scripted(x), strict=True):
            torch.testing.assert_close(actual, expected)


class _AddedWhereTheShapesMatch(torch.nn.Module):
    def forward(self, x, y):
        if x.shape == y.shape:
            return x + y
        return x


class _JoinedWhereTheRowsAgree(torch.nn.Module):
    def forward(self, x, y):
        if x.shape[1:] != y.shape[1:]:
            return x
        return torch.cat([x, y], 0)


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
@pytest.mark.parametrize("model", [_AddedWhereTheShapesMatch, _JoinedWhereTheRowsAgree],
                         ids=["==", "!= of slices"])
def test_shapes_compared_decide_at_run_time(model, dynamo):
    # x.shape == y.shape was the example's answer, True: the branch was decided for every
    # size, and a y of one row was added to an x of six (broadcast), silently. The sizes
    # are compared one by one, an ONNX If on the result.
    scripted = torch.jit.script(model())
    program = onnxport.export(scripted, (torch.randn(4, 5), torch.randn(4, 5)), dynamo=dynamo,
                              input_names=["x", "y"], dynamic_axes={"x": [0, 1], "y": [0, 1]})
    for x, y in [(torch.randn(4, 5), torch.randn(4, 5)), (torch.randn(6, 7), torch.randn(1, 7)),
                 (torch.randn(6, 2), torch.randn(3, 2)), (torch.randn(2, 3), torch.randn(2, 4))]:
        torch.testing.assert_close(program(x, y)[0], scripted(x, y))


class _RepeatedFirst(torch.nn.Module):
    def forward(self, x):
        times = [1] * x.dim()
        times[0] = 2
        return x.repeat(times)


class _AsManyAsTheSizes(torch.nn.Module):
    def forward(self, x):
        sizes: List[int] = x.shape
        return x.reshape(-1)[:sum(sizes)]


class _DoubledWhereThreeOrFourWide(torch.nn.Module):
    def forward(self, x):
        if x.size(-1) in [3, 4]:
            return x * 2
        return x


class _HalfAndRemainder(torch.nn.Module):
    def forward(self, x):
        half, odd = divmod(x.size(1), 2)
        return x[:, :half + odd]


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
@pytest.mark.parametrize("model", [_RepeatedFirst, _AsManyAsTheSizes,
                                   _DoubledWhereThreeOrFourWide, _HalfAndRemainder],
                         ids=["[1] * rank", "sum of sizes", "size in a list", "divmod"])
def test_sizes_in_python_list_and_number_ops(model, dynamo):
    # Python's ops on sizes ran on the example's values: sum(x.shape) was 12 at every size
    # and ``x.size(-1) in [3, 4]`` the example's answer, silently; [1] * x.dim() and divmod
    # of a size failed. They are done on the sizes one by one.
    scripted = torch.jit.script(model())
    program = onnxport.export(scripted, (torch.randn(4, 5, 3),), dynamo=dynamo,
                              input_names=["x"], dynamic_axes={"x": [0, 1, 2]})
    for x in (torch.randn(4, 5, 3), torch.randn(6, 7, 4), torch.randn(2, 2, 5)):
        torch.testing.assert_close(program(x)[0], scripted(x))


class _PlusTheSquaredSize(torch.nn.Module):
    def forward(self, x):
        return x.sum() + x.size(0) ** 2


class _PlusTheRoundedSize(torch.nn.Module):
    def forward(self, x):
        return x * round(x.size(0) * 0.7)


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
@pytest.mark.parametrize("model", [_PlusTheSquaredSize, _PlusTheRoundedSize],
                         ids=["n ** 2", "round(n * 0.7)"])
def test_a_float_computed_from_a_size_as_an_operand(model, dynamo):
    # The float (1-D [1], as computed from the size) was added to the 0-d sum as is: the
    # file declared a 0-d result of a [1] Add, which the checker refused.
    scripted = torch.jit.script(model())
    program = onnxport.export(scripted, (torch.randn(5, 3),), dynamo=dynamo,
                              input_names=["x"], dynamic_axes={"x": [0, 1]})
    for x in (torch.randn(5, 3), torch.randn(8, 2)):
        torch.testing.assert_close(program(x)[0], scripted(x))
