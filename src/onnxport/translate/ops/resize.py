"""Resizing: torch's upsample ops (F.interpolate, nn.Upsample) as one ONNX Resize.

Scale factors go to Resize as scales, so that the output sizes follow dynamic input sizes as
torch's floor(size * scale) does; explicit output sizes go as sizes.
"""

from __future__ import annotations

import onnx_ir as ir

from onnxport.translate.ops._helpers import rank, shape_list
from onnxport.translate.registry import translates

# torch's mode -> (Resize mode, coordinate mode without align_corners, nearest_mode)
_COORDINATES = {
    "nearest": ("nearest", "asymmetric", "floor"),  # source = floor(dst / scale)
    "nearest-exact": ("nearest", "half_pixel", "round_prefer_ceil"),  # floor((dst + .5) / scale)
    "linear": ("linear", "half_pixel", None),
    "cubic": ("cubic", "half_pixel", None),
}


def _resize(g, x, output_size, scale_factors, mode, align_corners=False):
    spatial = rank(x) - 2
    onnx_mode, coordinates, nearest_mode = _COORDINATES[mode]
    if align_corners:
        coordinates = "align_corners"
    attrs = dict(mode_s=onnx_mode, coordinate_transformation_mode_s=coordinates)
    if nearest_mode is not None:
        attrs["nearest_mode_s"] = nearest_mode
    if onnx_mode == "cubic":
        attrs["cubic_coeff_a_f"] = -0.75  # torch's bicubic A (ONNX's default, said aloud)
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


@translates("aten::upsample_nearest1d.vec", "aten::upsample_nearest2d.vec",
            "aten::upsample_nearest3d.vec", since_opset=11)
def upsample_nearest_vec(g, input, output_size, scale_factors):
    """upsample_nearest2d.vec(Tensor input, SymInt[]? output_size, float[]? scale_factors) -> Tensor"""
    return _resize(g, input, output_size, scale_factors, "nearest")


@translates("aten::_upsample_nearest_exact1d.vec", "aten::_upsample_nearest_exact2d.vec",
            "aten::_upsample_nearest_exact3d.vec", since_opset=11)
def upsample_nearest_exact_vec(g, input, output_size, scale_factors):
    """_upsample_nearest_exact2d.vec(Tensor input, SymInt[]? output_size, float[]? scale_factors) -> Tensor"""
    return _resize(g, input, output_size, scale_factors, "nearest-exact")


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
    return _resize(g, self, output_size, None, "nearest")


@translates("aten::upsample_linear1d", "aten::upsample_bilinear2d", "aten::upsample_trilinear3d",
            since_opset=11)
def upsample_linear(g, self, output_size, align_corners, *scales):
    """upsample_bilinear2d(Tensor self, SymInt[2] output_size, bool align_corners, float? scales_h=None, float? scales_w=None) -> Tensor"""
    return _resize(g, self, output_size, None, "linear", align_corners)


@translates("aten::upsample_bicubic2d", since_opset=11)
def upsample_bicubic(g, self, output_size, align_corners, *scales):
    """upsample_bicubic2d(Tensor self, SymInt[2] output_size, bool align_corners, float? scales_h=None, float? scales_w=None) -> Tensor"""
    return _resize(g, self, output_size, None, "cubic", align_corners)
