"""nn.MultiheadAttention and nn.TransformerEncoder/Layer run fused inference kernels
(``_native_multi_head_attention``, ``_transformer_encoder_layer_fwd``, nested tensors) when
gradients are off, which an export under ``torch.no_grad()`` or ``torch.inference_mode()``
is: the tracer records that one call, which has no ONNX translation. While tracing, their
fast path is off (torch.backends.mha), so that the modules run their composed ops as they do
with gradients on."""

from __future__ import annotations

import contextlib
from typing import Iterator

from torch.backends import mha


@contextlib.contextmanager
def fast_path_off() -> Iterator[None]:
    enabled = mha.get_fastpath_enabled()
    mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        mha.set_fastpath_enabled(enabled)


# The fused inference kernels the fast paths call, and the nested tensors they make.
_FUSED = {"aten::_native_multi_head_attention", "aten::_transformer_encoder_layer_fwd",
          "aten::_nested_tensor_from_mask", "prim::to_padded_tensor",
          "aten::to_padded_tensor"}


def fast_path_off_in(graph, block=None) -> bool:
    """The same for a graph with scripted code: scripted, ``get_fastpath_enabled()`` is the
    constant True, and the branch into the fused kernels hangs on what only a run knows
    (``torch.is_grad_enabled()``, ``torch.is_autocast_enabled()``), its list of device checks
    failing the conversion (a scripted nn.TransformerEncoder with batch_first). The condition
    of each branch that calls a fused kernel itself becomes the constant that does not take
    it: where scripted code returns from there, the flag that says it returned is that
    condition, so the code after the branch runs, as with the fast path off. Whether there
    was one."""
    found = False
    for node in list((graph.block() if block is None else block).nodes()):
        for inner in node.blocks():
            found = fast_path_off_in(graph, inner) or found
        if node.kind() != "prim::If":
            continue
        calls = [any(n.kind() in _FUSED for n in inner.nodes()) for inner in node.blocks()]
        if calls.count(True) == 1:
            with graph.insert_point_guard(node):
                node.inputsAt(0).replaceAllUsesWith(graph.insertConstant(not calls[0]))
            found = True
    return found
