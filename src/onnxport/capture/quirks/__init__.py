"""Quirks of particular models and modules that capture works around, one module each:

  transformer_masks.py   nn.Transformer's check of its mask by value: the caller's hint instead
  recurrent_shapes.py    LSTM/GRU/RNN run by shape on fake tensors: a dynamic sequence axis
  packed_sequences.py    pack_padded_sequence -> RNN -> pad_packed_sequence as one padded call
  quantized_modules.py   torch.ao's quantized modules swapped for their reference form
  autograd_functions.py  a torch.autograd.Function kept whole for its symbolic
  lstsq_shapes.py        linalg_lstsq's fake kernel with the static shapes it has
  fused_cells.py         LSTMCell/GRUCell on a GPU: zero biases, fake kernels of the fused cells
  grouped_mm.py          aten::_grouped_mm (mixtures of experts) on fake tensors of any float
  unique_indices.py      aten::_unique2's fake indices int64 (torch 2.11's took the input's)
  fake_quantize_shapes.py the fake-quantize family (QAT) on fake tensors: the input's shape
  conv_tbc_shapes.py     conv_tbc on fake tensors of symbolic sizes: its output's sizes
  fake_kernels.py        (fake kernels given to ATen ops while a step runs: the helper)
  attention_fast_path.py nn.MultiheadAttention/TransformerEncoder's fused kernels off (tracing,
                         and in scripted code)
  pooling_1d.py          max_pool1d as max_pool2d: a dynamic length stays dynamic
  conv_backends.py       the fake convolution's choice of backend, without a guard on the batch
  one_piece_splits.py    [-1] of a split's one piece at the example: the last piece at any size
  shape_as_tensor.py     torch._shape_as_tensor as a stack of the sizes (torch.export)
  unpool_check.py        F.max_unpool's check of its output size skipped (tracing)
  (onnxport/hf_cache.py  transformers' KV cache classes as pytrees; verification reads it too)

Capture applies them through one hook, :func:`applied`, naming the step it is in (a graph
with scripted code gets its own through :func:`in_scripted_graph`); the model's
own form for capture (quantized modules swapped) comes from :func:`prepared`, and the whole
capture keeps autograd Functions through :func:`keeping_autograd_functions`
(``capture_model``'s ``keep_functions``): nothing outside capture/ enters a quirk.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

# The steps of capture that quirks patch:
#   "torch.export"         non-strict torch.export (Python runs the model)
#   "torch.export strict"  dynamo traces the model
#   "functionalize"        torch re-traces a captured program to functionalize it
#   "trace"                torch.jit's tracer runs the model
#   "replay"               fake tensors run the traced or scripted graph's ATen calls
STEPS = ("torch.export", "torch.export strict", "functionalize", "trace", "replay")


def prepared(model: Any) -> Any:
    """``model`` as capture takes it: its torch.ao quantized modules in their reference form
    (neither torch.export nor the tracer reads their packed weights)."""
    from onnxport.capture.quirks.quantized_modules import as_reference

    return as_reference(model)


@contextlib.contextmanager
def applied(step: str) -> Iterator[None]:
    """Every quirk's patch that ``step`` (one of :data:`STEPS`) needs, active in the block."""
    if step not in STEPS:
        raise ValueError(f"unknown capture step {step!r}; expected one of {STEPS}")
    with contextlib.ExitStack() as stack:
        if step == "replay":  # no model code runs: only the fake kernels matter
            from onnxport.capture.quirks.conv_backends import backend_choice_without_guards
            from onnxport.capture.quirks.conv_tbc_shapes import conv_tbc_shapes
            from onnxport.capture.quirks.fake_quantize_shapes import fake_quantize_shapes
            from onnxport.capture.quirks.fused_cells import fake_fused_cells
            from onnxport.capture.quirks.grouped_mm import grouped_mm_of_any_float
            from onnxport.capture.quirks.lstsq_shapes import static_lstsq_shapes
            from onnxport.capture.quirks.recurrent_shapes import shape_only_recurrent_layers
            from onnxport.capture.quirks.unique_indices import unique_indices_of_int64

            stack.enter_context(unique_indices_of_int64())
            stack.enter_context(static_lstsq_shapes())
            stack.enter_context(shape_only_recurrent_layers())
            stack.enter_context(fake_fused_cells())
            stack.enter_context(grouped_mm_of_any_float())
            stack.enter_context(backend_choice_without_guards())
            stack.enter_context(fake_quantize_shapes())
            stack.enter_context(conv_tbc_shapes())
            yield
            return
        if step != "trace":
            stack.enter_context(_patched_for_torch_export())
        if step in ("torch.export", "torch.export strict", "trace"):  # the model's own code
            from onnxport.capture.quirks.pooling_1d import max_pool1d_as_2d
            from onnxport.capture.quirks.transformer_masks import causal_hint_as_given

            stack.enter_context(max_pool1d_as_2d())
            # (a trace kept the example's answer: its mask ignored as causal at every input)
            stack.enter_context(causal_hint_as_given())
        if step in ("torch.export", "torch.export strict"):  # (the tracer records it whole)
            from onnxport.capture.quirks.shape_as_tensor import shape_as_tensor_stacked

            stack.enter_context(shape_as_tensor_stacked())
        if step in ("torch.export", "trace"):  # Python runs the model's own code
            from onnxport.capture.quirks.one_piece_splits import last_of_one_piece
            from onnxport.capture.quirks.packed_sequences import packed_sequences_as_padded

            stack.enter_context(packed_sequences_as_padded())
            stack.enter_context(last_of_one_piece())
        if step == "trace":  # (torch.export records the composed ops under no_grad too)
            from onnxport.capture.quirks.attention_fast_path import fast_path_off
            from onnxport.capture.quirks.unpool_check import unpool_output_size_unchecked

            stack.enter_context(fast_path_off())
            stack.enter_context(unpool_output_size_unchecked())
        if step != "functionalize":  # (the captured program has the biases by then)
            from onnxport.capture.quirks.fused_cells import zero_biases_for_fused_cells

            stack.enter_context(zero_biases_for_fused_cells())
        yield


def in_scripted_graph(graph: Any) -> None:
    """The quirks a graph with scripted code needs before its branches are decided (the step
    "replay" comes later): nn.MultiheadAttention's and nn.TransformerEncoder's fast path off,
    and nn.Transformer's mask not checked by value, as :func:`applied` does while tracing."""
    import torch

    from onnxport.capture.quirks.attention_fast_path import fast_path_off_in
    from onnxport.capture.quirks.transformer_masks import causal_hint_as_given_in

    if fast_path_off_in(graph) | causal_hint_as_given_in(graph):
        torch._C._jit_pass_constant_propagation(graph)


def in_decided_scripted_graph(graph: Any) -> None:
    """The quirks a graph with scripted code needs once its branches are decided: a packed
    recurrent layer as one call on the padded batch (:mod:`.scripted_packed_sequences`)."""
    from onnxport.capture.quirks.scripted_packed_sequences import packed_layers_as_padded

    packed_layers_as_padded(graph)


@contextlib.contextmanager
def keeping_autograd_functions(keep: Callable[[type], bool]) -> Iterator[None]:
    """Around a whole capture: each ``torch.autograd.Function`` for which ``keep`` is true is
    recorded as one call (its symbolic translates it)."""
    from onnxport.capture.quirks.autograd_functions import keep_autograd_functions

    with keep_autograd_functions(keep):
        yield


@contextlib.contextmanager
def _patched_for_torch_export() -> Iterator[None]:
    """Register pytree support for transformers' cache classes when transformers is loaded,
    and trace recurrent layers by their shapes (a dynamic sequence axis stays dynamic), and
    linalg_lstsq with its static output shapes, and grouped products of experts in float32,
    and the fake-quantize ops and conv_tbc on fake tensors."""
    from onnxport import hf_cache
    from onnxport.capture.quirks.conv_tbc_shapes import conv_tbc_shapes
    from onnxport.capture.quirks.fake_quantize_shapes import fake_quantize_shapes
    from onnxport.capture.quirks.grouped_mm import grouped_mm_of_any_float
    from onnxport.capture.quirks.lstsq_shapes import static_lstsq_shapes
    from onnxport.capture.quirks.recurrent_shapes import shape_only_recurrent_layers
    from onnxport.capture.quirks.unique_indices import unique_indices_of_int64

    hf_cache.register_if_loaded()
    with shape_only_recurrent_layers(), static_lstsq_shapes(), \
            grouped_mm_of_any_float(), unique_indices_of_int64(), fake_quantize_shapes(), \
            conv_tbc_shapes():
        yield
