"""check_structure: the names ONNX Runtime needs unique, over subgraphs too, and the domains."""

import onnx_ir as ir
import pytest

from onnxport.errors import InvalidModelError
from onnxport.verification.validity import check_structure


def _branch(node_name: str, input_name: str, domain: str, suffix: str) -> ir.Graph:
    inner_input = ir.Value(name=input_name + suffix)
    inner = ir.node("Identity", [inner_input], name=node_name + suffix, domain=domain)
    inner.outputs[0].name = "inner_y" + suffix
    return ir.Graph([inner_input], [inner.outputs[0]], nodes=[inner], name="branch" + suffix)


def _model(branch_node_name: str, branch_input_name: str, domain: str = "") -> ir.Model:
    """An If whose then-branch has a node and an input of the names given (the else-branch's
    names end in _else)."""
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.BOOL), shape=ir.Shape([]))
    first = ir.node("Not", [x], name="not")
    first.outputs[0].name = "y"
    condition = ir.node("If", [first.outputs[0]], name="if", attributes={
        "then_branch": _branch(branch_node_name, branch_input_name, domain, ""),
        "else_branch": _branch(branch_node_name, branch_input_name, domain, "_else")})
    condition.outputs[0].name = "z"
    graph = ir.Graph([x], [condition.outputs[0]], nodes=[first, condition],
                     opset_imports={"": 18})
    return ir.Model(graph, ir_version=9)


def test_a_valid_model_passes():
    check_structure(_model("inner", "inner_x"), "test")


def test_a_node_name_repeated_inside_a_subgraph_is_named():
    with pytest.raises(InvalidModelError, match="two nodes named 'not' \\(Identity\\)"):
        check_structure(_model("not", "inner_x"), "test")


def test_a_subgraph_input_named_like_an_outer_value_is_named():
    with pytest.raises(InvalidModelError, match="two values named 'y'"):
        check_structure(_model("inner", "y"), "test")


def test_a_domain_used_only_inside_a_subgraph_needs_an_opset_import():
    with pytest.raises(InvalidModelError, match="no opset import for domain 'custom'"):
        check_structure(_model("inner", "inner_x", domain="custom"), "test")
