"""The named pass pipelines: the one place that lists the passes an export runs."""

from __future__ import annotations

from onnxport import passes


def _names(preset: str, **options) -> list[str]:
    return [type(p).__name__ for p in passes.passes_of(preset, **options)]


def test_presets_by_name():
    assert set(passes.PRESETS) == {"default", "weight-free", "required-only"}
    assert _names("required-only") == ["CastUnsupportedTypes", "WrapRangeIndices"]
    # Fake mode's weights are placeholders: none of its passes folds or fuses weights.
    assert not {"FoldConstants", "FuseConvBatchNorm", "FoldWeightTranspose"} & set(
        _names("weight-free"))


def test_default_without_fused_ops_leaves_opset_23_fusions_out():
    fused = {"FuseRMSNormalization", "FuseRotaryEmbedding"}
    assert fused <= set(_names("default"))
    assert not fused & set(_names("default", fused_ops=False))
    # The order the comments require.
    names = _names("default")
    assert names.index("FuseRotaryEmbedding") < names.index("RotateHalfMatMul")
    assert names.index("ZeroMaskedRows") < names.index("GroupedQueryMatMul")


def test_every_export_preset_ends_with_the_required_passes_then_the_outlining():
    outline = passes.OutlineModuleFunctions([])
    for preset in ("default", "required-only"):
        names = _names(preset, outline=outline)
        assert names[-3:] == ["CastUnsupportedTypes", "WrapRangeIndices",
                              "OutlineModuleFunctions"]
        assert names.count("OutlineModuleFunctions") == 1
    assert "CastUnsupportedTypes" not in _names("weight-free")


def test_rewrites_run_under_a_fixed_point_manager():
    for preset in passes.PRESETS:
        stages = passes.pipeline(preset).passes
        assert all(isinstance(stage, passes.FixedPointManager) for stage in stages)
    # The default rewrites: one round while a second would change two zoo exports.
    assert passes.pipeline("default").passes[0].steps == passes.presets.DEFAULT_ROUNDS
