"""Dropout: what ``export(training=TrainingMode.TRAINING)`` leaves in the graph (in eval mode
torch.export drops it). ONNX's Dropout takes the training flag as an input since opset 12."""

from __future__ import annotations

from onnxport.translate.registry import translates


def _dropout(g, input, p, train):
    if not train or p == 0:
        return input, None  # no node: an Identity stayed in every eval-mode CNN
    ratio = g.const(float(p), input.dtype)
    output, mask = g.op("Dropout", input, ratio, g.const(True), outputs=2)
    return output, mask


@translates("aten::dropout", "aten::feature_dropout", since_opset=12)
def dropout(g, input, p=0.5, train=True):
    """dropout(Tensor input, float p, bool train) -> Tensor"""
    return _dropout(g, input, p, train)[0]


@translates("aten::native_dropout", since_opset=12)
def native_dropout(g, input, p, train=None):
    """native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor)"""
    output, mask = _dropout(g, input, p, train is not False)
    if mask is None:
        mask = g.op("Expand", g.const(True), g.op("Shape", input))
    return output, mask
