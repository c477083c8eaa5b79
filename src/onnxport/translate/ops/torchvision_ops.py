"""torchvision's detection ops (torchvision::nms, roi_align, roi_pool) as ONNX NonMaxSuppression,
RoiAlign and MaxRoiPool. Registered by name: torchvision itself is never imported here."""

from __future__ import annotations

import math

import onnx_ir as ir

from onnxport.errors import TranslationError
from onnxport.translate.ops._helpers import cast, expected_dtype, split, squeeze, unsqueeze
from onnxport.translate.registry import translates


@translates("torchvision::nms", since_opset=11)
def nms(g, dets, scores, iou_threshold):
    """nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor

    Both drop a box whose IoU with a kept box is strictly greater than the threshold, and both
    return the kept indices by descending score (ties: torch's sort order is not specified)."""
    # NonMaxSuppression is defined for float32 only (half and double models cast).
    boxes = unsqueeze(g, cast(g, dets, ir.DataType.FLOAT), [0])  # [1, N, 4]: one batch
    per_class = unsqueeze(g, cast(g, scores, ir.DataType.FLOAT), [0, 1])  # [1, 1, N]: one class
    # At most every box is kept: the number of boxes bounds the output without an INT64_MAX
    # constant that some runtimes overflow on.
    count = g.op("Shape", dets, start_i=0, end_i=1) if g.opset >= 15 else \
        g.op("Gather", g.op("Shape", dets), g.const([0]), axis_i=0)
    threshold = g.const([float(iou_threshold)], ir.DataType.FLOAT)
    selected = g.op("NonMaxSuppression", boxes, per_class, count, threshold,
                    center_point_box_i=0)
    selected.dtype = ir.DataType.INT64
    # Each row is (batch, class, box); the box index is the third column.
    column = g.op("Gather", selected, g.const([2]), axis_i=1)
    column.dtype = ir.DataType.INT64
    return squeeze(g, column, [1])


def _split_rois(g, rois):
    """torchvision's [K, 5] rois (batch index, x1, y1, x2, y2) as ONNX's [K, 4] boxes and [K]
    int64 batch indices."""
    index, boxes = split(g, rois, [1, 4], axis=1)
    index = cast(g, squeeze(g, index, [1]), ir.DataType.INT64)
    return boxes, index


@translates("torchvision::roi_align", since_opset=10)
def roi_align(g, input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio,
              aligned):
    """roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, int sampling_ratio, bool aligned) -> Tensor"""
    boxes, index = _split_rois(g, rois)
    attributes = dict(mode_s="avg", output_height_i=int(pooled_height),
                      output_width_i=int(pooled_width),
                      # torch's -1 (and 0) is "adaptive", ceil(roi size / bins), ONNX's 0.
                      sampling_ratio_i=max(int(sampling_ratio), 0),
                      spatial_scale_f=float(spatial_scale))
    if g.opset >= 16:
        attributes["coordinate_transformation_mode_s"] = (
            "half_pixel" if aligned else "output_half_pixel")
    elif aligned:
        # Shifting the boxes by half a pixel is not enough: output_half_pixel, the only mode
        # before opset 16, also grows ROIs smaller than one pixel to one pixel (torch's
        # aligned=True does not), so small boxes would silently differ.
        raise TranslationError(
            "torchvision::roi_align with aligned=True needs opset_version >= 16 (RoiAlign's "
            "coordinate_transformation_mode='half_pixel'); export with opset_version=16 or "
            "later, or use aligned=False")
    return g.op("RoiAlign", input, boxes, index, **attributes)


@translates("torchvision::roi_pool", since_opset=1)
def roi_pool(g, input, rois, spatial_scale, pooled_height, pooled_width):
    """roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width) -> (Tensor, Tensor)

    MaxRoiPool takes torchvision's [K, 5] rois as they are and rounds the ROI's corners and
    bins the same way (both come from Caffe's ROIPooling). The second output, argmax, only
    serves torch's backward pass and has no ONNX form."""
    output = g.op("MaxRoiPool", input, rois, pooled_shape_i=[int(pooled_height), int(pooled_width)],
                  spatial_scale_f=float(spatial_scale))
    return output, _NoArgmax()


class _NoArgmax:
    """Stands for roi_pool's argmax output: using it in the exported graph is an error."""

    def __getattr__(self, name):
        raise TranslationError(
            "torchvision::roi_pool's second output (argmax, used by its backward) has no ONNX "
            "form; use only the pooled output in the exported model")


@translates("aten::log2")
def log2(g, self):
    """log2(Tensor self) -> Tensor

    Here because torchvision's MultiScaleRoIAlign picks each box's pyramid level with it (ONNX
    has no Log2: log(x) / log(2); the level's floor has an epsilon for the rounding)."""
    out = expected_dtype(g) or ir.DataType.FLOAT
    x = cast(g, self, out)
    return g.op("Div", g.op("Log", x), g.const(math.log(2.0), out))
