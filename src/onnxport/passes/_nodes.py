"""Small readers of ONNX nodes that several passes share."""

from __future__ import annotations

import onnx_ir as ir


def perm(node: ir.Node) -> list[int] | None:
    """A Transpose's perm attribute, None when it has none (reverse all axes)."""
    attr = node.attributes.get("perm")
    return list(attr.value) if attr is not None else None
