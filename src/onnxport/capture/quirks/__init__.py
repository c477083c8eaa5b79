"""Quirks of particular models and modules that capture works around, one module each:

  hf_cache.py            transformers' KV cache classes as pytrees: flat tensors, named by layer
  transformer_masks.py   nn.Transformer's check of its mask by value: the caller's hint instead
  recurrent_shapes.py    LSTM/GRU/RNN run by shape on fake tensors: a dynamic sequence axis
  packed_sequences.py    pack_padded_sequence -> RNN -> pad_packed_sequence as one padded call
  quantized_modules.py   torch.ao's quantized modules swapped for their reference form
  autograd_functions.py  a torch.autograd.Function kept whole for its symbolic
  lstsq_shapes.py        linalg_lstsq's fake kernel with the static shapes it has

Where each applies today: :func:`patched_for_torch_export` while torch.export runs (and
functionalizes); packed sequences around both torch.export (non-strict) and the tracer;
quantized modules swapped before either capture (capture/strategies.py, torch_export.py);
autograd Functions kept around the whole capture (api.py, utils.py).
"""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def patched_for_torch_export():
    """Register pytree support for transformers' cache classes when transformers is loaded,
    and trace recurrent layers by their shapes (a dynamic sequence axis stays dynamic), and
    linalg_lstsq with its static output shapes, and nn.Transformer's masks without reading
    their values."""
    from onnxport import hf_cache
    from onnxport.capture.quirks.lstsq_shapes import static_lstsq_shapes
    from onnxport.capture.quirks.recurrent_shapes import shape_only_recurrent_layers
    from onnxport.capture.quirks.transformer_masks import causal_hint_as_given

    hf_cache.register_if_loaded()
    with shape_only_recurrent_layers(), static_lstsq_shapes(), causal_hint_as_given():
        yield
