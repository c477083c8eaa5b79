"""Passes: ONNX-to-ONNX rewrites, each in its own module, run in a fixed order by the named
presets of ``presets.py``, to a fixed point (``manager.py``; the default preset, for now, one
round: ``presets.DEFAULT_ROUNDS``); after each, the model must still be valid ONNX (unique names,
opset imports), or the error names the pass. Outlining modules as functions is the pass that
runs last, once."""

from __future__ import annotations

import onnx_ir as ir

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
from onnxport.passes.manager import FixedPointManager, PassSequence
from onnxport.passes.merge_transposes import MergeTransposes
from onnxport.passes.outline_module_functions import (
    MIN_OPSET as MODULE_FUNCTIONS_MIN_OPSET, ModuleInstance, OutlineModuleFunctions,
    modules_to_export_as_functions)
from onnxport.passes.reciprocal_to_div import ReciprocalToDiv
from onnxport.passes.rotate_half_matmul import RotateHalfMatMul
from onnxport.passes.shape_of_graph_input import ShapeOfGraphInput
from onnxport.passes.shared_mask_bias import SharedMaskBias
from onnxport.passes.split_after_head_transpose import SplitAfterHeadTranspose
from onnxport.passes.transpose_rows_around_gemm import TransposeRowsAroundGemm
from onnxport.passes.where_before_bias import WhereBeforeBias
from onnxport.passes.wrap_range_indices import WrapRangeIndices
from onnxport.passes.zero_masked_rows import ZeroMaskedRows
from onnxport.passes.presets import PRESETS, passes_of, pipeline, run_preset


def optimize(model: ir.Model, *, fused_ops: bool = True) -> ir.Model:
    """Run the clean-up passes (the ``default`` preset) over ``model`` in place and return it."""
    return run_preset(model, "default", fused_ops=fused_ops)


def optimize_without_weights(model: ir.Model) -> ir.Model:
    """The clean-up passes that never read a weight's value (the ``weight-free`` preset)."""
    return run_preset(model, "weight-free")


__all__ = [
    "Attention3D", "AttentionGroupedHeads", "AttentionPresentOutputs", "CastUnsupportedTypes",
    "CommonSubexpressions", "DropNeverTakenWhere", "FlatRowwise", "FlatSplit", "FlattenConcats",
    "FixedPointManager", "FoldConstants", "FoldScaleIntoGemm", "FoldWeightTranspose",
    "FuseConsecutiveUnsqueeze",
    "FuseConvBatchNorm", "FuseDynamicQuantizedMatMul", "FuseRMSNormalization",
    "FuseRotaryEmbedding", "GatherNDAsReshape", "GroupedQueryMatMul",
    "MergeReshapes", "MergeTransposes", "MODULE_FUNCTIONS_MIN_OPSET", "ModuleInstance",
    "OutlineModuleFunctions", "PassSequence", "ReciprocalToDiv", "RotateHalfMatMul",
    "ShapeOfGraphInput", "SharedMaskBias", "SplitAfterHeadTranspose", "TransposeRowsAroundGemm",
    "WhereBeforeBias", "WrapRangeIndices", "ZeroMaskedRows", "PRESETS", "optimize", "optimize_without_weights",
    "modules_to_export_as_functions", "passes_of", "pipeline", "run_preset",
]
