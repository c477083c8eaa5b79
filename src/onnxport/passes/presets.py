"""The pass pipelines an export runs, by name: the one place that lists passes and their order.

- ``default``: the clean-up and fusion passes of ``export(optimize=True)``;
- ``weight-free``: those of them that never read a weight's value (a model exported in fake
  mode, whose weights are placeholders);
- ``required-only``: what every export needs whether it optimizes or not (without it a bfloat16
  Conv before opset 22 is invalid ONNX).
"""

from __future__ import annotations

from typing import Callable

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
from onnxport.passes.rotate_half_matmul import RotateHalfMatMul
from onnxport.passes.shape_of_graph_input import ShapeOfGraphInput
from onnxport.passes.shared_mask_bias import SharedMaskBias
from onnxport.passes.split_after_head_transpose import SplitAfterHeadTranspose
from onnxport.passes.transpose_rows_around_gemm import TransposeRowsAroundGemm
from onnxport.passes.where_before_bias import WhereBeforeBias
from onnxport.passes.zero_masked_rows import ZeroMaskedRows
from onnxport.verification.validity import check_structure


def run_passes(model: ir.Model, passes: list) -> ir.Model:
    """Run ``passes`` over ``model`` in place, in order, checking its structure after each
    that changed it (a fifth of a small model's TorchScript-path export went to checking
    after passes that had changed nothing; the full checker runs once at the end anyway)."""
    for rewrite in passes:
        result = rewrite(model)
        model = result.model
        if result.modified:
            check_structure(model, f"the pass {type(rewrite).__name__}")
    return model


def _default(*, fused_ops: bool = True) -> list:
    """``fused_ops=False`` keeps opset 23's RMSNormalization and RotaryEmbedding out (the
    decomposed, portable forms)."""
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
        common.RemoveUnusedNodesPass(),
        ZeroMaskedRows(),  # on the final chain of each attention, dead branches gone
        GroupedQueryMatMul(),  # after ZeroMaskedRows, which reads the ungrouped chain
        CommonSubexpressions(),
        common.RemoveUnusedNodesPass(),
        common.RemoveUnusedOpsetsPass(),
    ]


def _weight_free() -> list:
    return [
        FuseConsecutiveUnsqueeze(),
        common.RemoveUnusedNodesPass(),
        CommonSubexpressions(),
        common.RemoveUnusedNodesPass(),
        common.RemoveUnusedOpsetsPass(),
    ]


def _required_only() -> list:
    return [CastUnsupportedTypes()]


PRESETS: dict[str, Callable[..., list]] = {
    "default": _default,
    "weight-free": _weight_free,
    "required-only": _required_only,
}


def passes_of(preset: str, **options) -> list:
    """The passes of ``preset``, in order (``options``: the preset's own, ``fused_ops``)."""
    return PRESETS[preset](**options)


def run_preset(model: ir.Model, preset: str, **options) -> ir.Model:
    """Run the passes of ``preset`` over ``model`` in place and return it."""
    return run_passes(model, passes_of(preset, **options))
