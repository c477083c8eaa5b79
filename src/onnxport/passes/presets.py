"""The pass pipelines an export runs, by name: the one place that lists passes and their order.

- ``default``: the clean-up and fusion passes of ``export(optimize=True)``, then the required;
- ``weight-free``: those of them that never read a weight's value (a model exported in fake
  mode, whose weights are placeholders);
- ``required-only``: what every export needs whether it optimizes or not (without it a bfloat16
  Conv before opset 22 is invalid ONNX, and ONNX Runtime runs a Gather of a Range with a
  negative bound as an empty Slice).

Each runs its rewrites to a fixed point (``FixedPointManager``; ``default``, for now, one round:
see ``DEFAULT_ROUNDS``); then, when the export outlines modules as functions, the
``OutlineModuleFunctions`` it is given, once: the rewrites see the flat graph, across modules,
and never have to look inside a function.
"""

from __future__ import annotations

from typing import Callable, Iterator

import onnx_ir as ir
import onnx_ir.passes.common as common

from onnxport.passes.attention_3d import Attention3D
from onnxport.passes.attention_grouped_heads import AttentionGroupedHeads
from onnxport.passes.attention_present_outputs import AttentionPresentOutputs
from onnxport.passes.cast_unsupported_types import CastUnsupportedTypes
from onnxport.passes.common_subexpressions import CommonSubexpressions
from onnxport.passes.drop_never_taken_where import DropNeverTakenWhere
from onnxport.passes.flat_rowwise import FlatRowwise
from onnxport.passes.flat_split import FlatSplit
from onnxport.passes.flatten_concats import FlattenConcats
from onnxport.passes.fold_constants import FoldConstants
from onnxport.passes.fold_scale_into_gemm import FoldScaleIntoGemm
from onnxport.passes.fold_weight_transpose import FoldWeightTranspose
from onnxport.passes.fuse_conv_batchnorm import FuseConvBatchNorm
from onnxport.passes.fuse_dynamic_quantized_matmul import FuseDynamicQuantizedMatMul
from onnxport.passes.fuse_rms_normalization import FuseRMSNormalization
from onnxport.passes.fuse_rotary_embedding import FuseRotaryEmbedding
from onnxport.passes.fuse_unsqueeze import FuseConsecutiveUnsqueeze
from onnxport.passes.gather_nd_as_reshape import GatherNDAsReshape
from onnxport.passes.grouped_query_matmul import GroupedQueryMatMul
from onnxport.passes.merge_reshapes import MergeReshapes
from onnxport.passes.merge_transposes import MergeTransposes
from onnxport.passes.reciprocal_to_div import ReciprocalToDiv
from onnxport.passes.remove_unused_nodes import RemoveUnusedNodes
from onnxport.passes.rotate_half_matmul import RotateHalfMatMul
from onnxport.passes.shape_of_graph_input import ShapeOfGraphInput
from onnxport.passes.shared_mask_bias import SharedMaskBias
from onnxport.passes.split_after_head_transpose import SplitAfterHeadTranspose
from onnxport.passes.transpose_rows_around_gemm import TransposeRowsAroundGemm
from onnxport.passes.where_before_bias import WhereBeforeBias
from onnxport.passes.wrap_range_indices import WrapRangeIndices
from onnxport.passes.zero_masked_rows import ZeroMaskedRows
from onnxport.passes.manager import MAX_ROUNDS, FixedPointManager, PassSequence
from onnxport.passes.outline_module_functions import OutlineModuleFunctions


def _default(*, fused_ops: bool = True) -> list:
    """``fused_ops=False`` keeps opset 23's RMSNormalization and RotaryEmbedding out (the
    decomposed, portable forms). Their order still matters within a round: a rewrite that
    another one enables later would wait for the next round, and change the file."""
    fusions = [FuseRMSNormalization(), FuseRotaryEmbedding()] if fused_ops else []
    return [
        FoldWeightTranspose(),
        FuseConvBatchNorm(),
        FoldConstants(),
        DropNeverTakenWhere(),
        GatherNDAsReshape(),
        WhereBeforeBias(),
        FuseDynamicQuantizedMatMul(),
        FuseConsecutiveUnsqueeze(),
        ReciprocalToDiv(),
        *fusions,
        RotateHalfMatMul(),  # after FuseRotaryEmbedding, which takes the whole embedding
        AttentionGroupedHeads(),
        SharedMaskBias(),
        MergeReshapes(),
        Attention3D(),
        AttentionPresentOutputs(),
        TransposeRowsAroundGemm(),
        FlatRowwise(),
        FlatSplit(),
        FoldScaleIntoGemm(),
        SplitAfterHeadTranspose(),
        MergeTransposes(),
        FlattenConcats(),
        MergeReshapes(),
        ShapeOfGraphInput(),
        RemoveUnusedNodes(),
        ZeroMaskedRows(),  # on the final chain of each attention, dead branches gone
        GroupedQueryMatMul(),  # after ZeroMaskedRows, which reads the ungrouped chain
        CommonSubexpressions(),
        RemoveUnusedNodes(),
        common.RemoveUnusedOpsetsPass(),
    ]


def _weight_free(*, fused_ops: bool = True) -> list:
    return [
        FuseConsecutiveUnsqueeze(),
        RemoveUnusedNodes(),
        CommonSubexpressions(),
        RemoveUnusedNodes(),
        common.RemoveUnusedOpsetsPass(),
    ]


def _required() -> list:
    return [CastUnsupportedTypes(), WrapRangeIndices()]


# The default rewrites run once, not to their fixed point, while a second round would change
# what an export writes (issue 19 keeps every export byte-identical): it finds more to do in two
# of the zoo's 84 exports, both dynamic on the TorchScript path. gpt2: SplitAfterHeadTranspose,
# once CommonSubexpressions has made the parts' shape Concats one (120 nodes -> 106); t5:
# MergeTransposes, once ShapeOfGraphInput has taken the Shape that also read the inner
# Transpose (345 -> 344). Setting it to MAX_ROUNDS (or reordering those passes) takes them.
DEFAULT_ROUNDS = 1

# Each preset: its rewrites, the most rounds they run, and whether the required ones follow.
PRESETS: dict[str, tuple[Callable[..., list], int, bool]] = {
    "default": (_default, DEFAULT_ROUNDS, True),
    "weight-free": (_weight_free, MAX_ROUNDS, False),  # after an export, which ran the required
    "required-only": (lambda fused_ops=True: [], MAX_ROUNDS, True),  # (no rewrites)
}


def pipeline(preset: str, *, fused_ops: bool = True,
             outline: OutlineModuleFunctions | None = None) -> PassSequence:
    """The pass manager of ``preset``: its rewrites to a fixed point (``default``'s: one round,
    see DEFAULT_ROUNDS), then the required ones to theirs (the rewrites never see their casts),
    then ``outline`` once.
    ``fused_ops`` is ``default``'s option; the others take it and ignore it."""
    rewrites, rounds, required = PRESETS[preset]
    stages: list[ir.passes.PassBase] = []
    if own := rewrites(fused_ops=fused_ops):
        stages.append(FixedPointManager(own, max_rounds=rounds))
    if required:
        stages.append(FixedPointManager(_required()))
    if outline is not None:
        stages.append(outline)
    return PassSequence(stages)


def passes_of(preset: str, **options) -> list:
    """The passes of ``preset``, in the order they first run (``options``: ``pipeline``'s)."""
    return list(_leaves(pipeline(preset, **options)))


def _leaves(manager: ir.passes.PassBase) -> Iterator[ir.passes.PassBase]:
    if isinstance(manager, ir.passes.Sequential):
        for inner in manager.passes:
            yield from _leaves(inner)
    else:
        yield manager


def run_preset(model: ir.Model, preset: str, **options) -> ir.Model:
    """Run ``preset``'s pipeline over ``model`` in place and return it (``options``:
    ``pipeline``'s, ``fused_ops`` and ``outline``)."""
    return pipeline(preset, **options)(model).model
