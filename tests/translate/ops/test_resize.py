"""Resizing (ops/resize.py): F.interpolate and nn.Upsample as one Resize, by scale factor or
size, over static and dynamic spatial sizes (run at other sizes than the export's)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.export import Dim

import onnxport.errors

from op_check import cases, check, op_types, opinfo_cases, check_opinfo

RESIZE = ["nn.functional.interpolate:nearest", "nn.functional.interpolate:bilinear",
          "nn.functional.interpolate:bicubic", "nn.functional.interpolate:linear",
          "nn.functional.interpolate:trilinear", "nn.functional.interpolate:nearest-exact",
          "nn.functional.upsample_nearest", "nn.functional.upsample_bilinear"]


@pytest.mark.parametrize("name, variant, dtype, subset", opinfo_cases(RESIZE))
def test_resize_opinfo(name, variant, dtype, subset):
    check_opinfo(name, variant, dtype, subset, limit=4)


def _interpolate(**options):
    return lambda x: F.interpolate(x, **options)


SPATIAL = {
    "nearest x2": _interpolate(scale_factor=2, mode="nearest"),
    "nearest x1.5": _interpolate(scale_factor=1.5, mode="nearest"),
    "nearest to a size": _interpolate(size=(7, 9), mode="nearest"),
    "nearest-exact x1.5": _interpolate(scale_factor=1.5, mode="nearest-exact"),
    "bilinear x2": _interpolate(scale_factor=2, mode="bilinear"),
    "bilinear x1.5": _interpolate(scale_factor=(1.5, 2.5), mode="bilinear"),
    "bilinear to a size": _interpolate(size=(3, 8), mode="bilinear"),
    "bilinear, align_corners": _interpolate(scale_factor=2, mode="bilinear", align_corners=True),
    "bicubic x2": _interpolate(scale_factor=2, mode="bicubic"),
    "bicubic, align_corners": _interpolate(scale_factor=2, mode="bicubic", align_corners=True),
    "nn.Upsample": lambda x: torch.nn.Upsample(scale_factor=2)(x),
}


NEAREST_BY_GATHER = [SPATIAL[name] for name in ("nearest x1.5", "nearest to a size",
                                                "nearest-exact x1.5")]


def _dynamic_height_and_width(function, opset):
    # torch's decomposition computes the output sizes as floats from the symbolic sizes, a
    # graph ONNX Runtime refuses; Resize computes them itself.
    sizes = {"x": {2: Dim("height", min=2, max=64), 3: Dim("width", min=2, max=64)}}
    program = check(function, torch.randn(2, 3, 4, 6), opset=opset, dynamic_shapes=sizes,
                    run_with=[(torch.randn(2, 3, 5, 7),), (torch.randn(2, 3, 9, 3),)])
    if function in NEAREST_BY_GATHER:
        # Resize rounds its own way at these ratios (test_nearest_picks_torchs_pixel_at_any_ratio)
        assert "Resize" not in op_types(program) and "Gather" in op_types(program)
    else:
        assert op_types(program).count("Resize") == 1 and "Gather" not in op_types(program)


@pytest.mark.parametrize("function", cases(SPATIAL))
def test_interpolate_over_dynamic_height_and_width(function):
    _dynamic_height_and_width(function, 18)


@pytest.mark.parametrize("function", cases({name: SPATIAL[name] for name in (
    "nearest x2", "nearest to a size", "bilinear to a size")}))
def test_interpolate_before_resize_took_axes(function):
    """Before opset 18 the sizes name every axis: the batch and channels are read at run time."""
    _dynamic_height_and_width(function, 13)


def test_interpolate_to_the_size_of_another_tensor():
    sizes = {"x": {2: Dim("height", min=2, max=64)}, "y": {2: Dim("h2", min=2, max=64)}}
    check(lambda x, y: F.interpolate(x, size=y.shape[-2:], mode="bilinear") + y,
          torch.randn(1, 3, 4, 4), torch.randn(1, 3, 8, 4), dynamic_shapes=sizes,
          run_with=[(torch.randn(1, 3, 5, 4), torch.randn(1, 3, 11, 4))])


@pytest.mark.parametrize("mode", ["linear", "nearest"])
def test_interpolate_1d_over_a_dynamic_length(mode):
    check(_interpolate(scale_factor=2.5, mode=mode), torch.randn(1, 2, 5),
          dynamic_shapes={"x": {2: Dim("length", min=2, max=64)}},
          run_with=[(torch.randn(1, 2, 8),)])


def test_trilinear_over_dynamic_sizes():
    check(_interpolate(scale_factor=2, mode="trilinear"), torch.randn(1, 2, 3, 4, 5),
          dynamic_shapes={"x": {2: Dim("depth", min=2, max=16), 4: Dim("width", min=2, max=16)}},
          run_with=[(torch.randn(1, 2, 4, 4, 3),)])


def test_recomputed_scale_factor_over_dynamic_sizes():
    # interpolate computes the output size as trunc(sym_float(size) * 1.5): float arithmetic
    # on a symbolic size, which was made in int64 (a Mul ONNX Runtime refused).
    _dynamic_height_and_width(
        _interpolate(scale_factor=1.5, mode="bilinear", recompute_scale_factor=True), 18)


@pytest.mark.parametrize("size", [(1, 1), (1, 131), (27, 131), (11, 53)])
def test_bicubic_shrinks_and_grows_to_odd_sizes_and_to_one_pixel(size):
    """Keypoint R-CNN resizes each 56x56 heatmap to ceil(box size), down or up, with bicubic
    and align_corners=False. torch maps output pixel d to (d + 0.5) * in / out - 0.5 even when
    out is 1 (the centre): ONNX's half_pixel, not pytorch_half_pixel (which maps a size-1
    axis to 0) nor any antialiasing on the way down."""
    check(_interpolate(size=size, mode="bicubic", align_corners=False), torch.randn(2, 17, 56, 56))


# Rows and columns numbered, so that a pixel taken from the wrong row is off by 57.
_NUMBERED = torch.arange(56 * 57, dtype=torch.float32).reshape(1, 1, 56, 57)


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("options", [dict(size=(46, 23)), dict(size=(114, 131)),
                                     dict(scale_factor=0.3), dict(scale_factor=(1.7, 2.0))],
                         ids=["down to a size", "up to a size", "x0.3", "x1.7 and x2"])
def test_nearest_picks_torchs_pixel_at_any_ratio(mode, options):
    """torch picks floor(d * float32(in / out)) (or 1 / scale); Resize divides by its own
    float32 scale, and where d * in / out is whole the two round apart (56 -> 16 by 0.3 took
    row 9, torch row 10): one pixel off, silently."""
    program = check(_interpolate(mode=mode, **options), _NUMBERED)
    if "size" in options:
        assert "Resize" not in op_types(program)


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
def test_nearest_by_a_scale_over_dynamic_sizes(mode):
    check(_interpolate(scale_factor=(0.3, 1.7), mode=mode), _NUMBERED,
          dynamic_shapes={"x": {2: Dim("height", min=2, max=200), 3: Dim("width", min=2, max=200)}},
          run_with=[(torch.randn(1, 1, 41, 29),), (torch.randn(1, 1, 7, 100),)])


def test_nearest_to_the_size_of_another_tensor_as_fpn_does():
    # FPN's top-down path: a 13x13 map to its neighbour's 25x25 (an 800-pixel image).
    sizes = {"x": {2: Dim("h", min=2, max=64), 3: Dim("w", min=2, max=64)},
             "y": {2: Dim("h2", min=2, max=128), 3: Dim("w2", min=2, max=128)}}
    check(lambda x, y: F.interpolate(x, size=y.shape[-2:], mode="nearest") + y,
          torch.randn(1, 2, 13, 13), torch.randn(1, 2, 25, 25), dynamic_shapes=sizes,
          run_with=[(torch.randn(1, 2, 7, 10), torch.randn(1, 2, 13, 19)),
                    (torch.randn(1, 2, 2, 2), torch.randn(1, 2, 82, 94))])


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
def test_nearest_by_powers_of_two_stays_one_resize(mode):
    for options in (dict(scale_factor=0.5), dict(size=(112, 114))):
        assert op_types(check(_interpolate(mode=mode, **options), _NUMBERED)) == ["Resize"]


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("options", [dict(size=(13, 27)), dict(size=(1, 1)),
                                     dict(size=(100, 20)), dict(scale_factor=(0.37, 1.6))],
                         ids=["down", "to one pixel", "up and down", "by scales"])
def test_antialiased_interpolate(mode, options):
    """antialias=True: Resize's antialias with PIL's conventions (taps outside dropped, bicubic
    A = -0.5), which torch's _aa kernels follow."""
    check(_interpolate(mode=mode, antialias=True, **options), torch.randn(1, 3, 56, 56))


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("options", [dict(size=(13, 27)), dict(size=(100, 20)),
                                     dict(scale_factor=(0.37, 1.6)), dict(size=(1, 1))],
                         ids=["down", "up and down", "by scales", "to one pixel"])
def test_antialiased_interpolate_before_opset_18(mode, options):
    # Resize has no antialias before opset 18: torch's weights as matrices, stepping by
    # 1 / scale where scales are given (56 * 0.37 -> 20 rows, not 56 / 20 apart).
    program = check(_interpolate(mode=mode, antialias=True, **options),
                    torch.randn(1, 3, 56, 56), opset=13)
    assert "Resize" not in op_types(program)


def test_antialiased_interpolate_over_dynamic_sizes_before_opset_18_is_an_error():
    with pytest.raises(onnxport.errors.TranslationError, match="opset_version >= 18"):
        check(_interpolate(scale_factor=0.4, mode="bilinear", antialias=True),
              torch.randn(1, 2, 30, 40), opset=17,
              dynamic_shapes={"x": {2: Dim("height", min=4, max=200)}})


def test_antialiased_interpolate_over_dynamic_sizes():
    check(_interpolate(scale_factor=0.4, mode="bilinear", antialias=True), torch.randn(1, 2, 30, 40),
          dynamic_shapes={"x": {2: Dim("height", min=4, max=200), 3: Dim("width", min=4, max=200)}},
          run_with=[(torch.randn(1, 2, 57, 23),)])


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("size", [(5, 7), (1, 30), (33, 9), (20, 20)],
                         ids=["down", "to one row", "up and down", "same size"])
def test_antialiased_interpolate_with_align_corners(mode, size):
    # Resize's antialias filter under align_corners differs from torch's by up to 1.0: one
    # weight matrix per axis instead.
    program = check(_interpolate(size=size, mode=mode, antialias=True, align_corners=True),
                    torch.randn(1, 2, 20, 24))
    assert "Resize" not in op_types(program)


def test_antialiased_interpolate_with_align_corners_over_dynamic_sizes_is_an_error():
    with pytest.raises(onnxport.errors.TranslationError, match="align_corners=False"):
        check(_interpolate(scale_factor=0.5, mode="bilinear", antialias=True,
                           align_corners=True), torch.randn(1, 2, 20, 20),
              dynamic_shapes={"x": {2: Dim("height", min=4, max=200)}})


def test_upsample_nearest_by_a_quarter_of_an_odd_size():
    # torch steps by 1 / 0.25 = 4 over floor(59 / 4) = 14 rows; Resize given those sizes
    # would step by 59 / 14 and take row 54 for torch's 52.
    x = torch.arange(59 * 59, dtype=torch.float32).reshape(1, 1, 59, 59)
    check(lambda x: torch.ops.aten.upsample_nearest2d(x, [14, 14], 0.25, 0.25), x)


@pytest.mark.parametrize("op", [torch.ops.aten.upsample_bilinear2d, torch.ops.aten.upsample_bicubic2d,
                                torch.ops.aten._upsample_bilinear2d_aa],
                         ids=["bilinear", "bicubic", "bilinear antialiased"])
def test_upsample_with_scales_steps_by_them(op):
    # Given scales, torch samples every 1 / 0.25 = 4 rows, not 59 / 14 (2.2 off, was).
    check(lambda x: op(x, [14, 14], False, 0.25, 0.25), torch.randn(1, 2, 59, 59))


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_over_a_volume_at_opset_20(mode, padding_mode, align_corners):
    torch.manual_seed(0)
    check(lambda x, grid: F.grid_sample(x, grid, mode=mode, padding_mode=padding_mode,
                                        align_corners=align_corners),
          torch.randn(2, 3, 4, 5, 6), torch.rand(2, 3, 2, 4, 3) * 2.4 - 1.2, opset=20)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_over_a_volume_before_opset_20(mode, padding_mode, align_corners):
    # Points outside [-1, 1] too: padded, reflected (several times) or zero, as torch.
    torch.manual_seed(0)
    grid = torch.cat([torch.rand(2, 3, 2, 4, 3) * 5 - 2.5, torch.zeros(2, 3, 2, 1, 3)], 3)
    program = check(lambda x, grid: F.grid_sample(x, grid, mode=mode, padding_mode=padding_mode,
                                                  align_corners=align_corners),
                    torch.randn(2, 3, 4, 5, 6), grid, opset=13,
                    run_with=[(torch.randn(2, 3, 4, 5, 6), torch.rand(2, 3, 2, 5, 3) * 3 - 1.5)])
    assert "GridSample" not in op_types(program)


def test_grid_sample_over_a_volume_of_dynamic_size_below_opset_20_is_an_error():
    with pytest.raises(onnxport.errors.TranslationError, match="opset_version >= 20"):
        check(lambda x, grid: F.grid_sample(x, grid, align_corners=False),
              torch.randn(1, 2, 3, 4, 5), torch.rand(1, 2, 2, 2, 3) * 2 - 1, opset=18,
              dynamic_shapes={"x": {4: Dim("width", min=2, max=64)}, "grid": None})


@pytest.mark.parametrize("opset", [16, 20])
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_of_an_image_is_one_grid_sample(opset, mode, padding_mode, align_corners):
    # ONNX GridSample since opset 16 (its modes named bilinear and bicubic until 20), not
    # torch's decomposition (a hundred nodes, its index constants sized by the batch).
    torch.manual_seed(0)
    grid = torch.rand(2, 3, 4, 2) * 2.4 - 1.2  # (points outside [-1, 1] too)
    program = check(lambda x, grid: F.grid_sample(x, grid, mode=mode, padding_mode=padding_mode,
                                                  align_corners=align_corners),
                    torch.randn(2, 3, 5, 6), grid, opset=opset,
                    dynamic_shapes={"x": {0: Dim("batch")}, "grid": {0: Dim("batch")}},
                    run_with=[(torch.randn(4, 3, 5, 6), torch.rand(4, 3, 4, 2) * 2 - 1)])
    assert op_types(program) == ["GridSample"]


class _GridSampleOfDefaultCorners(torch.nn.Module):
    def forward(self, x, grid):
        return F.grid_sample(x, grid, padding_mode="reflection")


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_scripted_grid_sample_that_warns_of_its_default_corners(dynamo):
    # Scripting decides the branch on align_corners=None, which leaves F.grid_sample's
    # warnings.warn outside any branch: torch's converter refused the aten::warn.
    with pytest.warns(UserWarning, match="align_corners"):
        model = torch.jit.script(_GridSampleOfDefaultCorners())
        check(model, torch.randn(1, 2, 5, 6), torch.rand(1, 3, 4, 2) * 2 - 1, dynamo=dynamo,
              input_names=["x", "grid"], dynamic_axes={"x": [2, 3], "grid": [1, 2]},
              run_with=[(torch.randn(1, 2, 7, 4), torch.rand(1, 5, 2, 2) * 2 - 1)])


class _ScriptedInterpolate(torch.nn.Module):
    def __init__(self, scale_factor, mode: str, recompute: bool | None):
        super().__init__()
        self.scale_factor, self.mode, self.recompute = scale_factor, mode, recompute

    def forward(self, x):
        return F.interpolate(x, scale_factor=self.scale_factor, mode=self.mode,
                             recompute_scale_factor=self.recompute)


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
@pytest.mark.parametrize("scale_factor, mode, recompute, shape", [
    (1.7, "nearest", True, (1, 2, 5, 7)),
    (0.6, "bilinear", True, (1, 2, 5, 7)),
    (2.5, "linear", True, (1, 2, 5)),
    (2.0, "bicubic", False, (1, 2, 5, 7)),
], ids=["nearest-recomputed", "bilinear-recomputed", "linear-recomputed", "bicubic"])
def test_scripted_interpolate_by_a_scale_factor(dynamo, scale_factor, mode, recompute, shape):
    # Scripted, F.interpolate casts its scale factors, a decided Optional[List[float]], to
    # List[float] (prim::unchecked_cast of a list): the cast was left in the graph, and the
    # export failed on it ("Expected a value of type 't'... found type 'list'").
    model = torch.jit.script(_ScriptedInterpolate(scale_factor, mode, recompute))
    other = torch.randn(2, 3, *(size + 3 for size in shape[2:]))
    check(model, torch.randn(shape), dynamo=dynamo, opset=14, input_names=["x"],
          dynamic_axes={"x": list(range(len(shape)))}, run_with=[(other,)], atol=1e-5)
