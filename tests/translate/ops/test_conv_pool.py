"""Convolution and pooling (ops/conv_pool.py): OpInfo samples, the aten::convolution forms,
and what the graph looks like (one Conv, GlobalAveragePool for 1x1...)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import onnxport
import onnxport.errors

from op_check import (
    BOTH_PATHS, PATH_IDS, cases, check, check_opinfo, count, op_types, opinfo_cases,
)

CONV_POOL = [
    "nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.conv3d",
    "nn.functional.conv_transpose1d", "nn.functional.conv_transpose2d",
    "nn.functional.conv_transpose3d", "nn.functional.max_pool1d", "nn.functional.max_pool2d",
    "nn.functional.max_pool3d", "nn.functional.avg_pool1d", "nn.functional.avg_pool2d",
    "nn.functional.avg_pool3d", "nn.functional.adaptive_avg_pool1d",
    "nn.functional.adaptive_avg_pool2d", "nn.functional.adaptive_avg_pool3d",
    "nn.functional.adaptive_max_pool1d", "nn.functional.adaptive_max_pool2d",
    "nn.functional.adaptive_max_pool3d",
]


@pytest.mark.parametrize("name, variant, dtype, subset", opinfo_cases(CONV_POOL))
def test_conv_pool_opinfo(name, variant, dtype, subset):
    # Up to 6 samples: the interesting ones (dilation, 'same', ceil mode) come later.
    check_opinfo(name, variant, dtype, subset, limit=6)


IMAGE = torch.randn(2, 4, 9, 9)
W = torch.randn(6, 4, 3, 3)
B = torch.randn(6)


def _convolution(transposed):
    if transposed:
        weight, bias = torch.randn(4, 3, 3, 3), torch.randn(3)
        return (lambda x, w, b: torch.ops.aten.convolution(
            x, w, b, [2, 2], [1, 1], [1, 1], True, [1, 1], 1), IMAGE, weight, bias)
    return (lambda x, w, b: torch.ops.aten.convolution(
        x, w, b, [2, 1], [1, 0], [1, 2], False, [0, 0], 2), IMAGE, torch.randn(6, 2, 3, 3), B)


HAND = {
    "aten::convolution": _convolution(False),
    "aten::convolution transposed": _convolution(True),
    "aten::_convolution": (lambda x, w, b: torch.ops.aten._convolution(
        x, w, b, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, False, False, True, True),
        IMAGE, W, B),
    "conv2d same with dilation": (lambda x, w: F.conv2d(x, w, padding="same", dilation=2),
                                  IMAGE, torch.randn(6, 4, 4, 3)),
    "conv2d valid": (lambda x, w: F.conv2d(x, w, padding="valid"), IMAGE, W),
    "conv2d unbatched": (lambda x, w, b: F.conv2d(x, w, b, stride=2), IMAGE[0], W, B),
    "conv1d grouped": (lambda x, w: F.conv1d(x, w, groups=2, padding=1),
                       torch.randn(2, 4, 10), torch.randn(6, 2, 3)),
    "conv_transpose2d output_padding": (
        lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
        IMAGE, torch.randn(4, 3, 3, 3), torch.randn(3)),
    "conv_transpose2d output_padding past stride": (
        lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=2,
                                           dilation=3),
        IMAGE, torch.randn(4, 3, 3, 3), torch.randn(3)),
    "conv_transpose1d unbatched": (lambda x, w: F.conv_transpose1d(x, w, stride=3),
                                   torch.randn(4, 7), torch.randn(4, 2, 3)),
    "max_pool2d ceil mode": (lambda x: F.max_pool2d(x, 3, 2, ceil_mode=True), IMAGE),
    "max_pool2d padding dilation": (lambda x: F.max_pool2d(x, 3, 1, padding=1, dilation=2),
                                    IMAGE),
    "max_pool2d with indices": (lambda x: F.max_pool2d(x, 2, return_indices=True), IMAGE),
    "max_pool2d with indices unbatched": (
        lambda x: F.max_pool2d(x, 3, 2, padding=1, return_indices=True), IMAGE[0]),
    "max_pool1d with indices": (lambda x: F.max_pool1d(x, 2, return_indices=True),
                                torch.randn(2, 3, 8)),
    "avg_pool2d count_include_pad False": (
        lambda x: F.avg_pool2d(x, 3, 2, padding=1, count_include_pad=False), IMAGE),
    "avg_pool2d ceil mode": (lambda x: F.avg_pool2d(x, 2, ceil_mode=True), IMAGE),
    "avg_pool2d divisor_override": (lambda x: F.avg_pool2d(x, 3, 2, 1, divisor_override=4),
                                    IMAGE),
    "avg_pool2d divisor_override ceil mode": (
        lambda x: F.avg_pool2d(x, 2, 2, ceil_mode=True, divisor_override=3), IMAGE),
    "avg_pool1d unbatched": (lambda x: F.avg_pool1d(x, 2), torch.randn(3, 8)),
    "adaptive_avg_pool2d whole windows": (lambda x: F.adaptive_avg_pool2d(x, 3), IMAGE),
    "adaptive_avg_pool2d uneven windows": (lambda x: F.adaptive_avg_pool2d(x, (4, 5)), IMAGE),
    "adaptive_avg_pool2d None size": (lambda x: F.adaptive_avg_pool2d(x, (None, 2)),
                                      IMAGE[..., :8]),
    "adaptive_max_pool2d": (lambda x: F.adaptive_max_pool2d(x, 3), IMAGE),
    "adaptive_max_pool2d 1x1 with indices": (
        lambda x: F.adaptive_max_pool2d(x, 1, return_indices=True), IMAGE),
    "adaptive_max_pool2d uneven with indices": (
        lambda x: F.adaptive_max_pool2d(x, (2, 4), return_indices=True), IMAGE),
    "adaptive_max_pool1d unbatched": (lambda x: F.adaptive_max_pool1d(x, 3),
                                      torch.randn(3, 7)),
    "aten::_adaptive_avg_pool2d": (lambda x: torch.ops.aten._adaptive_avg_pool2d(x, [3, 2]),
                                   IMAGE[..., :8]),
    "adaptive_avg_pool3d": (lambda x: F.adaptive_avg_pool3d(x, (1, 2, 2)),
                            torch.randn(1, 2, 4, 4, 4)),
}


@pytest.mark.parametrize("case", cases(HAND))
def test_conv_pool(case):
    function, *args = case
    check(function, *args)


def test_conv2d_is_one_conv():
    conv = torch.nn.Conv2d(4, 6, 3, padding=1)
    program = check(conv, IMAGE)
    assert op_types(program) == ["Conv"]


def test_conv2d_same_padding_has_explicit_pads():
    program = check(lambda x, w: F.conv2d(x, w, padding="same"), IMAGE, torch.randn(6, 4, 4, 4))
    (conv,) = program.model.graph
    assert "auto_pad" not in conv.attributes
    assert list(conv.attributes["pads"].value) == [1, 1, 2, 2]  # the odd one at the end


def test_conv_transpose_is_one_conv_transpose():
    program = check(torch.nn.ConvTranspose2d(4, 3, 3, stride=2, output_padding=1), IMAGE)
    assert op_types(program) == ["ConvTranspose"]


def test_adaptive_avg_pool_to_one_is_global_average_pool():
    program = check(lambda x: F.adaptive_avg_pool2d(x, 1), IMAGE)
    assert op_types(program) == ["GlobalAveragePool"]


def test_adaptive_avg_pool_with_whole_windows_is_one_average_pool():
    program = check(lambda x: F.adaptive_avg_pool2d(x, 3), IMAGE)
    assert op_types(program) == ["AveragePool"]


def test_adaptive_max_pool_without_indices_uses_max_pool():
    program = check(lambda x: F.adaptive_max_pool2d(x, 3), IMAGE)
    assert op_types(program) == ["MaxPool"]


def test_max_pool_indices_are_within_each_plane():
    program = check(lambda x: F.max_pool2d(x, 3, return_indices=True), IMAGE)
    assert count(program, "MaxPool") == 1 and count(program, "Mod") == 1


# Windows of ceil mode that would start in the end padding: torch drops them (ONNX Runtime
# 1.32's kernels do too, though its shape inference counts them: "Error merging shape info").
CEIL_DROPS_A_WINDOW = {
    # function, spatial axes, (a, b): the sizes a * h + b at which the last window drops
    "max_pool2d": (lambda x: F.max_pool2d(x, 2, 2, 1, ceil_mode=True), 2, (2, 1)),
    "max_pool2d, dilation": (
        lambda x: F.max_pool2d(x, 2, 3, 1, dilation=2, ceil_mode=True), 2, (3, 2)),
    "avg_pool2d counting the padding": (
        lambda x: F.avg_pool2d(x, 3, 3, 1, ceil_mode=True), 2, (3, 2)),
    "avg_pool2d not counting it": (
        lambda x: F.avg_pool2d(x, 2, 2, 1, ceil_mode=True, count_include_pad=False), 2, (2, 1)),
    "max_pool3d": (lambda x: F.max_pool3d(x, 2, 2, 1, ceil_mode=True), 3, (2, 1)),
    "avg_pool1d": (lambda x: F.avg_pool1d(x, 2, 2, 1, ceil_mode=True), 1, (2, 1)),
}


@pytest.mark.parametrize("case", cases(CEIL_DROPS_A_WINDOW))
def test_ceil_mode_drops_the_window_that_starts_in_the_padding(case):
    function, spatial, (a, b) = case
    h = torch.export.Dim("h", min=1, max=16)
    program = check(function, torch.randn(1, 2, 2 * a + b, *[5] * (spatial - 1)),
                    dynamic_shapes={"x": {2: a * h + b}},
                    run_with=[(torch.randn(1, 2, 3 * a + b, *[5] * (spatial - 1)),)])
    # A static axis whose last window torch drops is sliced to torch's size after the pool,
    # so that the file's sizes agree with ONNX's shape inference (the full checker's).
    ops = op_types(program)
    assert ops[-1] in ("MaxPool", "AveragePool") or ops[-2:] in (
        ["MaxPool", "Slice"], ["AveragePool", "Slice"])


@pytest.mark.parametrize("case", cases(CEIL_DROPS_A_WINDOW))
def test_ceil_mode_that_drops_a_window_is_written_as_floor_mode(case):
    # Then torch's windows are floor mode's, and every reader of the file sizes them alike.
    function, spatial, (a, b) = case
    program = check(function, torch.randn(1, 2, *[a + b] * spatial))
    pool = [n for n in program.model.graph if n.op_type in ("MaxPool", "AveragePool")][-1]
    assert pool.attributes["ceil_mode"].value == 0


def test_ceil_mode_with_a_last_window_partly_in_the_padding_stays():
    program = check(lambda x: F.max_pool2d(x, 3, 2, ceil_mode=True), torch.randn(1, 2, 6, 6))
    (pool,) = program.model.graph
    assert pool.attributes["ceil_mode"].value == 1


@pytest.mark.parametrize("shape, kernel, output, three", [
    ((2, 3, 9, 9), 3, 4, False), ((1, 2, 10, 7), (2, 3), (5, 3), False),
    ((3, 9, 9), 3, 1, False), ((2, 2, 6, 7, 5), 2, (3, 4, 2), True),
], ids=["2d", "2d rectangular", "2d unbatched to one", "3d"])
def test_fractional_max_pool_with_given_samples(shape, kernel, output, three):
    # Given _random_samples the windows are torch's exactly: values and indices equal eager's,
    # for samples other than the example's too.
    pool = F.fractional_max_pool3d if three else F.fractional_max_pool2d
    channels = shape[1] if len(shape) == (5 if three else 4) else shape[0]
    batch = shape[0] if len(shape) == (5 if three else 4) else 1
    samples = (batch, channels, 3 if three else 2)
    check(lambda x, u: pool(x, kernel, output_size=output, return_indices=True,
                            _random_samples=u),
          torch.randn(shape), torch.rand(samples),
          run_with=[(torch.randn(shape), torch.rand(samples)) for _ in range(3)],
          rtol=0, atol=0)


def test_fractional_max_pool_draws_its_samples_in_the_graph():
    program = check(lambda x: F.fractional_max_pool2d(x, 2, output_size=4) * 0, torch.randn(1, 2, 8, 8))
    assert "RandomUniformLike" in op_types(program) or "RandomUniform" in op_types(program)


@pytest.mark.parametrize("opset", [17, 18])
@pytest.mark.parametrize("dynamo", BOTH_PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("pad", [0, 2])
def test_conv_tbc(pad, dynamo, opset):
    """[time, batch, channels] input, [width, in, out] weight. (Static sizes: torch's own
    conv_tbc kernel cannot run on symbolic sizes, "Cannot call storage_offset()".)"""
    weight, bias = torch.randn(3, 4, 5), torch.randn(5)
    check(lambda x: torch.conv_tbc(x, weight, bias, pad), torch.randn(7, 2, 4), opset=opset,
          dynamo=dynamo)


ADAPTIVE_OF_DYNAMIC_SIZES = {  # (function, example shape, dynamic axes, other shapes)
    "avg 2d": (lambda x: F.adaptive_avg_pool2d(x, (2, 3)), (1, 3, 8, 8), {2: "h", 3: "w"},
               [(1, 3, 7, 11), (1, 3, 2, 2)]),
    "max 2d": (lambda x: F.adaptive_max_pool2d(x, (3, 2)), (1, 3, 8, 8), {2: "h", 3: "w"},
               [(1, 3, 7, 11), (1, 3, 4, 5)]),
    "avg 1d": (lambda x: F.adaptive_avg_pool1d(x, 5), (2, 3, 9), {2: "n"}, [(2, 3, 13)]),
    "avg 3d": (lambda x: F.adaptive_avg_pool3d(x, 2), (1, 2, 4, 6, 8), {2: "d", 3: "h", 4: "w"},
               [(1, 2, 5, 7, 9)]),
}


@pytest.mark.parametrize("dynamo", BOTH_PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("case", ADAPTIVE_OF_DYNAMIC_SIZES.values(),
                         ids=ADAPTIVE_OF_DYNAMIC_SIZES.keys())
def test_adaptive_pooling_of_sizes_known_at_run_time(case, dynamo):
    """torch's windows [floor(i n / o), ceil((i + 1) n / o)) from the run's sizes (a
    NotImplementedError before; torch.onnx refuses these too)."""
    function, shape, axes, others = case
    check(function, torch.randn(*shape), input_names=["x"], dynamic_axes={"x": axes},
          dynamo=dynamo, run_with=[(torch.randn(*other),) for other in others])


def test_adaptive_max_pooling_indices_of_run_time_sizes_are_refused():
    with pytest.raises(Exception, match="indices of adaptive max pooling from sizes known"):
        check(lambda x: F.adaptive_max_pool2d(x, 3, return_indices=True),
              torch.randn(1, 2, 7, 7), input_names=["x"], dynamic_axes={"x": {2: "h"}})


class _Unpooled(torch.nn.Module):
    def forward(self, x, v, s):
        y, i = F.max_pool2d(x, 2, 2, return_indices=True)
        y3, i3 = F.max_pool3d(v, 2, 2, return_indices=True)
        y1, i1 = F.max_pool1d(s, 3, 2, return_indices=True)
        return (F.max_unpool2d(y, i, 2, 2),
                F.max_unpool2d(y, i, 2, 2, output_size=(x.size(2) + 1, x.size(3) + 1)),
                F.max_unpool3d(y3, i3, 2, 2), F.max_unpool1d(y1, i1, 3, 2))


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_max_unpool_over_dynamic_sizes(dynamo):
    # max_unpool had no translation; on the TorchScript path, torch's own check of the output
    # size failed the tracer (torch.onnx fails there too): skipped while tracing.
    check(_Unpooled(), torch.randn(1, 3, 8, 6), torch.randn(1, 2, 4, 6, 4), torch.randn(2, 3, 9),
          dynamo=dynamo, input_names=["x", "v", "s"],
          dynamic_axes={"x": [0, 2, 3], "v": [0, 2, 3, 4], "s": [0, 2]},
          run_with=[(torch.randn(2, 3, 6, 10), torch.randn(2, 2, 6, 4, 8), torch.randn(1, 3, 11))])


class _PoolsOfDynamicSizes(torch.nn.Module):
    def forward(self, x):
        return (F.avg_pool2d(x, 2, divisor_override=3), F.avg_pool2d(x, 3, 2, 1, divisor_override=5),
                F.adaptive_avg_pool2d(x, (None, 2)), F.adaptive_max_pool2d(x, (3, None)))


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_divisor_override_and_adaptive_sizes_kept_over_dynamic_sizes(dynamo):
    # divisor_override refused dynamic sizes; a None of adaptive pooling reached the
    # translation as the input's size read at run time, which int() failed on.
    check(_PoolsOfDynamicSizes(), torch.randn(1, 2, 7, 9), dynamo=dynamo, input_names=["x"],
          dynamic_axes={"x": [0, 2, 3]}, run_with=[(torch.randn(2, 2, 8, 6),)])


def test_divisor_override_in_ceil_mode_over_dynamic_sizes_is_a_clear_error():
    with pytest.raises(onnxport.errors.TranslationError, match="ceil_mode=True over dynamic"):
        onnxport.export(lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, divisor_override=2),
                        (torch.randn(1, 2, 7, 9),), input_names=["x"],
                        dynamic_axes={"x": [2, 3]})
