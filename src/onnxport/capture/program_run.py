"""A captured program run in PyTorch on real tensors, optionally checking that each node's
size is the one its recorded symbolic shape gives there: translation builds on those shapes
(Reshape targets, Expand sizes), and torch simplifies them within the sizes its guards allow."""

from __future__ import annotations

import contextlib
import io

import torch

from onnxport.capture.common import repeated_to


def run_program(program: torch.export.ExportedProgram, inputs: tuple,
                shapes: bool = False) -> list:
    """The user outputs of ``program``'s graph run in PyTorch on its tensor ``inputs``, its
    weights and constants given from the program (``ExportedProgram.module()`` cannot unlift
    the constants a traced program lifts). ``shapes``: run node by node, raising
    :class:`RecordedShapeDiffers` where a node's size is not the one its recorded symbolic
    shape gives at these sizes (torch simplified it within a bounded range: ``x.chunk(3)[0]``
    of at most 3 rows has 1, which translation bakes into a Reshape; the program itself,
    run eagerly, still answers right)."""
    from torch.export.graph_signature import InputKind, OutputKind

    given = iter(inputs)
    values = []
    for spec in program.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            values.append(next(given))
        elif spec.target in program.state_dict:
            values.append(program.state_dict[spec.target])
        else:
            values.append(program.constants[spec.target])
    # (A failure raises to the caller, which takes it as an answer: FX's own report of it,
    # its generated code printed to stderr, is not for the user.)
    with contextlib.redirect_stderr(io.StringIO()):
        outputs = _ShapeCheckingRun(program.graph_module).run(*values) if shapes else \
            program.graph_module(*values)
    outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    return [value for value, spec in zip(outputs, program.graph_signature.output_specs)
            if spec.kind == OutputKind.USER_OUTPUT and isinstance(value, torch.Tensor)]


class RecordedShapeDiffers(Exception):
    """A node of the program ran to another size than its recorded shape gives."""


class _ShapeCheckingRun(torch.fx.Interpreter):
    """The graph run node by node, each tensor result's size compared with the one its
    ``meta["val"]`` gives once the dynamic dims of the inputs are bound to this run's sizes
    (dims of other symbols, sizes read from values, are not compared; nor are results no
    node reads: a split's pieces the model leaves, whose count translation checks where
    the last one is read)."""

    def run(self, *values):
        self.sizes = {}
        for node, value in zip((n for n in self.graph.nodes if n.op == "placeholder"), values):
            recorded = getattr(node.meta.get("val"), "shape", ())
            for size, actual in zip(recorded, getattr(value, "shape", ())):
                if isinstance(size, torch.SymInt) and size.node.expr.is_Symbol:
                    self.sizes.setdefault(size.node.expr, actual)
        return super().run(*values, enable_io_processing=False)

    def run_node(self, node: torch.fx.Node):
        value = super().run_node(node)
        recorded = node.meta.get("val")
        if node.users and isinstance(value, torch.Tensor) and \
                isinstance(recorded, torch.Tensor) and recorded.dim() == value.dim():
            for axis, (size, actual) in enumerate(zip(recorded.shape, value.shape)):
                expected = self._evaluated(size)
                if expected is not None and expected != actual:
                    raise RecordedShapeDiffers(
                        f"{node.name} has size {actual} on axis {axis} where its recorded "
                        f"shape gives {expected} ({size})")
        return value

    def _evaluated(self, size) -> int | None:
        if not isinstance(size, torch.SymInt):
            return int(size)
        expr = size.node.expr
        if not expr.free_symbols <= self.sizes.keys():
            return None
        try:
            return int(expr.xreplace(self.sizes))
        except TypeError:
            return None


def recorded_shapes_hold(program: torch.export.ExportedProgram, inputs: tuple,
                         position: int, axis: int, size: int) -> bool:
    """Whether ``program``, its user ``inputs`` (tensors, the example) grown to ``size`` along
    ``axis`` of input ``position`` (their values repeated), runs to the sizes its recorded
    shapes give (False where it fails: nothing then tells that they hold)."""
    grown = list(inputs)
    try:
        grown[position] = repeated_to(grown[position], axis, size)
        with torch.no_grad():
            run_program(program, tuple(grown), shapes=True)
    except Exception:  # noqa: BLE001 - a recorded shape differs, or the run fails there
        return False
    return True
