"""torchvision's detection ops (ops/torchvision_ops.py): nms, roi_align, roi_pool, ps_roi_align
and ps_roi_pool exported with a dynamic number of boxes, compared with eager at two numbers of
boxes."""

from __future__ import annotations

import warnings

import pytest
import torch

import onnxport
import onnxport.errors
from op_check import as_module, assert_matches_eager, check, op_types

torchvision = pytest.importorskip("torchvision")
from torchvision.ops import nms, roi_align, roi_pool  # noqa: E402


def _boxes(n, seed):
    """Valid (x1, y1, x2, y2) boxes, overlapping enough for NMS to drop some."""
    generator = torch.Generator().manual_seed(seed)
    corner = torch.rand(n, 2, generator=generator) * 20
    size = torch.rand(n, 2, generator=generator) * 10 + 1
    return torch.cat([corner, corner + size], 1)


def _scores(n, seed):
    # A permutation: no two scores tie, so the order of the kept boxes is unique.
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed)).float() / n


def _rois(k, seed, batch=2):
    generator = torch.Generator().manual_seed(seed)
    index = torch.randint(0, batch, (k, 1), generator=generator).float()
    return torch.cat([index, _boxes(k, seed) * 2], 1)


@pytest.mark.parametrize("threshold, opset", [(0.3, 18), (0.7, 18), (0.5, 13)])
def test_nms(threshold, opset):
    n = torch.export.Dim("n", min=2, max=1000)
    program = check(lambda boxes, scores: nms(boxes, scores, threshold), _boxes(30, 0),
                    _scores(30, 0), dynamic_shapes=({0: n}, {0: n}), opset=opset,
                    run_with=[(_boxes(50, 1), _scores(50, 1))])
    assert "NonMaxSuppression" in op_types(program)


def test_nms_keeps_a_box_at_exactly_the_threshold():
    # Two 2x1 boxes sharing half their area: IoU 1/3. torch drops a box only above the
    # threshold, so at a threshold of exactly 1/3 both stay.
    boxes = torch.tensor([[0.0, 0.0, 2.0, 1.0], [1.0, 0.0, 3.0, 1.0], [10.0, 10.0, 11.0, 11.0]])
    scores = torch.tensor([0.9, 0.8, 0.7])
    iou = torchvision.ops.box_iou(boxes[:1], boxes[1:2]).item()
    check(lambda b, s: nms(b, s, iou), boxes, scores)
    check(lambda b, s: nms(b, s, iou - 1e-3), boxes, scores)


@pytest.mark.parametrize("opset, aligned", [(13, False), (16, True), (18, False), (18, True)])
@pytest.mark.parametrize("sampling_ratio", [-1, 2])
def test_roi_align(opset, aligned, sampling_ratio):
    x = torch.randn(2, 3, 24, 24)
    k = torch.export.Dim("k", min=2, max=100)
    program = check(
        lambda x, rois: roi_align(x, rois, (3, 4), 0.5, sampling_ratio, aligned),
        x, _rois(5, 0), dynamic_shapes=(None, {0: k}), opset=opset,
        run_with=[(x, _rois(9, 3))])
    assert "RoiAlign" in op_types(program)


# Out of the image, empty, and smaller than a pixel: torch grows the last two to one pixel only
# when aligned=False.
ODD_ROIS = torch.tensor([[0.0, -6.0, -4.0, 3.0, 2.0], [0.0, 5.0, 6.0, 14.0, 12.0],
                         [0.0, 3.0, 3.0, 3.0, 3.0], [0.0, 1.0, 1.0, 1.5, 1.25]])


@pytest.mark.parametrize("aligned", [False, True])
def test_roi_align_odd_rois(aligned):
    check(lambda x, rois: roi_align(x, rois, (2, 2), 1.0, -1, aligned), torch.randn(1, 2, 8, 8),
          ODD_ROIS)


def test_roi_align_aligned_before_opset_16_is_an_error():
    # Shifted boxes would match except for ROIs under a pixel: an error, not a silent mismatch.
    with pytest.raises(onnxport.errors.TranslationError, match="opset_version >= 16"):
        check(lambda x, rois: roi_align(x, rois, (2, 2), 1.0, -1, True),
              torch.randn(1, 2, 8, 8), ODD_ROIS, opset=15)


def test_roi_pool_rounds_corners_like_torch():
    # With spatial_scale 0.5, odd coordinates land on .5, where rounding modes differ.
    check(lambda x, rois: roi_pool(x, rois, (3, 2), 0.5)[0], torch.randn(1, 2, 10, 10),
          torch.tensor([[0, 1.0, 3.0, 5.0, 7.0], [0, -5.0, -3.0, 9.0, 11.0],
                        [0, 3.0, 3.0, 3.0, 3.0], [0, 15.0, 15.0, 25.0, 25.0]]))


def test_roi_pool():
    x = torch.randn(2, 3, 24, 24)
    k = torch.export.Dim("k", min=2, max=100)
    program = check(lambda x, rois: roi_pool(x, rois, (2, 3), 0.5), x, _rois(5, 0),
                    dynamic_shapes=(None, {0: k}), run_with=[(x, _rois(9, 3))])
    assert "MaxRoiPool" in op_types(program)


def test_log2_of_box_areas():
    # MultiScaleRoIAlign's level mapping: floor(4 + log2(sqrt(area) / 224) + eps), which an
    # off-by-an-ulp log2 would move to the wrong level at exact powers of two.
    areas = torch.tensor([224.0 ** 2, 112.0 ** 2, 448.0 ** 2, 1000.0, 5.0e5])
    check(lambda a: torch.floor(4 + torch.log2(torch.sqrt(a) / 224) + 1e-6), areas)
    check(torch.log2, torch.rand(3, 4) + 0.1)
    check(torch.log2, torch.arange(1, 9))


def test_nms_of_double_boxes():
    check(lambda boxes, scores: nms(boxes, scores, 0.5), _boxes(20, 2).double(),
          _scores(20, 2).double())


def test_remove_small_boxes_traced():
    # Traced, torch.where(keep) is the one-argument aten::where: nonzero as a tuple.
    model = as_module(lambda boxes: torchvision.ops.remove_small_boxes(boxes, 5.0))
    program = onnxport.export(model, (_boxes(30, 4),), dynamo=False, input_names=["boxes"],
                              dynamic_axes={"boxes": {0: "n"}})
    for boxes in (_boxes(30, 4), _boxes(45, 5)):
        assert_matches_eager(program, model, (boxes,))
    assert "NonZero" in op_types(program)


# -- the ops together: a small Faster R-CNN --------------------------------------------------
def _small_faster_rcnn():
    """Faster R-CNN on a two-level FPN over two convolutions: RPN (nms), batched_nms,
    MultiScaleRoIAlign (roi_align, log2 level mapping), remove_small_boxes, in ~10 s."""
    from torchvision.models.detection import FasterRCNN
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.ops import MultiScaleRoIAlign
    from torchvision.ops.feature_pyramid_network import FeaturePyramidNetwork

    class Backbone(torch.nn.Module):
        out_channels = 8

        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(3, 8, 3, 2, 1)
            self.conv2 = torch.nn.Conv2d(8, 8, 3, 2, 1)
            self.fpn = FeaturePyramidNetwork([8, 8], 8)

        def forward(self, x):
            first = torch.relu(self.conv1(x))
            return self.fpn({"0": first, "1": torch.relu(self.conv2(first))})

    torch.manual_seed(0)
    anchors = AnchorGenerator(((16,), (32,)), ((0.5, 1.0, 2.0),) * 2)
    return FasterRCNN(Backbone(), num_classes=4, min_size=64, max_size=64,
                      rpn_anchor_generator=anchors, box_roi_pool=MultiScaleRoIAlign(["0", "1"], 7, 2),
                      representation_size=32, box_score_thresh=0.0, rpn_pre_nms_top_n_test=100,
                      rpn_post_nms_top_n_test=50, box_detections_per_img=20).eval()


def test_small_faster_rcnn_traced():
    # Static: the traced transform bakes the example's resize in (dynamic image sizes fail at
    # capture, see benchmarks/detection_models.py).
    model = _small_faster_rcnn()
    image = torch.rand(3, 64, 64, generator=torch.Generator().manual_seed(0))
    program = onnxport.export(model, ([image],), dynamo=False)
    with torch.no_grad():
        expected = model([image])[0]
    actual = dict(zip(expected, program([image])))
    assert len(expected["scores"]) == 20  # the score threshold of 0 keeps every box
    # Scores differ by >1e-4 here: sorting by score aligns the detections of both runtimes.
    for result in (expected, actual):
        order = torch.argsort(result["scores"], descending=True)
        result.update({k: v[order] for k, v in result.items()})
    torch.testing.assert_close(actual["scores"], expected["scores"], rtol=1e-3, atol=1e-4)
    torch.testing.assert_close(actual["boxes"], expected["boxes"], rtol=1e-3, atol=1e-3)
    assert torch.equal(actual["labels"], expected["labels"])


# -- Mask and Keypoint R-CNN: torchvision scripts their paste and heatmap loops ------------
def _small_two_stage(kind):
    """Mask or Keypoint R-CNN on _small_faster_rcnn's backbone. Traced, the masks are pasted
    and the keypoints read by loops torchvision scripts (one iteration per detection): an ONNX
    Loop whose count is the number of detections."""
    from torchvision.models.detection import KeypointRCNN, MaskRCNN
    from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
    from torchvision.models.detection.keypoint_rcnn import (
        KeypointRCNNHeads, KeypointRCNNPredictor)
    from torchvision.models.detection.mask_rcnn import MaskRCNNHeads, MaskRCNNPredictor
    from torchvision.ops import MultiScaleRoIAlign

    faster = _small_faster_rcnn()  # seeds; its backbone, anchors and settings are reused
    pool = MultiScaleRoIAlign(["0", "1"], 7, 2)
    common = dict(min_size=64, max_size=64, rpn_anchor_generator=faster.rpn.anchor_generator,
                  box_roi_pool=pool, box_head=TwoMLPHead(8 * 7 * 7, 32), box_score_thresh=0.0,
                  rpn_pre_nms_top_n_test=100, rpn_post_nms_top_n_test=8,
                  # A low NMS threshold: the number of detections depends on the image.
                  box_nms_thresh=0.2, box_detections_per_img=100)
    if kind == "mask":
        return MaskRCNN(faster.backbone, box_predictor=FastRCNNPredictor(32, 4), mask_roi_pool=pool,
                        mask_head=MaskRCNNHeads(8, (8,), 1),
                        mask_predictor=MaskRCNNPredictor(8, 8, 4), **common).eval()
    return KeypointRCNN(faster.backbone, box_predictor=FastRCNNPredictor(32, 2),
                        keypoint_roi_pool=pool, keypoint_head=KeypointRCNNHeads(8, (8,)),
                        keypoint_predictor=KeypointRCNNPredictor(8, 3), **common).eval()


@pytest.mark.parametrize("kind", ["mask", "keypoint"])
def test_small_two_stage_rcnn_traced_pastes_in_a_loop(kind):
    model = _small_two_stage(kind)
    first = torch.rand(3, 64, 64, generator=torch.Generator().manual_seed(0))
    program = onnxport.export(model, ([first],), dynamo=False)
    assert "Loop" in op_types(program)
    counts = set()
    for seed in (0, 2):  # the same size (a static export), another number of detections
        image = torch.rand(3, 64, 64, generator=torch.Generator().manual_seed(seed))
        with torch.no_grad():
            expected = model([image])[0]
        actual = dict(zip(expected, program([image])))
        counts.add(len(expected["scores"]))
        # Scores differ here: sorting by score aligns the detections of both runtimes.
        for result in (expected, actual):
            order = torch.argsort(result["scores"], descending=True)
            result.update({k: v[order] for k, v in result.items()})
        assert torch.equal(actual["labels"], expected["labels"])
        for key in expected:
            if expected[key].dtype.is_floating_point:
                # Boxes and keypoints are in pixels.
                atol = 1e-3 if key in ("boxes", "keypoints") else 1e-4
                torch.testing.assert_close(actual[key], expected[key], rtol=1e-3, atol=atol)
    assert len(counts) == 2, counts


def test_roi_align_at_the_right_and_bottom_borders():
    """Keypoint R-CNN's pooler (14x14 bins, 2 samples per bin, a stride-16 level): boxes that
    reach, cross or lie past the right and bottom edges, where torch clamps a sample less than
    a pixel outside to the edge and zeroes one further out. (ONNX Runtime matches to 0.0.)"""
    rois = torch.tensor([[0, 647.9, 758.9, 778.9, 785.5], [0, 780.0, 790.0, 800.0, 800.0],
                         [0, -10.0, -10.0, 30.0, 799.9], [0, 795.0, 0.0, 812.0, 20.0],
                         [0, 0.0, 0.0, 800.0, 800.0], [0, 799.0, 799.0, 830.0, 801.0]])
    check(lambda x, rois: roi_align(x, rois, (14, 14), 1 / 16, 2, False),
          torch.randn(1, 4, 50, 50), rois)


# -- position-sensitive ROI ops: channel c * bins + bin feeds output bin `bin` of channel c ----
def _ps_input(channels=2, bins=12, size=(24, 20), seed=5):
    return torch.randn(2, channels * bins, *size, generator=torch.Generator().manual_seed(seed))


# Inside, across the borders, past the image, a point, and the whole image.
PS_ODD_ROIS = torch.tensor([[0, 1.0, 3.0, 5.0, 7.0], [0, -5.0, -3.0, 9.0, 11.0],
                            [1, 3.0, 3.0, 3.0, 3.0], [1, 15.0, 15.0, 25.0, 25.0],
                            [0, 40.0, 40.0, 60.0, 60.0], [0, 0.0, 0.0, 48.0, 40.0],
                            [1, -9.0, -9.0, -1.0, -1.0]])


@pytest.mark.parametrize("opset", [16, 18])
@pytest.mark.parametrize("sampling_ratio", [-1, 2])
def test_ps_roi_align(opset, sampling_ratio):
    from torchvision.ops import ps_roi_align

    k = torch.export.Dim("k", min=2, max=100)
    program = check(lambda x, rois: ps_roi_align(x, rois, (3, 4), 0.5, sampling_ratio),
                    _ps_input(), _rois(5, 0), dynamic_shapes=(None, {0: k}), opset=opset,
                    run_with=[(_ps_input(), PS_ODD_ROIS)])
    assert op_types(program).count("RoiAlign") == 1


def test_ps_roi_align_before_opset_16_is_refused():
    from torchvision.ops import ps_roi_align

    # RoiAlign's half_pixel mode (torch's sampling) comes with opset 16.
    with pytest.raises(onnxport.errors.OnnxExporterError, match="ps_roi_align"):
        check(lambda x, rois: ps_roi_align(x, rois, (3, 4), 0.5), _ps_input(), _rois(5, 0),
              opset=15)


@pytest.mark.parametrize("spatial_scale", [0.5, 1.0])
def test_ps_roi_pool(spatial_scale):
    from torchvision.ops import ps_roi_pool

    k = torch.export.Dim("k", min=2, max=100)
    # With scale 0.5 odd coordinates land on .5, where rounding modes differ; PS_ODD_ROIS
    # reach the last row and column, which torch's kernel never pools.
    check(lambda x, rois: ps_roi_pool(x, rois, (3, 4), spatial_scale), _ps_input(),
          _rois(5, 0), dynamic_shapes=(None, {0: k}), run_with=[(_ps_input(), PS_ODD_ROIS)])


def test_ps_roi_pool_traced_at_opset_13():
    from torchvision.ops import ps_roi_pool

    model = as_module(lambda x, rois: ps_roi_pool(x, rois, 2, 1.0))
    program = onnxport.export(model, (_ps_input(3, 4), PS_ODD_ROIS), dynamo=False,
                              opset_version=13)
    assert_matches_eager(program, model, (_ps_input(3, 4), PS_ODD_ROIS))


class _Deformable(torch.nn.Module):
    def __init__(self, groups, offset_groups, use_mask, **options):
        super().__init__()
        self.conv = torchvision.ops.DeformConv2d(4, 6, 3, groups=groups, **options)
        self.offset_groups, self.use_mask = offset_groups, use_mask

    def forward(self, x, offset, mask):
        return self.conv(x, offset, mask if self.use_mask else None)


def _deform_inputs(batch, height, width, offset_groups, stride=1, padding=1, dilation=1):
    generator = torch.Generator().manual_seed(height * 10 + width)
    out_h = (height + 2 * padding - dilation * 2 - 1) // stride + 1
    out_w = (width + 2 * padding - dilation * 2 - 1) // stride + 1
    x = torch.randn(batch, 4, height, width, generator=generator)
    # Offsets of up to 3 pixels: samples fall between pixels and outside the input.
    offset = torch.randn(batch, 2 * offset_groups * 9, out_h, out_w, generator=generator) * 3
    mask = torch.rand(batch, offset_groups * 9, out_h, out_w, generator=generator)
    return x, offset, mask


@pytest.mark.parametrize("dynamo", [None, False])
@pytest.mark.parametrize("groups,offset_groups,use_mask,options", [
    (1, 1, True, dict(padding=1)),
    (2, 2, False, dict(padding=2, stride=2, dilation=2, bias=False)),
])
def test_deform_conv2d_with_dynamic_batch_and_size(dynamo, groups, offset_groups, use_mask,
                                                   options):
    model = _Deformable(groups, offset_groups, use_mask, **options).eval()
    sizes = {k: options.get(k, 1) for k in ("stride", "padding", "dilation")}
    axes = {0: "n", 2: "h", 3: "w"}
    check(model, *_deform_inputs(1, 7, 6, offset_groups, **sizes), opset=19, dynamo=dynamo,
          input_names=["x", "offset", "mask"],
          dynamic_axes={"x": axes, "offset": axes, "mask": axes},
          run_with=[_deform_inputs(2, 9, 11, offset_groups, **sizes)])


def test_deform_conv2d_before_opset_19_names_the_opset_it_needs():
    model = _Deformable(1, 1, True, padding=1).eval()
    with pytest.raises(onnxport.errors.UnsupportedOpsError,
                       match="deform_conv2d.*translated from opset_version 19"):
        onnxport.export(model, _deform_inputs(1, 5, 5, 1), opset_version=18)


class _Pooled(torch.nn.Module):
    def __init__(self, pool):
        super().__init__()
        self.pool = pool

    def forward(self, x, rois):
        if self.pool:
            return roi_pool(x, rois, (3, 3), 0.5)
        return roi_align(x, rois, (3, 3), 0.5, 2, False)


@pytest.mark.parametrize("pool", [False, True], ids=["roi_align", "roi_pool"])
def test_traced_rois_keep_their_dynamic_axes(pool):
    # dynamo=False: torchvision's torch._assert(boxes.size(1) == 5) warned that the trace
    # kept a value, and the check at larger (random) sizes then fixed every dynamic axis.
    model = _Pooled(pool)
    with warnings.catch_warnings():
        warnings.simplefilter("error", onnxport.errors.DynamicDimensionFixedWarning)
        program = onnxport.export(model, (torch.randn(2, 3, 16, 16), _rois(4, 0)),
                                  dynamo=False, input_names=["x", "rois"],
                                  dynamic_axes={"x": [0, 2, 3], "rois": [0]})
    for x, rois in ((torch.randn(2, 3, 16, 16), _rois(4, 1)),
                    (torch.randn(3, 3, 20, 24), _rois(7, 2, batch=3))):
        assert_matches_eager(program, model, (x, rois))
