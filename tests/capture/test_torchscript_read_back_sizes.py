"""dynamo=False with dynamic axes on models that compute sizes with tensor ops and read them
back as numbers (the tracer keeps sizes as 0-d tensors; torchvision's detection transform,
anchors and postprocessing do this): the sizes stay computed from the input at run time."""

import warnings

import pytest
import torch

import onnxport
from onnxport.errors import TracingWarning

_HEIGHT_WIDTH = {2: "height", 3: "width"}


def _close(actual, expected):
    torch.testing.assert_close(actual, expected, rtol=1e-3, atol=1e-4)


class HalfSize(torch.nn.Module):
    def forward(self, x):
        # When tracing, interpolate computes the output size as floor(size * 0.5) in float
        # tensors and reads it back as an int.
        return torch.nn.functional.interpolate(x, scale_factor=0.5, recompute_scale_factor=True)


def test_an_interpolate_size_computed_with_tensor_ops_follows_the_input():
    model = HalfSize()
    program = onnxport.export(model, (torch.randn(1, 2, 8, 6),), dynamo=False,
                              input_names=["x"], dynamic_axes={"x": _HEIGHT_WIDTH})
    for size in [(8, 6), (13, 10), (4, 22)]:
        x = torch.randn(1, 2, *size)
        _close(program(x)[0], model(x))


class HalfSizePlusGrid(torch.nn.Module):
    """Adds a fixed 4x3 grid to the halved image: broadcasting needs the halved size to be
    exactly 4x3, so it cannot follow the input."""

    def __init__(self):
        super().__init__()
        self.register_buffer("grid", torch.arange(12.0).reshape(1, 1, 4, 3))

    def forward(self, x):
        half = torch.nn.functional.interpolate(x, scale_factor=0.5, recompute_scale_factor=True)
        return half + self.grid


def test_a_read_back_size_that_an_op_fixes_is_named_in_a_warning():
    x = torch.randn(1, 2, 8, 6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = onnxport.export(HalfSizePlusGrid(), (x,), dynamo=False, input_names=["x"],
                                  dynamic_axes={"x": _HEIGHT_WIDTH})
    fixed = sorted(str(w.message) for w in caught if issubclass(w.category, TracingWarning)
                   and "was fixed to this example's value" in str(w.message))
    # Height and width, each named by where it is computed, its value, and the op and line
    # that fixed it.
    assert len(fixed) == 2, fixed
    for message, value in zip(fixed, (3, 4)):
        assert "in interpolate" in message and f"value {value} by aten::add.Tensor" in message
        assert "test_torchscript_read_back_sizes.py" in message and "return half + self.grid" \
            not in message  # (the line number, not the code, is what the stack keeps)
    _close(program(x)[0], HalfSizePlusGrid()(x))


def _small_faster_rcnn():
    """torchvision's Faster R-CNN with a two-convolution backbone: its transform (resize by a
    scale computed from the image's size, padding to a multiple of 32), anchor generator, RPN,
    RoI heads and postprocessing, in a graph a tenth the size of the MobileNet model's."""
    from torchvision.models.detection import FasterRCNN
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
    from torchvision.ops import MultiScaleRoIAlign

    torch.manual_seed(0)
    backbone = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=4, padding=1),
                                   torch.nn.ReLU(), torch.nn.Conv2d(8, 16, 3, stride=2, padding=1))
    backbone.out_channels = 16
    return FasterRCNN(
        backbone, min_size=160, max_size=320, box_score_thresh=0.0,
        rpn_anchor_generator=AnchorGenerator(((32, 64),), ((0.5, 1.0, 2.0),)),
        rpn_pre_nms_top_n_test=200, rpn_post_nms_top_n_test=50, box_detections_per_img=30,
        box_roi_pool=MultiScaleRoIAlign(["0"], 7, 2),
        box_head=TwoMLPHead(16 * 7 * 7, 32), box_predictor=FastRCNNPredictor(32, 3)).eval()


def _same_detections(actual, expected):
    """Random heads give near-tied scores, whose order the two runtimes may break
    differently: the scores are compared sorted, each detection by its nearest box."""
    boxes, labels, scores = actual  # the order of the dict torchvision returns
    assert len(scores) == len(expected["scores"])
    _close(torch.sort(scores).values, torch.sort(expected["scores"]).values)
    for box, score, label in zip(expected["boxes"], expected["scores"], expected["labels"]):
        nearest = int((boxes - box).abs().amax(dim=1).argmin())
        # Boxes are in pixels of images of 100-300 pixels.
        torch.testing.assert_close(boxes[nearest], box, rtol=1e-3, atol=1e-2)
        # (Labels as ints: a newer pytest's approx refuses tensors inside a tuple.)
        assert int(labels[nearest]) == int(label)
        assert float(scores[nearest]) == pytest.approx(float(score), rel=1e-3, abs=1e-4)


def test_faster_rcnn_exported_at_one_size_runs_at_others():
    pytest.importorskip("torchvision")
    model = _small_faster_rcnn()
    generator = torch.Generator().manual_seed(1)
    image = torch.rand(3, 160, 160, generator=generator)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = onnxport.export(model, ([image],), dynamo=False, input_names=["image"],
                                  dynamic_axes={"image": {1: "height", 2: "width"}})
    # The channels' padding (3 - 3) is read back too, and fixed to 0 by the convolution: no
    # warning, since it is 0 at every image size.
    assert not [w for w in caught if "was fixed to this example's value" in str(w.message)]
    # 128x176 is resized by 1.25 to 160x220 and padded to 160x224; 200x150 by 16/15.
    for size in [(160, 160), (128, 176), (200, 150)]:
        image = torch.rand(3, *size, generator=generator)
        with torch.no_grad():
            expected = model([image])[0]
        assert len(expected["scores"]) > 10  # detections to compare
        _same_detections(program([image]), expected)


def test_faster_rcnn_without_dynamic_axes_fixes_its_sizes_and_matches():
    # Without dynamic axes the read-back sizes take the static path of capture (fixed to the
    # example's values when propagation cannot follow them), which the scripted batched NMS
    # must not break.
    pytest.importorskip("torchvision")
    model = _small_faster_rcnn()
    image = torch.rand(3, 128, 176, generator=torch.Generator().manual_seed(2))
    program = onnxport.export(model, ([image],), dynamo=False)
    with torch.no_grad():
        expected = model([image])[0]
    _same_detections(program([image]), expected)


class _SplitOfAReadBackSize(torch.nn.Module):
    def forward(self, x, y):
        return x.reshape(y.size(0), -1).split(2)[0]


@pytest.mark.parametrize("dynamo", [None, False])
def test_a_split_of_an_axis_sized_by_a_read_back_size_stays_dynamic(dynamo):
    # The fake run's guard on the number of pieces (2 at the example) counted as fixing the
    # dynamic dims, and torch.export, given the graph instead, could not keep the read-back
    # size: dynamo=False refused the model. The first piece is right at every size.
    model = _SplitOfAReadBackSize()
    program = onnxport.export(model, (torch.randn(6, 4), torch.randn(3)), dynamo=dynamo,
                              input_names=["x", "y"],
                              dynamic_axes={"x": {0: "a"}, "y": {0: "n"}})
    for a, n in ((6, 3), (10, 5), (8, 2)):
        x, y = torch.randn(a, 4), torch.randn(n)
        torch.testing.assert_close(program(x, y)[0], model(x, y), rtol=1e-3, atol=1e-4)


class _ProposalsOfFeatures(torch.nn.Module):
    """torchvision's region proposal network on a dict of feature maps (its anchors, top-k
    and batched NMS read sizes back from tensors)."""

    def __init__(self):
        super().__init__()
        from torchvision.models.detection.rpn import (AnchorGenerator, RegionProposalNetwork,
                                                      RPNHead)

        torch.manual_seed(0)
        anchors = AnchorGenerator(((32,), (128,)), ((0.5, 1.0, 2.0),) * 2)
        head = RPNHead(4, 3)
        with torch.no_grad():  # (untied scores: torchvision's init makes many equal)
            for parameter in head.parameters():
                parameter.normal_(0, 0.1)
            head.conv[0][0].weight.uniform_(0, 0.1)  # (no position ReLU zeroes whole)
        self.rpn = RegionProposalNetwork(anchors, head, 0.7, 0.3, 256, 0.5,
                                         dict(training=100, testing=100),
                                         dict(training=100, testing=100), 0.7)

    def forward(self, images, features: dict[str, torch.Tensor]):
        from torchvision.models.detection.image_list import ImageList

        sizes = [(image.shape[-1], image.shape[-2]) for image in images]
        return self.rpn(ImageList(images, sizes), features)[0]


def _images_and_features(size, generator):
    images = torch.rand(2, 3, size, size, generator=generator)
    return images, {name: torch.rand(2, 4, size // step, size // step, generator=generator)
                    for name, step in (("0", 8), ("1", 64))}


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_region_proposals_with_every_axis_named_dynamic(dynamo):
    # Every axis of every input named dynamic, as a test suite does: the channels meet the
    # head's weights and the images' batch a Python loop over them, both fixed, with a
    # warning; the rest stay dynamic, the last level's too, 1x1 in the example. dynamo=False
    # refused ("computes sizes with tensor ops and reads them back"), torch.export failing
    # on the NMS's read back numel.
    pytest.importorskip("torchvision")
    model = _ProposalsOfFeatures().eval()
    generator = torch.Generator().manual_seed(0)
    images, features = _images_and_features(64, generator)
    names = ["images", "f0", "f1"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = onnxport.export(model, (images, features, {}), dynamo=dynamo,
                                  input_names=names, opset_version=14,
                                  dynamic_axes={name: [0, 1, 2, 3] for name in names})
    fixed = [str(w.message) for w in caught if "fixed to 4" in str(w.message)]
    assert fixed, [str(w.message) for w in caught]
    for size in (64, 128):
        images, features = _images_and_features(size, generator)
        expected = model(images, features)
        actual = program(images, features)
        assert len(actual) == len(expected) == 2
        for a, e in zip(actual, expected):
            assert a.shape == e.shape and a.shape[0] > 30
            _close(a, e)


class _NarrowFromComputedStarts(torch.nn.Module):
    def forward(self, x, y):
        half = x.size(1) // 2
        return (torch.narrow(x, -1, x.size(1) - 2, 2), x.narrow(1, half, half),
                x.narrow(0, y.size(0), 2))


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_narrow_from_a_start_computed_from_sizes(dynamo):
    # Traced, the start is a tensor (narrow.Tensor reads it inside the op): on dynamo=False
    # torch.export failed ("Pending unbacked symbols"), or the size was refused as read back.
    model = _NarrowFromComputedStarts()
    x, y = torch.randn(6, 6), torch.randn(2, 3)
    program = onnxport.export(model, (x, y), dynamo=dynamo, input_names=["x", "y"],
                              dynamic_axes={"x": [0, 1], "y": [0, 1]})
    for inputs in ((x, y), (torch.randn(7, 9), torch.randn(3, 3)),
                   (torch.randn(4, 4), torch.randn(1, 2))):
        for actual, expected in zip(program(*inputs), model(*inputs)):
            torch.testing.assert_close(actual, expected)
