"""The pass manager: runs rewrites in order, round after round, until a round changes nothing
(a fixed point), so that a rewrite another one enables later in the order is never missed."""

from __future__ import annotations

import contextvars
import warnings
from typing import Sequence

import onnx_ir as ir

from onnxport.verification.validity import check_structure

# Rounds before giving up (with a warning): the zoo's models need at most two.
MAX_ROUNDS = 8
# Whether each pass that changes the model is followed by a structure check that names it.
# An export runs its passes unchecked, its final check covering them (a walk of the model per
# pass was a twentieth of an export's time), and runs again checked only when that final check
# fails, to name the pass; passes run by other callers are checked.
CHECK_EACH_PASS: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "onnxport_check_each_pass", default=True)


class FixedPointManager(ir.passes.PassManager):
    """Run ``passes`` in order until a round changes nothing; reports whether any changed the
    model. A pass reruns only when the model changed since it last ran (the confirming round
    of an already optimized model costs one run of the passes before the last change); after
    each pass that changed it, the model must still be valid ONNX, or the error names the pass
    (unless :data:`CHECK_EACH_PASS` is off; the full checker runs once at the end of an export
    anyway). ``max_rounds=1`` runs the
    passes once, unconfirmed."""

    def __init__(self, passes: Sequence[ir.passes.PassBase], *, max_rounds: int = MAX_ROUNDS):
        super().__init__(passes, steps=max_rounds, early_stop=True)

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        changes = 0  # changes made so far: a pass reruns when there have been more since it ran
        seen = [-1] * len(self.passes)
        for _ in range(self.steps):
            before = changes
            for index, rewrite in enumerate(self.passes):
                if seen[index] == changes:
                    continue
                result = rewrite(model)
                model = result.model
                if result.modified:
                    if CHECK_EACH_PASS.get():
                        check_structure(model, f"the pass {type(rewrite).__name__}")
                    changes += 1
                    # Not marked as seen: a pass that left work for itself runs again.
                else:
                    seen[index] = changes
            if changes == before:
                return ir.passes.PassResult(model, changes > 0)
        if self.steps == 1:
            return ir.passes.PassResult(model, changes > 0)
        still = [type(p).__name__ for p, s in zip(self.passes, seen) if s != changes]
        warnings.warn(f"the passes reached no fixed point in {self.steps} rounds; still "
                      f"changing the model: {', '.join(still)}", RuntimeWarning, stacklevel=2)
        return ir.passes.PassResult(model, True)


class PassSequence(ir.passes.PassManager):
    """Run ``passes`` (fixed-point managers, a pass that must run once) once each, in order.
    Their errors come out as they are: onnx_ir's ``Sequential`` would wrap them in a
    ``PassError``, hiding the one that names the pass and what failed."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for stage in self.passes:
            result = stage(model)
            model = result.model
            modified = modified or result.modified
        return ir.passes.PassResult(model, modified)
