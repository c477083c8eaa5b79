"""Verification: run an exported model in ONNX Runtime and compare with PyTorch."""

from onnxport.verification.compare import VerificationInfo, compare_outputs, verify_program

__all__ = ["VerificationInfo", "compare_outputs", "verify_program"]
