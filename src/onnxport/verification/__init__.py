"""Verification: run an exported model in ONNX Runtime and compare with PyTorch, as a whole
(``verify_program``) or part by part (``find_mismatch``).

The modules of this package are the verification stage and import no front door; this public
module (torch.onnx's ``verification``) adds ``find_mismatch``, a front door that runs the
export pipeline itself (with ``onnxport.export``'s defaults) before comparing part by part."""

from __future__ import annotations

from typing import Any

from onnxport.verification.compare import VerificationInfo, compare_outputs, verify_program
from onnxport.verification.find_mismatch import (GraphInfo, VerificationOptions, checked_options,
                                                 disable_log, enable_log, first_divergence,
                                                 mismatch_tree)

__all__ = ["GraphInfo", "VerificationInfo", "VerificationOptions", "compare_outputs",
           "disable_log", "enable_log", "find_mismatch", "first_divergence", "verify_program"]


def find_mismatch(model, input_args, do_constant_folding: bool = True, training: Any = None,
                  opset_version: int | None = None, keep_initializers_as_inputs: bool = True,
                  verbose: bool = False, options: VerificationOptions | None = None) -> GraphInfo:
    """Find the smallest parts of ``model``'s exported graph whose ONNX translation disagrees
    with PyTorch; prints what it found and returns the tree as a ``GraphInfo``.

    Experimental, as in ``torch.onnx``. The model is exported once (unoptimized, so that every
    call keeps its ONNX value); each part is then run alone in ONNX Runtime on PyTorch's values
    of its inputs, so that a wrong translation is found even after an earlier one."""
    import onnxport
    from onnxport import _arguments, pipeline

    options = checked_options(options)
    args, kwargs = _arguments.check_args(input_args, None)
    program = pipeline.run(_arguments.plan_export(_arguments.bound_options(
        onnxport.export, model, args, kwargs=kwargs, opset_version=opset_version,
        do_constant_folding=do_constant_folding, training=training,
        keep_initializers_as_inputs=keep_initializers_as_inputs,
        verbose=verbose, optimize=False), {}))
    return mismatch_tree(program, args, kwargs, options)
