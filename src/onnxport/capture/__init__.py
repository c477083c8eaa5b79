"""Capture: turn a model and example inputs into a graph of ATen calls."""

from onnxport.capture.torch_export import CapturedProgram, capture_torch_export, parameter_names

__all__ = ["CapturedProgram", "capture_torch_export", "parameter_names"]
