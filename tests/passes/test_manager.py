"""FixedPointManager: runs its passes round after round until one changes nothing."""

from __future__ import annotations

import warnings

import onnx_ir as ir
import pytest

from onnxport.passes import FixedPointManager, FoldConstants, MergeTransposes


class _Counting(ir.passes.InPlacePass):
    """Wraps a pass and counts its runs."""

    def __init__(self, inner: ir.passes.PassBase):
        super().__init__()
        self.inner, self.runs = inner, 0

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.runs += 1
        return self.inner(model)


def _model() -> ir.Model:
    """y = Transpose(Transpose(x)) and s = Shape(Transpose(x)): the inner Transpose has two
    readers, so MergeTransposes must wait until FoldConstants, after it in the order, has made
    the Shape a constant."""
    x = ir.Value(name="x", shape=ir.Shape([2, 3]), type=ir.TensorType(ir.DataType.FLOAT))
    inner = ir.node("Transpose", [x], attributes={"perm": [1, 0]}, name="inner")
    inner.outputs[0].name, inner.outputs[0].shape = "t", ir.Shape([3, 2])
    inner.outputs[0].dtype = ir.DataType.FLOAT
    outer = ir.node("Transpose", inner.outputs, attributes={"perm": [1, 0]}, name="outer")
    shape = ir.node("Shape", inner.outputs, name="shape")
    y, s = outer.outputs[0], shape.outputs[0]
    y.name, s.name = "y", "s"
    graph = ir.Graph([x], [y, s], nodes=[inner, outer, shape], opset_imports={"": 18})
    return ir.Model(graph, ir_version=8)


def test_a_rewrite_another_enables_later_runs_in_the_next_round():
    model = _model()
    merge, fold = _Counting(MergeTransposes()), _Counting(FoldConstants())
    result = FixedPointManager([merge, fold])(model)
    assert result.modified
    assert [n.op_type for n in model.graph].count("Transpose") == 1
    assert "Shape" not in [n.op_type for n in model.graph]
    # Round 1 both; round 2 both (each changed it); round 3 confirms: only MergeTransposes,
    # which changed it last, reruns; FoldConstants has seen the model as it is.
    assert (merge.runs, fold.runs) == (3, 2)


def test_one_round_is_what_a_single_run_gives():
    model = _model()
    FixedPointManager([MergeTransposes(), FoldConstants()], max_rounds=1)(model)
    assert [n.op_type for n in model.graph].count("Transpose") == 2


def test_a_model_at_its_fixed_point_reports_unchanged():
    model = _model()
    FixedPointManager([MergeTransposes(), FoldConstants()])(model)
    merge, fold = _Counting(MergeTransposes()), _Counting(FoldConstants())
    assert not FixedPointManager([merge, fold])(model).modified
    assert (merge.runs, fold.runs) == (1, 1)


class _AlwaysChanges(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        return ir.passes.PassResult(model, True)


def test_no_fixed_point_is_a_warning_naming_the_pass():
    with pytest.warns(RuntimeWarning, match="_AlwaysChanges"):
        assert FixedPointManager([_AlwaysChanges()], max_rounds=3)(_model()).modified
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        FixedPointManager([_AlwaysChanges()], max_rounds=1)(_model())
