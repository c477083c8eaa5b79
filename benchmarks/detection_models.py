"""Export torchvision's detection models (random weights) with onnxport, run them in ONNX Runtime
and compare with eager on the example image and on an image of another size; prints a table.
Detections are compared tie-aware: the scores sorted, and the detections matched as a set
("ok, N at tied scores differ": only detections whose score ties another one differ).
Keypoint R-CNN resizes each keypoint heatmap to ceil(box width/height) in the resized image, a
step function: a box a float rounding from a whole size (eager 131.0022 px wide, ONNX Runtime
130.9984 on the 320x320 image) gets a heatmap one pixel narrower and keypoints several pixels
apart, though eager given ORT's box computes ORT's keypoints to 3e-5 px. Such a detection is
reported ("N keypoint heatmaps at a ceil(box size) boundary") when all its other fields match.
Mask R-CNN pastes each mask into its box truncated to whole pixels, the same kind of step: a
detection whose pasted box differs is reported ("N masks at an int(box) boundary").

    PYTHONPATH=src python benchmarks/detection_models.py [--models ssdlite,retinanet] [--paths tracing-static,fallback-static,tracing,dynamo+fallback] [--second-size 400x300]
"""

from __future__ import annotations

import argparse
import time
import traceback

import torch

MODELS = {
    "fasterrcnn": "fasterrcnn_mobilenet_v3_large_320_fpn",
    "ssdlite": "ssdlite320_mobilenet_v3_large",
    "retinanet": "retinanet_resnet50_fpn",
    "maskrcnn": "maskrcnn_resnet50_fpn",
    "keypointrcnn": "keypointrcnn_resnet50_fpn",
}
# The export call of each path: the TorchScript path (tracing), and the default chain with
# fallback to it; static (the second image size cannot run) or with the image's height and
# width dynamic.
_HEIGHT_WIDTH = {1: "height", 2: "width"}
PATHS = {
    "tracing-static": dict(dynamo=False),
    "fallback-static": dict(fallback=True),
    "tracing": dict(dynamo=False, input_names=["image"], dynamic_axes={"image": _HEIGHT_WIDTH}),
    "dynamo+fallback": dict(fallback=True, dynamic_shapes=([_HEIGHT_WIDTH],)),
}


VERBOSE = False
HEAD_STD = 0.05
SECOND_SIZE = (256, 352)  # height, width


def build(name: str) -> torch.nn.Module:
    import torchvision

    torch.manual_seed(0)
    kwargs = dict(weights=None, weights_backbone=None)
    # Random heads give scores near 0.5 or below the default thresholds; keeping every box
    # makes the comparison see NMS and the postprocessing at work.
    if name == "retinanet":
        kwargs["score_thresh"] = 0.0
    elif name != "ssdlite":
        kwargs["box_score_thresh"] = 0.0
    model = getattr(torchvision.models.detection, MODELS[name])(**kwargs).eval()
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        # Spread the heads' weights so that scores differ (no ties for NMS to break); a
        # larger spread saturates the ResNet-50 models' scores (every score 1.0, or one box).
        std = HEAD_STD if name in ("fasterrcnn", "ssdlite") else HEAD_STD / 5
        for module_name, parameter in model.named_parameters():
            if "head" in module_name or "predictor" in module_name:
                parameter.normal_(0, std, generator=generator)
        # Fresh BatchNorm statistics (0 and 1) make the MobileNet backbones' features nearly
        # constant over the image, and their scores tie by the hundred. (The ResNet-50
        # models lose every detection or saturate with this.)
        for module in model.modules() if name in ("fasterrcnn", "ssdlite") else ():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.normal_(0, 0.1, generator=generator)
                module.running_var.uniform_(0.5, 1.5, generator=generator)
                module.weight.data.uniform_(0.5, 1.5, generator=generator)
                module.bias.data.normal_(0, 0.1, generator=generator)
        if name == "ssdlite":
            # Even so, SSDlite's randomly initialised MobileNet (std 0.03) loses the image: its
            # features vary by 0.1% over the positions, so scores tie to 1e-9 and float
            # rounding alone reorders the candidates that top-k and NMS pick (266 of 300
            # neighbouring scores within 1e-5). He-initialised convolutions keep the image.
            for module in model.backbone.modules():
                if isinstance(module, torch.nn.Conv2d):
                    fan_in = module.weight[0].numel()
                    module.weight.normal_(0, (2.0 / fan_in) ** 0.5, generator=generator)
    return model


def image(size: tuple[int, int], seed: int) -> torch.Tensor:
    return torch.rand(3, *size, generator=torch.Generator().manual_seed(seed))


def _unmatched(expected: dict, actual: dict, heatmap_scale=None) -> tuple[int, int, int, float]:
    """How many of eager's detections have no ONNX detection with the same label (and mask,
    keypoints...) within tolerance: random heads give scores that tie to 1e-6, which the two
    runtimes may order differently, so detections are matched as a set, not row by row.
    Returns (unmatched, unmatched whose score ties another, unmatched only in keypoints at a
    heatmap-size boundary or in a mask at a paste boundary, largest difference of a matched
    pair)."""
    free = list(range(len(actual["scores"])))
    missing = tied = boundary = 0
    diff = 0.0
    scores = expected["scores"]
    for i in range(len(scores)):
        for position, j in enumerate(free):
            if all(_close(expected[k][i], actual[k][j], k) for k in expected):
                del free[position]
                diff = max([diff] + [float((expected[k][i] - actual[k][j]).abs().max())
                                     for k in expected if expected[k].dtype.is_floating_point
                                     and expected[k][i].numel()])
                break
        else:
            position = _at_heatmap_boundary(expected, actual, i, free, heatmap_scale)
            if position is None:
                position = _at_mask_boundary(expected, actual, i, free)
            if position is not None:
                del free[position]
                boundary += 1
                continue
            missing += 1
            tied += int((scores == scores[i]).sum() > 1)
    return missing, tied, boundary, diff


def _at_heatmap_boundary(expected, actual, i, free, heatmap_scale):
    """The position in `free` of an ONNX detection equal to eager's i-th in all but its
    keypoints, whose box is so close to a whole number of pixels wide or high (in the frame the
    model resized the image to) that the two runtimes' boxes, a rounding apart, round up to
    different heatmap sizes: torchvision resizes each keypoint heatmap to ceil(box size), so the
    argmax moves by pixels. (Checked on keypointrcnn at 320x320: eager's heatmaps_to_keypoints
    given ORT's box gives ORT's keypoints to 3e-5 px.)"""
    if heatmap_scale is None or "keypoints" not in expected:
        return None
    others = [k for k in expected if not k.startswith("keypoints")]
    for position, j in enumerate(free):
        if not all(_close(expected[k][i], actual[k][j], k) for k in others):
            continue
        sizes = [(box[2:] - box[:2]) * heatmap_scale
                 for box in (expected["boxes"][i], actual["boxes"][j])]
        low, high = torch.minimum(*sizes) - 1e-3, torch.maximum(*sizes) + 1e-3
        if bool((torch.floor(high) >= torch.ceil(low)).any()):  # a whole number in between
            return position
    return None


# Mask R-CNN's mask head predicts 28x28 masks, pasted with one pixel of padding.
_MASK_SIZE, _MASK_PADDING = 28, 1


def _at_mask_boundary(expected, actual, i, free):
    """The position in `free` of an ONNX detection equal to eager's i-th in all but its mask,
    whose box, expanded for pasting, truncates to another whole pixel: torchvision pastes
    each mask into int64(expand_boxes(box)), so boxes a rounding apart (eager's x0 71.99989,
    ORT's 72.00025, 4e-4 px, on maskrcnn at 256x352) paste masks one pixel apart and their
    bilinear resizes differ by up to 0.09."""
    if "masks" not in expected:
        return None
    from torchvision.models.detection.roi_heads import expand_boxes

    scale = (_MASK_SIZE + 2 * _MASK_PADDING) / _MASK_SIZE
    others = [k for k in expected if k != "masks"]
    for position, j in enumerate(free):
        if not all(_close(expected[k][i], actual[k][j], k) for k in others):
            continue
        pasted = [expand_boxes(box[None], scale).to(torch.int64)
                  for box in (expected["boxes"][i], actual["boxes"][j])]
        if not torch.equal(*pasted):
            return position
    return None


def _close(e: torch.Tensor, a: torch.Tensor, key: str) -> bool:
    if e.dtype.is_floating_point:
        # Boxes and keypoints are in pixels; scores and masks are probabilities.
        atol = 1e-2 if key in ("boxes", "keypoints") else 1e-4
        return bool(torch.allclose(a, e, rtol=1e-3, atol=atol))
    return torch.equal(a, e)


def _resize_scale(model, img) -> torch.Tensor:
    """(x, y) scale from the image to the frame the model's transform resized it to, where
    the R-CNN heads work."""
    with torch.no_grad():
        height, width = model.transform([img])[0].image_sizes[0]
    return torch.tensor([width / img.shape[-1], height / img.shape[-2]])


def compare(program, model, img) -> str:
    with torch.no_grad():
        expected = model([img])[0]
    keys = list(expected)
    actual_list = program([img])
    if len(actual_list) != len(keys):
        return f"{len(actual_list)} outputs, eager {len(keys)}"
    actual = dict(zip(keys, actual_list))
    n_e, n_a = len(expected["scores"]), len(actual["scores"])
    if n_e != n_a:
        return f"{n_a} detections, eager {n_e}"
    # Sorted, the scores compare whatever order ties put them in.
    score_diff = float((torch.sort(expected["scores"]).values
                        - torch.sort(actual["scores"]).values).abs().max()) if n_e else 0.0
    missing, tied, boundary, diff = _unmatched(expected, actual, _resize_scale(model, img))
    summary = f"{n_e} det, sorted scores max|diff| {score_diff:.1e}, matched max|diff| {diff:.1e}"
    if score_diff > 1e-4 + 1e-3 * float(expected["scores"].abs().max()):
        return f"MISMATCH: scores ({summary})"
    if missing > tied:
        return f"MISMATCH: {missing} detections unmatched ({summary})"
    notes = []
    if missing:
        # Exactly tied scores make the choice among boxes arbitrary in both runtimes.
        notes.append(f"{missing} at tied scores differ")
    if boundary:
        what = "masks at an int(box) boundary" if "masks" in expected else \
            "keypoint heatmaps at a ceil(box size) boundary"
        notes.append(f"{boundary} {what}")
    return f"ok, {', '.join(notes)} ({summary})" if notes else f"ok ({summary})"


def _first_line(error: Exception) -> str:
    missing = getattr(error, "missing", None)  # UnsupportedOpsError: name the ops
    if missing:
        return f"{type(error).__name__}: " + ", ".join(sorted(missing))
    return f"{type(error).__name__}: " + (str(error).strip().splitlines() or [""])[0][:100]


def run(name: str, path: str) -> list[str]:
    import onnxport

    model = build(name)
    first, second = image((320, 320), 1), image(SECOND_SIZE, 2)
    start = time.perf_counter()
    try:
        program = onnxport.export(model, ([first],), **PATHS[path])
    except Exception as error:  # a table row per failure, not a crash
        if VERBOSE:
            print(f"--- {name}, {path}:\n{error}\n---", flush=True)
        return [name, path, f"no: {_first_line(error)}", "-", "-"]
    seconds = f"{time.perf_counter() - start:.0f} s"
    row = [name, path, f"yes ({seconds})"]
    for img in (first, second):
        try:
            row.append(compare(program, model, img))
        except Exception as error:
            row.append(f"fails: {_first_line(error)}")
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument("--second-size", default="256x352",
                        help="height x width of the second image the exported file runs on")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    global VERBOSE, SECOND_SIZE
    VERBOSE = args.verbose
    SECOND_SIZE = tuple(int(n) for n in args.second_size.lower().split("x"))
    rows = [["model", "path", "exports", "320x320 matches", f"{args.second_size} matches"]]
    for name in args.models.split(","):
        for path in args.paths.split(","):
            try:
                rows.append(run(name, path))
            except Exception:
                if args.verbose:
                    traceback.print_exc()
                rows.append([name, path, "crashed", "-", "-"])
            print(" | ".join(rows[-1]), flush=True)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(" | ".join(c.ljust(w) for c, w in zip(row, widths)))


if __name__ == "__main__":
    main()
