"""torchvision's detection ops (torchvision::nms, roi_align, roi_pool, deform_conv2d) as ONNX
NonMaxSuppression, RoiAlign, MaxRoiPool and DeformConv; ps_roi_align and ps_roi_pool as
compositions (RoiAlign and a channel selection, an integral image). Registered by name: torchvision itself is never imported here."""

from __future__ import annotations

import math

import onnx_ir as ir
import torch

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
    return output, _NoArgmax("roi_pool", "argmax")


class _NoArgmax:
    """Stands for an op's second output that only its backward uses (roi_pool's argmax,
    ps_roi_*'s channel mapping): using it in the exported graph is an error."""

    def __init__(self, op: str = "roi_pool", output: str = "argmax"):
        self._op, self._output = op, output

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        raise TranslationError(
            f"torchvision::{self._op}'s second output ({self._output}, used by its backward) "
            "has no ONNX form; use only the pooled output in the exported model")


def _position_sensitive_channels(g, input, pooled_height, pooled_width) -> int:
    """The output channels of a ps_roi_* op: the input's channels / (bins)."""
    bins = int(pooled_height) * int(pooled_width)
    channels = input.shape[1] if input.shape is not None and len(input.shape) == 4 else None
    if not isinstance(channels, int) or channels % bins:
        raise TranslationError(
            "torchvision::ps_roi_align/ps_roi_pool need the input's channel count known at "
            f"export and a multiple of pooled_height * pooled_width ({bins}); got {channels}")
    return channels // bins


@translates("torchvision::ps_roi_align", since_opset=16)
def ps_roi_align(g, input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio):
    """ps_roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, int sampling_ratio) -> (Tensor, Tensor)

    torch samples each bin as roi_align(aligned=True) does (half-pixel offset, no growing of
    small ROIs: RoiAlign's half_pixel mode, opset 16), from channel c * bins + bin only. RoiAlign
    pools every channel at every bin; a Gather keeps, for each bin, its own channel."""
    height, width = int(pooled_height), int(pooled_width)
    bins = height * width
    _position_sensitive_channels(g, input, height, width)
    pooled = roi_align(g, input, rois, spatial_scale, height, width, sampling_ratio, True)
    # [K, C * bins, H, W] -> [K, C, bins (channel's bin) * bins (pooled bin)]: the diagonal.
    flat = g.op("Reshape", pooled, g.const([0, -1, bins * bins]))
    diagonal = g.op("Gather", flat, g.const([i * (bins + 1) for i in range(bins)]), axis_i=2)
    output = g.op("Reshape", diagonal, g.const([0, 0, height, width]))
    if int(sampling_ratio) <= 0:
        output = _nan_where_no_samples(g, output, rois, spatial_scale, height, width)
    return output, _NoArgmax("ps_roi_align", "channel_mapping")


def _nan_where_no_samples(g, output, rois, spatial_scale, height, width):
    """torch's ps_roi_align divides each bin's sum by its sample count, ceil(roi height / bins)
    x ceil(roi width / bins) when sampling_ratio <= 0, without guarding 0: an ROI with no
    height or width gives NaN (0 / 0), where RoiAlign gives 0."""
    f32 = ir.DataType.FLOAT
    boxes, _ = _split_rois(g, rois)
    scale, half = g.const(float(spatial_scale), f32), g.const(0.5, f32)
    # As torch computes it: (x2 * scale - 0.5) - (x1 * scale - 0.5).
    shifted = g.op("Sub", g.op("Mul", cast(g, boxes, f32), scale), half)
    x1, y1, x2, y2 = split(g, shifted, [1, 1, 1, 1], axis=1)
    grid_h = g.op("Ceil", g.op("Div", g.op("Sub", y2, y1), g.const(float(height), f32)))
    grid_w = g.op("Ceil", g.op("Div", g.op("Sub", x2, x1), g.const(float(width), f32)))
    empty = g.op("Equal", g.op("Mul", grid_h, grid_w), g.const(0.0, f32))  # [K, 1]
    empty = unsqueeze(g, empty, [2, 3])
    return g.op("Where", empty, g.const(float("nan"), output.dtype or f32), output)


def _round_half_away(g, x):
    """C's round (ties away from zero), which torch's kernels use; ONNX Round ties to even."""
    return g.op("Mul", g.op("Sign", x), g.op("Floor", g.op("Add", g.op("Abs", x),
                                                             g.const(0.5, x.dtype))))


@translates("torchvision::ps_roi_pool", since_opset=11)
def ps_roi_pool(g, input, rois, spatial_scale, pooled_height, pooled_width):
    """ps_roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width) -> (Tensor, Tensor)

    The average (not the max) of each bin's whole pixels, from channel c * bins + bin: no ONNX
    op pools so. The bin sums come from an integral image (CumSum over height and width, in
    float64 so that differences of large partial sums stay exact to float32), read at each
    bin's four corners with GatherND; bins are torch's: rounded ROI corners, ROIs of at least
    one pixel, floor/ceil bin edges clipped to [0, size - 1] (torch's kernel never pools the
    last row and column), an empty bin 0."""
    height, width = int(pooled_height), int(pooled_width)
    channels = _position_sensitive_channels(g, input, height, width)
    dtype = input.dtype or ir.DataType.FLOAT
    f32, f64, i64 = ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.INT64
    boxes, index = _split_rois(g, rois)  # [K, 4], [K]
    corners = _round_half_away(g, g.op("Mul", cast(g, boxes, f32),
                                       g.const(float(spatial_scale), f32)))
    x1, y1, x2, y2 = split(g, corners, [1, 1, 1, 1], axis=1)  # each [K, 1]
    one = g.const(1.0, f32)
    # torch clips the bins' end (exclusive) to size - 1, so that its last row and column are
    # never pooled; the start is clipped alike here, which empties the same bins.
    image = g.op("Sub", g.op("Shape", input), g.const(1))
    last_h = cast(g, g.op("Gather", image, g.const(2), axis_i=0), f32)
    last_w = cast(g, g.op("Gather", image, g.const(3), axis_i=0), f32)

    def edges(start, end, bins, size):
        """[K, bins] start and end pixel of each bin along one axis, clipped to [0, size]."""
        step = g.op("Div", g.op("Max", g.op("Sub", end, start), one), g.const(float(bins), f32))
        at = g.const([float(i) for i in range(bins)], f32)
        low = g.op("Add", g.op("Floor", g.op("Mul", at, step)), start)
        high = g.op("Add", g.op("Ceil", g.op("Mul", g.op("Add", at, one), step)), start)
        zero = g.const(0.0, f32)
        return (g.op("Min", g.op("Max", low, zero), size),
                g.op("Min", g.op("Max", high, zero), size))

    h_low, h_high = edges(y1, y2, height, last_h)  # [K, PH]
    w_low, w_high = edges(x1, x2, width, last_w)  # [K, PW]
    # Each bin's pixel count (high >= low after the clip): 0 for an empty bin, whose sum is
    # then 0 / 1.
    h_size = g.op("Sub", h_high, h_low)
    w_size = g.op("Sub", w_high, w_low)
    area = g.op("Mul", unsqueeze(g, h_size, [2]), unsqueeze(g, w_size, [1]))  # [K, PH, PW]

    # Integral image [B, C * bins, H + 1, W + 1], a zero row and column first.
    padded = g.op("Pad", cast(g, input, f64), g.const([0, 0, 1, 1, 0, 0, 0, 0]))
    integral = g.op("CumSum", g.op("CumSum", padded, g.const(2), reverse_i=0), g.const(3))
    # GatherND indices [K, C, PH, PW, 4] of (batch, channel, row, column).
    k_shape = g.op("Shape", index)
    full = g.op("Concat", k_shape, g.const([channels, height, width]), axis_i=0)
    batch = g.op("Expand", g.op("Reshape", index, g.const([-1, 1, 1, 1])), full)
    # The input channel c * PH * PW + ph * PW + pw of each output.
    channel = torch.arange(channels * height * width).reshape(1, channels, height, width)
    channel = g.op("Expand", g.const(channel), full)

    def corner(rows, columns):
        rows = g.op("Expand", g.op("Reshape", cast(g, rows, i64), g.const([-1, 1, height, 1])),
                    full)
        columns = g.op("Expand", g.op("Reshape", cast(g, columns, i64),
                                      g.const([-1, 1, 1, width])), full)
        indices = g.op("Concat", *[unsqueeze(g, v, [4]) for v in (batch, channel, rows, columns)],
                       axis_i=4)
        return g.op("GatherND", integral, indices)

    total = g.op("Add", g.op("Sub", corner(h_high, w_high), corner(h_low, w_high)),
                 g.op("Sub", corner(h_low, w_low), corner(h_high, w_low)))
    divisor = g.op("Max", area, one)  # [K, PH, PW]
    mean = g.op("Div", cast(g, total, f32), unsqueeze(g, divisor, [1]))
    return cast(g, mean, dtype), _NoArgmax("ps_roi_pool", "channel_mapping")


@translates("torchvision::deform_conv2d", since_opset=19)
def deform_conv2d(g, input, weight, offset, mask, bias, stride_h, stride_w, pad_h, pad_w,
                  dilation_h, dilation_w, groups, offset_groups, use_mask):
    """deform_conv2d(Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias, SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h, SymInt dilation_w, SymInt groups, SymInt offset_groups, bool use_mask) -> Tensor

    ONNX's DeformConv was made from torchvision's: the same offset layout ((dy, dx) per
    offset group and kernel position), mask layout and zero outside the input. Without
    use_mask, torchvision passes an empty mask, which DeformConv takes as absent."""
    kernel = weight.shape[2:] if weight.shape is not None else None
    if kernel is None or not all(isinstance(k, int) for k in kernel):
        raise TranslationError(
            "torchvision::deform_conv2d needs the kernel size known at export time (the "
            "weight's last two dims): make the weight a parameter or constant of the model")
    inputs = [input, weight, offset, bias] + ([mask] if use_mask else [])
    return g.op("DeformConv", *inputs, dilations_i=[int(dilation_h), int(dilation_w)],
                group_i=int(groups), kernel_shape_i=[int(k) for k in kernel],
                offset_group_i=int(offset_groups),
                pads_i=[int(pad_h), int(pad_w), int(pad_h), int(pad_w)],
                strides_i=[int(stride_h), int(stride_w)])


@translates("aten::log2")
def log2(g, self):
    """log2(Tensor self) -> Tensor

    Here because torchvision's MultiScaleRoIAlign picks each box's pyramid level with it (ONNX
    has no Log2: log(x) / log(2); the level's floor has an epsilon for the rounding)."""
    out = expected_dtype(g) or ir.DataType.FLOAT
    x = cast(g, self, out)
    return g.op("Div", g.op("Log", x), g.const(math.log(2.0), out))
