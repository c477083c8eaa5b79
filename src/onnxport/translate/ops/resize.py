"""Resizing: torch's upsample ops (F.interpolate, nn.Upsample) as one ONNX Resize.

Scale factors go to Resize as scales, so that the output sizes follow dynamic input sizes as
torch's floor(size * scale) does; explicit output sizes go as sizes. Nearest modes at ratios
other than powers of two are a Gather per axis instead (see _nearest).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import onnx_ir as ir

from onnxport.errors import TranslationError
from onnxport.translate.ops._helpers import cast, rank, reshape_to_sizes, shape_list, squeeze
from onnxport.translate.registry import translates

# torch's mode -> (Resize mode, coordinate mode without align_corners, nearest_mode)
_COORDINATES = {
    "nearest": ("nearest", "asymmetric", "floor"),  # source = floor(dst / scale)
    "nearest-exact": ("nearest", "half_pixel", "round_prefer_ceil"),  # floor((dst + .5) / scale)
    "linear": ("linear", "half_pixel", None),
    "cubic": ("cubic", "half_pixel", None),
}


def _resize(g, x, output_size, scale_factors, mode, align_corners=False, antialias=False):
    spatial = rank(x) - 2
    onnx_mode, coordinates, nearest_mode = _COORDINATES[mode]
    if align_corners:
        coordinates = "align_corners"
    attrs = dict(mode_s=onnx_mode, coordinate_transformation_mode_s=coordinates)
    if nearest_mode is not None:
        attrs["nearest_mode_s"] = nearest_mode
    if onnx_mode == "cubic":
        attrs["cubic_coeff_a_f"] = -0.75  # torch's bicubic A (ONNX's default, said aloud)
    if antialias:
        # torch's antialiased kernels are PIL's: taps outside the image dropped and the
        # weights renormalised, and bicubic's A is -0.5, not -0.75.
        attrs.update(antialias_i=1, exclude_outside_i=1)
        if onnx_mode == "cubic":
            attrs["cubic_coeff_a_f"] = -0.5
    if output_size is None:
        scales = list(scale_factors)
        scales = scales * spatial if len(scales) == 1 else scales
        return g.op("Resize", x, None, g.const([1.0, 1.0] + [float(s) for s in scales]), **attrs)
    sizes = list(output_size)
    sizes = sizes * spatial if len(sizes) == 1 else sizes
    if g.opset >= 18:
        return g.op("Resize", x, None, None, shape_list(g, sizes),
                    axes_i=list(range(2, 2 + spatial)), **attrs)
    leading = g.op("Shape", x, start_i=0, end_i=2) if g.opset >= 15 else g.op(
        "Slice", g.op("Shape", x), g.const([0]), g.const([2]))
    leading.dtype = ir.DataType.INT64
    full = g.op("Concat", leading, shape_list(g, sizes), axis_i=0)
    return g.op("Resize", x, None, None, full, **attrs)


def _per_axis(values, spatial):
    if values is None:
        return [None] * spatial
    values = list(values)
    return values * spatial if len(values) == 1 else values


def _power_of_two(ratio: float) -> bool:
    return ratio > 0 and math.log2(ratio).is_integer()


@functools.lru_cache(maxsize=64)
def _resize_agrees(scale: float, exact: bool) -> bool:
    """Whether Resize picks torch's pixels at this scale: powers of two (all exact), and whole
    scales k where torch's float32 d * (1 / k) floors as d // k does for every d up to 2**20
    (Resize's d / k, a correctly rounded division, does; its distance to a whole number is at
    least 1 / 2k)."""
    if _power_of_two(scale):
        return True
    if scale != int(scale) or scale < 1:
        return False
    row = np.arange(1 << 20, dtype=np.float32)
    step = np.float32(1.0 / scale)
    k = int(scale)
    if exact:
        return bool(np.array_equal(np.floor((row + np.float32(0.5)) * step).astype(np.int64),
                                   (2 * np.arange(1 << 20) + 1) // (2 * k)))
    return bool(np.array_equal(np.floor(row * step).astype(np.int64), np.arange(1 << 20) // k))


def _nearest(g, x, output_size, scale_factors, mode):
    """torch's nearest modes. torch picks source floor(d * r) ("nearest") or
    floor((d + 0.5) * r) ("nearest-exact"), r = float32(1 / scale) or float32(in) / out,
    multiplied in float32; Resize divides by its float32 scale instead, and at the ratios
    where d * r is a whole number the two round to different sides: a pixel off, in 3% of
    (in, out) pairs up to 160 (56 -> 16 by 0.3 picks row 9 for torch's 10). So Resize only
    at ratios that are powers of two (both exact) or whole scales checked to agree; elsewhere
    a Gather per axis of torch's indices, computed as torch does (constants when the sizes
    are static)."""
    spatial = rank(x) - 2
    scales, sizes = _per_axis(scale_factors, spatial), _per_axis(output_size, spatial)
    in_sizes = list(x.shape)[2:] if x.shape is not None else [None] * spatial
    if all(scale is not None for scale in scales):
        if all(_resize_agrees(float(scale), mode == "nearest-exact") for scale in scales):
            # By the scales: Resize then sizes the output as torch, floor(in * scale).
            return _resize(g, x, None, scales, mode)
    elif all(scale is None for scale in scales):
        if all(isinstance(n, int) and isinstance(size, int) and _power_of_two(n / size)
               for n, size in zip(in_sizes, sizes)):
            return _resize(g, x, output_size, None, mode)
    out = x
    for i, (n, size, scale) in enumerate(zip(in_sizes, sizes, scales)):
        index = _nearest_index(g, x, 2 + i, n, size, scale, mode == "nearest-exact")
        out = g.op("Gather", out, index, axis_i=2 + i)
    return out


def _nearest_index(g, x, axis, n, size, scale, exact):
    """The source row of each output row along ``axis``, as torch's nearest kernels pick it."""
    if isinstance(n, int) and (isinstance(size, int) or scale is not None):
        if size is None:
            size = math.floor(n * scale)  # torch's output size, in double
        step = np.float32(1.0 / scale) if scale is not None else np.float32(n) / np.float32(size)
        row = np.arange(size, dtype=np.float32)
        index = np.floor((row + np.float32(0.5) if exact else row) * step).astype(np.int64)
        if not exact and size == 2 * n:
            index = np.arange(size) // 2  # torch's shortcut, whatever the scale
        return g.const(np.minimum(index, n - 1))
    n_value = g.op("Shape", x, start_i=axis, end_i=axis + 1) if g.opset >= 15 else g.op(
        "Gather", g.op("Shape", x), g.const([axis]), axis_i=0)
    n_value.dtype = ir.DataType.INT64
    if size is None:
        size_value = g.op("Floor", g.op("Mul", cast(g, n_value, ir.DataType.DOUBLE),
                                        g.const([float(scale)], ir.DataType.DOUBLE)))
        size_value = cast(g, size_value, ir.DataType.INT64)
    else:
        size_value = shape_list(g, [size])
    if scale is not None:
        step = g.const(np.float32(1.0 / scale))
    else:
        step = g.op("Div", cast(g, n_value, ir.DataType.FLOAT), cast(g, size_value, ir.DataType.FLOAT))
    row = g.op("Range", g.const(0, ir.DataType.INT64), squeeze(g, size_value, [0]),
               g.const(1, ir.DataType.INT64))
    row.dtype = ir.DataType.INT64
    row_float = cast(g, row, ir.DataType.FLOAT)
    if exact:
        row_float = g.op("Add", row_float, g.const(np.float32(0.5)))
    index = cast(g, g.op("Floor", g.op("Mul", row_float, step)), ir.DataType.INT64)
    if not exact:
        doubled = g.op("Equal", size_value, g.op("Mul", n_value, g.const([2], ir.DataType.INT64)))
        index = g.op("Where", doubled, g.op("Div", row, g.const(2, ir.DataType.INT64)), index)
    index = g.op("Min", index, g.op("Sub", n_value, g.const([1], ir.DataType.INT64)))
    index.dtype = ir.DataType.INT64
    return index


@translates("aten::upsample_nearest1d.vec", "aten::upsample_nearest2d.vec",
            "aten::upsample_nearest3d.vec", since_opset=11)
def upsample_nearest_vec(g, input, output_size, scale_factors):
    """upsample_nearest2d.vec(Tensor input, SymInt[]? output_size, float[]? scale_factors) -> Tensor"""
    return _nearest(g, input, output_size, scale_factors, "nearest")


@translates("aten::_upsample_nearest_exact1d.vec", "aten::_upsample_nearest_exact2d.vec",
            "aten::_upsample_nearest_exact3d.vec", since_opset=11)
def upsample_nearest_exact_vec(g, input, output_size, scale_factors):
    """_upsample_nearest_exact2d.vec(Tensor input, SymInt[]? output_size, float[]? scale_factors) -> Tensor"""
    return _nearest(g, input, output_size, scale_factors, "nearest-exact")


@translates("aten::upsample_linear1d.vec", "aten::upsample_bilinear2d.vec",
            "aten::upsample_trilinear3d.vec", since_opset=11)
def upsample_linear_vec(g, input, output_size, align_corners, scale_factors):
    """upsample_bilinear2d.vec(Tensor input, SymInt[]? output_size, bool align_corners, float[]? scale_factors) -> Tensor"""
    return _resize(g, input, output_size, scale_factors, "linear", align_corners)


@translates("aten::upsample_bicubic2d.vec", since_opset=11)
def upsample_bicubic_vec(g, input, output_size, align_corners, scale_factors):
    """upsample_bicubic2d.vec(Tensor input, SymInt[]? output_size, bool align_corners, float[]? scale_factors) -> Tensor"""
    return _resize(g, input, output_size, scale_factors, "cubic", align_corners)


@translates("aten::upsample_nearest1d", "aten::upsample_nearest2d", "aten::upsample_nearest3d",
            since_opset=11)
def upsample_nearest(g, self, output_size, *scales):
    """upsample_nearest2d(Tensor self, SymInt[2] output_size, float? scales_h=None, float? scales_w=None) -> Tensor"""
    # torch steps by 1 / scale where a scale is given, not by in / out.
    given = list(scales) if any(scale is not None for scale in scales) else None
    return _nearest(g, self, output_size, given, "nearest")


@translates("aten::upsample_linear1d", "aten::upsample_bilinear2d", "aten::upsample_trilinear3d",
            since_opset=11)
def upsample_linear(g, self, output_size, align_corners, *scales):
    """upsample_bilinear2d(Tensor self, SymInt[2] output_size, bool align_corners, float? scales_h=None, float? scales_w=None) -> Tensor"""
    return _resize(g, self, *_sizes_or_scales(self, output_size, scales, align_corners),
                   "linear", align_corners)


def _sizes_or_scales(x, output_size, scales, align_corners):
    """(output_size, None), or (None, scales) where torch steps by the given scales (1 / scale,
    not in / out: 59 -> 14 by 0.25) and Resize, given them, sizes the output as torch did."""
    if align_corners or not scales or any(scale is None for scale in scales):
        return output_size, None
    spatial = rank(x) - 2
    in_sizes = list(x.shape)[2:] if x.shape is not None else [None] * spatial
    for n, size, scale in zip(in_sizes, _per_axis(output_size, spatial), _per_axis(scales, spatial)):
        if isinstance(n, int) and isinstance(size, int) and size != math.floor(n * scale):
            return output_size, None
    return None, list(scales)


@translates("aten::upsample_bicubic2d", since_opset=11)
def upsample_bicubic(g, self, output_size, align_corners, *scales):
    """upsample_bicubic2d(Tensor self, SymInt[2] output_size, bool align_corners, float? scales_h=None, float? scales_w=None) -> Tensor"""
    return _resize(g, self, *_sizes_or_scales(self, output_size, scales, align_corners),
                   "cubic", align_corners)


def _antialiased(g, x, output_size, scale_factors, mode, align_corners, scales=None):
    """``scales``: the non-vec overloads' scales_h/scales_w, which torch's kernel steps by
    even where _sizes_or_scales gives Resize the sizes instead."""
    if align_corners or g.opset < 18:
        return _antialiased_by_matrices(g, x, mode, align_corners,
                                        scale_factors if scales is None else scales)
    return _resize(g, x, output_size, scale_factors, mode, antialias=True)


def _antialiased_by_matrices(g, x, mode, align_corners, scale_factors=None):
    """Resize's antialias filter with align_corners differs from torch's by up to 1.0, and
    Resize has no antialias before opset 18: at static sizes, torch's separable filter is one
    [out, in] weight matrix per spatial axis."""
    in_sizes = list(x.shape)[2:] if x.shape is not None else [None]
    out_sizes = list(getattr(g.expected, "shape", [None] * len(in_sizes)))[2:]
    if not all(isinstance(n, int) for n in in_sizes + out_sizes):
        raise TranslationError(
            f"F.interpolate(mode={'bilinear' if mode == 'linear' else 'bicubic'!r}, "
            f"antialias=True{', align_corners=True' if align_corners else ''}) over dynamic "
            "sizes has no ONNX Resize equivalent"
            f"{' before opset 18' if not align_corners else ''}; use "
            f"{'opset_version >= 18' if not align_corners else 'align_corners=False'}, or "
            "static sizes")
    scales = _per_axis(scale_factors, len(in_sizes))
    dtype = x.dtype
    height = _aa_weights(in_sizes[0], out_sizes[0], mode, align_corners, scales[0])
    width = _aa_weights(in_sizes[1], out_sizes[1], mode, align_corners, scales[1]).T
    rows = g.op("MatMul", g.const(height.astype(np.float32), ir.DataType.FLOAT),
                cast(g, x, ir.DataType.FLOAT))
    out = g.op("MatMul", rows, g.const(np.ascontiguousarray(width, np.float32),
                                       ir.DataType.FLOAT))
    return cast(g, out, dtype)


def _aa_filter(mode, t):
    t = abs(t)
    if mode == "linear":
        return max(0.0, 1.0 - t)
    a = -0.5  # PIL's bicubic, as torch's antialiased kernel
    if t < 1.0:
        return ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0
    return (((t - 5.0) * t + 8.0) * t - 4.0) * a if t < 2.0 else 0.0


def _aa_weights(size_in, size_out, mode, align_corners=True, scale_factor=None):
    """torch's antialiased weights along one axis (its _compute_weights_aa): taps within the
    support around each output's center, normalised; [out, in]. The step is torch's
    area_pixel_compute_scale: (in - 1) / (out - 1) with align_corners, else 1 / the given
    scale factor, else in / out."""
    if align_corners:
        scale = (size_in - 1) / (size_out - 1) if size_out > 1 else 0.0
    elif scale_factor is not None and scale_factor > 0:
        scale = 1.0 / scale_factor
    else:
        scale = size_in / size_out
    taps = 2 if mode == "linear" else 4
    support = taps * 0.5 * scale if scale >= 1.0 else taps * 0.5
    inverse = 1.0 / scale if scale >= 1.0 else 1.0
    weights = np.zeros((size_out, size_in), np.float64)
    for i in range(size_out):
        center = scale * (i + 0.5)
        first = max(int(center - support + 0.5), 0)
        last = min(int(center + support + 0.5), size_in)
        row = [_aa_filter(mode, (j - center + 0.5) * inverse) for j in range(first, last)]
        total = sum(row)
        weights[i, first:last] = [w / total for w in row] if total != 0 else row
    return weights


@translates("aten::_upsample_bilinear2d_aa.vec", since_opset=9)
def upsample_bilinear_aa_vec(g, input, output_size, align_corners, scale_factors):
    """_upsample_bilinear2d_aa.vec(Tensor input, SymInt[]? output_size, bool align_corners, float[]? scale_factors) -> Tensor"""
    return _antialiased(g, input, output_size, scale_factors, "linear", align_corners)


@translates("aten::_upsample_bicubic2d_aa.vec", since_opset=9)
def upsample_bicubic_aa_vec(g, input, output_size, align_corners, scale_factors):
    """_upsample_bicubic2d_aa.vec(Tensor input, SymInt[]? output_size, bool align_corners, float[]? scale_factors) -> Tensor"""
    return _antialiased(g, input, output_size, scale_factors, "cubic", align_corners)


@translates("aten::_upsample_bilinear2d_aa", since_opset=9)
def upsample_bilinear_aa(g, self, output_size, align_corners, *scales):
    """_upsample_bilinear2d_aa(Tensor self, SymInt[2] output_size, bool align_corners, float? scales_h=None, float? scales_w=None) -> Tensor"""
    return _antialiased(g, self, *_sizes_or_scales(self, output_size, scales, align_corners),
                        "linear", align_corners, scales)


@translates("aten::_upsample_bicubic2d_aa", since_opset=9)
def upsample_bicubic_aa(g, self, output_size, align_corners, *scales):
    """_upsample_bicubic2d_aa(Tensor self, SymInt[2] output_size, bool align_corners, float? scales_h=None, float? scales_w=None) -> Tensor"""
    return _antialiased(g, self, *_sizes_or_scales(self, output_size, scales, align_corners),
                        "cubic", align_corners, scales)


_GRID_MODES = {0: "linear", 1: "nearest", 2: "cubic"}
_GRID_PADDING = {0: "zeros", 1: "border", 2: "reflection"}


@translates("aten::grid_sampler", "aten::grid_sampler_2d", since_opset=16)
def grid_sampler_2d(g, input, grid, interpolation_mode, padding_mode, align_corners):
    """grid_sampler(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool align_corners) -> Tensor

    ONNX GridSample (opset 16) for an image (4-d input); its modes were named bilinear and
    bicubic until opset 20. A volume goes on to grid_sampler_3d's translations."""
    if rank(input) != 4:
        volume = grid_sampler_3d if g.opset >= 20 else grid_sampler_3d_before_opset_20
        return volume(g, input, grid, interpolation_mode, padding_mode, align_corners)
    mode = _GRID_MODES[interpolation_mode]
    if g.opset < 20:
        mode = {"linear": "bilinear", "cubic": "bicubic"}.get(mode, mode)
    return g.op("GridSample", input, grid, mode_s=mode,
                padding_mode_s=_GRID_PADDING[padding_mode], align_corners_i=int(align_corners))


@translates("aten::grid_sampler_3d", since_opset=20)
def grid_sampler_3d(g, input, grid, interpolation_mode, padding_mode, align_corners):
    """grid_sampler_3d(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool align_corners) -> Tensor

    GridSample over volumes arrived in opset 20 (torch's 2-d sampler reaches the graph as its
    decomposition, at any opset)."""
    return g.op("GridSample", input, grid, mode_s=_GRID_MODES[interpolation_mode],
                padding_mode_s=_GRID_PADDING[padding_mode], align_corners_i=int(align_corners))


@translates("aten::grid_sampler_3d", since_opset=9)
def grid_sampler_3d_before_opset_20(g, input, grid, interpolation_mode, padding_mode,
                                    align_corners):
    """grid_sampler_3d(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool align_corners) -> Tensor

    Before GridSample took volumes: torch's sampler at static input sizes, each output
    point's (trilinear: eight) neighbours gathered from the flattened volume and weighted,
    coordinates padded (border, reflection) or the outside neighbours zeroed as torch does."""
    mode = _GRID_MODES[interpolation_mode]
    sizes = g.static_shape(input)
    if mode == "cubic" or sizes is None:
        raise TranslationError(
            "grid_sample over a volume (5-d input) "
            f"{'in bicubic mode' if mode == 'cubic' else 'of dynamic size'} needs "
            "opset_version >= 20, where ONNX GridSample took volumes; export with "
            "opset_version=20 or later")
    dtype = input.dtype
    depth, height, width = sizes[2:]
    grid = cast(g, grid, ir.DataType.FLOAT)
    coords = []
    for axis, size in enumerate((width, height, depth)):  # grid holds (x, y, z)
        c = g.op("Gather", grid, g.const(axis), axis_i=4)  # [N, Do, Ho, Wo]
        coords.append(_grid_coordinate(g, c, size, _GRID_PADDING[padding_mode],
                                       align_corners))
    flat = g.op("Reshape", cast(g, input, ir.DataType.FLOAT), g.const([0, 0, -1]))
    out_shape = g.op("Shape", coords[0])

    def pick(x, y, z):
        """The values at integer (x, y, z) [N, Do, Ho, Wo] (float), 0 outside."""
        inside = None
        index = None
        for c, size, stride in ((x, width, 1), (y, height, width), (z, depth, width * height)):
            ok = g.op("And", g.op("GreaterOrEqual", c, g.const(0.0)),
                      g.op("LessOrEqual", c, g.const(float(size - 1))))
            inside = ok if inside is None else g.op("And", inside, ok)
            position = g.op("Cast", g.op("Clip", c, g.const(0.0), g.const(float(size - 1))),
                            to_i=int(ir.DataType.INT64))
            position = g.op("Mul", position, g.const(stride)) if stride != 1 else position
            index = position if index is None else g.op("Add", index, position)
        index = g.op("Unsqueeze", g.op("Reshape", index, g.const([0, -1])), g.const([1]))
        index = g.op("Expand", index, g.const([1, sizes[1], 1]))  # [N, C, P]
        values = g.op("GatherElements", flat, index, axis_i=2)  # [N, C, P]
        mask = g.op("Unsqueeze", g.op("Reshape", cast(g, inside, ir.DataType.FLOAT),
                                      g.const([0, -1])), g.const([1]))
        return g.op("Mul", values, mask)

    if mode == "nearest":
        out = pick(*[g.op("Round", c) for c in coords])
    else:
        low = [g.op("Floor", c) for c in coords]
        frac = [g.op("Sub", c, f) for c, f in zip(coords, low)]
        out = None
        for corner in range(8):
            point, weight = [], None
            for axis in range(3):
                upper = (corner >> axis) & 1
                point.append(g.op("Add", low[axis], g.const(1.0)) if upper else low[axis])
                w = frac[axis] if upper else g.op("Sub", g.const(1.0), frac[axis])
                weight = w if weight is None else g.op("Mul", weight, w)
            weight = g.op("Unsqueeze", g.op("Reshape", weight, g.const([0, -1])), g.const([1]))
            term = g.op("Mul", pick(*point), weight)
            out = term if out is None else g.op("Add", out, term)
    shape = g.op("Concat", g.op("Slice", g.op("Shape", flat), g.const([0]), g.const([2])),
                 g.op("Slice", out_shape, g.const([1]), g.const([4])), axis_i=0)
    return cast(g, reshape_to_sizes(g, out, shape), dtype)


def _grid_coordinate(g, c, size, padding, align_corners):
    """torch's grid_sampler_compute_source_index: unnormalise, then pad (border clips,
    reflection reflects about the edges, then clips)."""
    if align_corners:
        c = g.op("Mul", g.op("Add", c, g.const(1.0)), g.const((size - 1) / 2.0))
    else:
        c = g.op("Div", g.op("Sub", g.op("Mul", g.op("Add", c, g.const(1.0)),
                                         g.const(float(size))), g.const(1.0)), g.const(2.0))
    if padding == "reflection":
        low, high = (0.0, 2.0 * (size - 1)) if align_corners else (-1.0, 2.0 * size - 1)
        if low == high:
            c = g.op("Mul", c, g.const(0.0))
        else:
            minimum, span = low / 2, (high - low) / 2
            distance = g.op("Abs", g.op("Sub", c, g.const(minimum)))
            flips = g.op("Floor", g.op("Div", distance, g.const(span)))
            extra = g.op("Sub", distance, g.op("Mul", flips, g.const(span)))
            even = g.op("Equal", g.op("Mod", g.op("Cast", flips, to_i=int(ir.DataType.INT64)),
                                      g.const(2)), g.const(0))
            c = g.op("Where", even, g.op("Add", extra, g.const(minimum)),
                     g.op("Add", g.op("Sub", g.const(span), extra), g.const(minimum)))
    if padding in ("border", "reflection"):
        c = g.op("Clip", c, g.const(0.0), g.const(float(size - 1)))
    return c
