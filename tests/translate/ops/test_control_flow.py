"""Control flow (ops/control_flow.py): torch.cond becomes ONNX If, while_loop Loop, scan and
map Scan, their branches and bodies translated as subgraphs that read the outer graph's values."""

from __future__ import annotations

import onnx_ir as ir
import pytest
import torch
from torch._higher_order_ops.map import map as torch_map
from torch._higher_order_ops.scan import scan
from torch._higher_order_ops.while_loop import while_loop
from torch.export import Dim

import onnxport
from onnxport.errors import UnsupportedOpsError
from op_check import check, op_types

OPSETS = [13, 18, 23]
BATCH = {0: Dim("batch")}


def _subgraphs(program) -> list[ir.Graph]:
    return [attribute.value for node in ir.traversal.RecursiveGraphIterator(program.model.graph)
            for attribute in node.attributes.values()
            if attribute.type == ir.AttributeType.GRAPH]


class SinOrCos(torch.nn.Module):
    def forward(self, x):
        # The false branch reads the dynamic batch size: a SymInt inside a subgraph.
        return torch.cond(x.sum() > 0, lambda x: x.sin(), lambda x: x.cos() * x.shape[0], (x,))


@pytest.mark.parametrize("opset", OPSETS)
def test_cond_takes_either_branch_at_run_time(opset):
    positive = torch.rand(3, 4) + 0.5
    program = check(SinOrCos(), positive, opset=opset, dynamic_shapes=({0: Dim("batch")},),
                    run_with=[(-positive,), (torch.rand(5, 4) + 0.5,), (-torch.rand(6, 4) - 0.5,)])
    assert "If" in op_types(program)
    assert {"Sin", "Cos"}.isdisjoint(op_types(program)), "both branches were inlined"


@pytest.mark.parametrize("opset", [13, 23])
def test_cond_with_two_operands_and_two_outputs(opset):
    def branches(x, y):
        return torch.cond(x.sum() > y.sum(), lambda x, y: (x + y, x * y),
                          lambda x, y: (x - y, y.abs() * 3), (x, y))

    x, y = torch.randn(3, 4) + 1, torch.randn(3, 4)
    program = check(branches, x, y, opset=opset, dynamic_shapes={"x": BATCH, "y": BATCH},
                    run_with=[(y - 2, x), (torch.randn(6, 4) + 1, torch.randn(6, 4))])
    assert op_types(program).count("If") == 1


class OnTheSize(torch.nn.Module):
    def forward(self, x):
        # With a dynamic batch, the condition is a SymBool computed from x's shape.
        return torch.cond(x.shape[0] > 4, lambda x: x.sin(), lambda x: x.cos(), (x,))


def test_cond_on_a_symbolic_size():
    program = check(OnTheSize(), torch.randn(3, 2), dynamic_shapes=({0: Dim("batch")},),
                    run_with=[(torch.randn(6, 2),)])
    assert "If" in op_types(program)


class Nested(torch.nn.Module):
    def forward(self, x):
        def positive(x):
            return torch.cond(x.mean() > 1, lambda x: x * 10, lambda x: x.exp(), (x,))

        return torch.cond(x.sum() > 0, positive, lambda x: -x, (x,))


@pytest.mark.parametrize("opset", [18])
def test_nested_cond(opset):
    x = torch.rand(2, 3) + 2
    program = check(Nested(), x, opset=opset, dynamic_shapes=({0: Dim("batch")},),
                    run_with=[(x - 1.9,), (-x,), (torch.rand(4, 3) + 2,)])
    ifs = [n for g in [program.model.graph, *_subgraphs(program)] for n in g if n.op_type == "If"]
    assert len(ifs) == 2


def test_two_exports_of_a_cond_are_identical_and_name_the_users_line():
    """Dynamo numbers the code it generates for branches per process ("<eval_with_key>.12"):
    that is no source line to show, and would make two exports differ."""
    first = onnxport.export(Nested(), (torch.rand(2, 3),))
    second = onnxport.export(Nested(), (torch.rand(2, 3),))
    assert (ir.serde.serialize_model(first.model).SerializeToString()
            == ir.serde.serialize_model(second.model).SerializeToString())
    line = next(i for i, text in enumerate(open(__file__).read().splitlines(), 1)
                if "return torch.cond(x.sum() > 0, positive" in text)
    for node in ir.traversal.RecursiveGraphIterator(first.model.graph):
        assert node.metadata_props["onnxport.source"] == f"test_control_flow.py:{line} in forward"


def test_an_op_without_translation_is_decomposed_inside_a_branch():
    def branches(x, y):
        return torch.cond(x.sum() > 0, lambda x, y: torch.addcmul(x, x, y, value=0.5),
                          lambda x, y: torch.lerp(x, y, 0.3), (x, y))

    x, y = torch.rand(2, 3), torch.randn(2, 3)
    check(branches, x, y, run_with=[(-x, y)])


class Weighted(torch.nn.Module):
    """Each branch uses its own layer: the weights stay initializers of the main graph, which
    the branches read by name."""

    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(4, 4)
        self.down = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: self.up(x).relu(),
                          lambda x: self.down(x) * 2, (x,))


@pytest.mark.parametrize("opset", OPSETS)
def test_cond_branches_read_the_modules_weights_from_the_outer_graph(opset):
    torch.manual_seed(0)
    x = torch.rand(3, 4) + 0.1
    program = check(Weighted(), x, opset=opset, dynamic_shapes=({0: Dim("batch")},),
                    run_with=[(-x,), (-torch.rand(7, 4) - 0.1,)])
    initializers = program.model.graph.initializers
    assert {"up.weight", "down.weight"} <= set(initializers), sorted(initializers)
    assert all(not g.initializers for g in _subgraphs(program))


class CountTo(torch.nn.Module):
    """Doubles x until the counter reaches n: the trip count is known only at run time."""

    def forward(self, n, x):
        def body(i, y):
            return i + 1, y * 2 + 1

        return while_loop(lambda i, y: i < n, body, (torch.zeros((), dtype=torch.int64), x))


@pytest.mark.parametrize("opset", OPSETS)
def test_while_loop_with_a_data_dependent_trip_count(opset):
    x = torch.randn(3, 4)
    program = check(CountTo(), torch.tensor(3), x, opset=opset,
                    dynamic_shapes=(None, {0: Dim("batch")}),
                    run_with=[(torch.tensor(7), torch.randn(5, 4)), (torch.tensor(0), x)])
    (loop,) = [node for node in program.model.graph if node.op_type == "Loop"]
    # The first condition is translated in the outer graph just before the Loop: the Loop is
    # still named and typed as the while_loop's, not as that condition's last call.
    assert loop.metadata_props["onnxport.aten"] == "higher_order::while_loop"
    assert [output.dtype for output in loop.outputs] == [ir.DataType.INT64, ir.DataType.FLOAT]


class CountWithAnInt(torch.nn.Module):
    """A Python int counter is a SymInt inside the loop (a 1-element tensor in ONNX), and the
    condition a SymBool."""

    def forward(self, n, x):
        return while_loop(lambda i, y: i < n.item(), lambda i, y: (i + 1, y * 3 - 1), (0, x))[1]


def test_while_loop_with_an_int_counter_and_a_symbolic_condition():
    x = torch.randn(3)
    check(CountWithAnInt(), torch.tensor(2), x, opset=18,
          run_with=[(torch.tensor(5), x), (torch.tensor(0), x)])


class CountByCondition(torch.nn.Module):
    """The loop condition reads an outer value besides the carried ones."""

    def forward(self, limit, x):
        return while_loop(lambda y: y.sum() < limit, lambda y: (y + x.abs() + 0.5,),
                          (torch.zeros_like(x),))


def test_while_loop_condition_and_body_read_outer_values():
    x = torch.randn(2, 3)
    check(CountByCondition(), torch.tensor(10.0), x, opset=18,
          run_with=[(torch.tensor(100.0), x), (torch.tensor(-1.0), x)])


class UnsupportedInBranch(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: torch.as_strided_scatter(x, x[0], (3,), (1,)),
                          lambda x: x.cos(), (x,))


def test_an_unsupported_op_inside_a_branch_is_reported(untranslated):
    with pytest.raises(UnsupportedOpsError) as raised:
        onnxport.export(UnsupportedInBranch(), (torch.randn(2, 3),))
    assert set(raised.value.missing) == {"prims::as_strided_scatter"}, raised.value.missing


class ScriptedBranch(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x.sin() * 2
        return x - 1


@pytest.mark.parametrize("opset", OPSETS)
def test_scripted_data_dependent_if_on_the_torchscript_path(opset):
    model = torch.jit.script(ScriptedBranch())
    x = torch.rand(2, 3) + 0.1
    program = onnxport.export(model, (x,), dynamo=False, opset_version=opset)
    assert "If" in op_types(program)
    for sample in (x, -x):
        torch.testing.assert_close(program(sample)[0], ScriptedBranch()(sample),
                                   rtol=1e-3, atol=1e-4)


class ReverseScan(torch.nn.Module):
    """A running sum along dim 1, backwards, with a weight read from the outer graph."""

    def forward(self, init, xs, w):
        def combine(carry, x):
            total = carry + x * w
            return total, total.sin()

        return scan(combine, init, xs, dim=1, reverse=True)


@pytest.mark.parametrize("opset", [13, 23])
def test_scan_carries_a_state_and_stacks_outputs_over_a_dynamic_length(opset):
    program = check(ReverseScan(), torch.zeros(4), torch.randn(4, 5), torch.randn(4),
                    opset=opset, dynamic_shapes=(None, {1: Dim("steps")}, None),
                    run_with=[(torch.randn(4), torch.randn(4, 9), torch.randn(4))])
    assert "Scan" in op_types(program)


def test_map_applies_its_function_to_each_slice():
    def mapped(xs, y):
        return torch_map(lambda x, y: x.cos() + y, xs, y)

    program = check(mapped, torch.randn(5, 4), torch.randn(4), opset=18,
                    dynamic_shapes={"xs": {0: Dim("steps")}, "y": None},
                    run_with=[(torch.randn(2, 4), torch.randn(4))])
    assert "Scan" in op_types(program)
