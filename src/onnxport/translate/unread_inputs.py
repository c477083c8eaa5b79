"""The user inputs the graph never reads leave it, as under torch.onnx's TorchScript exporter: an
argument the model ignores, or one whose only use was its static size (folded to a constant),
is no input of the file (code calling it feeds only the inputs kept, the way torch's exporter
tests feed ``remained_onnx_input_idx``). Number arguments stay: they stand in their places for
the calling convention (``number_inputs``). The dynamo exporters keep every input."""

from __future__ import annotations

from typing import Sequence

import onnx_ir as ir


def drop_unread_inputs(model: ir.Model, user_inputs: int, kept: Sequence[str] = ()) -> list[int]:
    """Remove the graph's first ``user_inputs`` inputs that no node reads and no output is,
    except those named in ``kept``; return the positions removed (among those inputs)."""
    graph = model.graph
    outputs = set(graph.outputs)
    dropped = [k for k, value in enumerate(graph.inputs[:user_inputs])
               if value.name not in kept and not value.uses() and value not in outputs
               and not value.is_initializer()]
    for k in reversed(dropped):
        graph.inputs.pop(k)
    return dropped


def without(items: Sequence, positions: Sequence[int]) -> list:
    """``items`` less those at ``positions``."""
    gone = set(positions)
    return [item for k, item in enumerate(items) if k not in gone]
