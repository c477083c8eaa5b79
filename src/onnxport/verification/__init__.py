"""Verification: run an exported model in ONNX Runtime and compare with PyTorch, as a whole
(``verify_program``) or part by part (``find_mismatch``)."""

from onnxport.verification.compare import VerificationInfo, compare_outputs, verify_program
from onnxport.verification.find_mismatch import (GraphInfo, VerificationOptions, disable_log,
                                                 enable_log, find_mismatch, first_divergence)

__all__ = ["GraphInfo", "VerificationInfo", "VerificationOptions", "compare_outputs",
           "disable_log", "enable_log", "find_mismatch", "first_divergence", "verify_program"]
