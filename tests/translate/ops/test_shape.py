"""Shape ops (ops/shape.py): views, transposes, concatenation, splitting, slicing, padding,
sizes; OpInfo samples and by hand, with the graph they make."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import onnxport
from onnxport.errors import DynamicDimensionFixedWarning
from op_check import (
    BOTH_PATHS, PATH_IDS, as_module, cases, check, check_opinfo, op_types, opinfo_cases,
)

SHAPE = [
    "cat", "stack", "split", "split:list_args", "split_with_sizes", "chunk", "tensor_split",
    "flip", "roll", "repeat", "permute", "transpose", "t", "movedim", "squeeze",
    "squeeze:multiple", "unsqueeze", "flatten", "unflatten", "view", "reshape", "view_as",
    "reshape_as", "expand", "expand_as", "broadcast_to", "narrow", "select", "slice", "unbind",
    "constant_pad_nd", "nn.functional.pad:constant", "nn.functional.pad:reflect",
    "nn.functional.pad:replicate", "nn.functional.pad:replicate_negative",
    ("nn.functional.pad:replicate_negative", torch.int64), "nn.functional.pad:circular", "clone", "contiguous", "to",
    ("cat", torch.int64), ("view", torch.bool),
    "diagonal", "diagonal_copy", "linalg.diagonal", ("diagonal", torch.int64),
    ("diagonal", torch.bool), "trace", ("trace", torch.int64), "meshgrid:variadic_tensors",
    "meshgrid:list_of_tensors", "as_strided", "as_strided:partial_views", "as_strided_copy",
    "as_strided_scatter", ("as_strided_scatter", torch.bool),
]


@pytest.mark.parametrize("name, variant, dtype, subset", opinfo_cases(SHAPE))
def test_shape_opinfo(name, variant, dtype, subset):
    check_opinfo(name, variant, dtype, subset, limit=5)


X = torch.randn(2, 3, 4, 5)
aten = torch.ops.aten

HAND = {
    "view": (lambda x: x.view(6, 20), X),
    "reshape with -1": (lambda x: x.reshape(2, -1, 5), X),
    "aten::_unsafe_view": (lambda x: aten._unsafe_view(x, [6, 4, 5]), X),
    "aten::_reshape_alias": (lambda x: aten._reshape_alias(x, [6, 20], [20, 1]), X),
    "view_as": (lambda x, y: x.view_as(y), X, torch.empty(4, 30)),
    "reshape_as": (lambda x, y: x.reshape_as(y), X, torch.empty(120)),
    "flatten from 1": (lambda x: x.flatten(1), X),
    "flatten middle": (lambda x: x.flatten(1, 2), X),
    "flatten all": (lambda x: x.flatten(), X),
    "unflatten": (lambda x: x.unflatten(-1, (5, 1)), X),
    "aten::squeeze_copy": (lambda x: aten.squeeze_copy(x, [1]), torch.randn(2, 1, 3)),
    "aten::view_copy": (lambda x: aten.view_copy(x, [3, 40]), X),
    "permute": (lambda x: x.permute(3, 1, 0, 2), X),
    "permute identity": (lambda x: x.permute(0, 1, 2, 3) + 1, X),
    "transpose": (lambda x: x.transpose(1, -1), X),
    "swapaxes": (lambda x: x.swapaxes(0, 2), X),
    "swapdims": (lambda x: x.swapdims(3, 1), X),
    "t": (lambda x: x.t(), torch.randn(3, 4)),
    "t of 1-d": (lambda x: x.t() * 2, torch.randn(3)),
    "numpy T": (lambda x: x.T, torch.randn(3, 4)),
    "identities": (lambda x: (x.contiguous() + x.clone() + x.detach() + aten.alias(x)
                              + F.dropout(x, 0.5, training=False) + aten.lift_fresh_copy(x)
                              + x.resolve_conj() + x.resolve_neg() + aten.alias_copy(x)), X),
    "aten::contiguous, lift_fresh, dropout_": (
        lambda x: aten.contiguous(x) + aten.lift_fresh(x) + aten.dropout_(x.clone(), 0.5, False),
        X),
    "dropout variants": (lambda x: aten.dropout(x, 0.3, False) + aten.feature_dropout(x, 0.3, False)
                         + aten.alpha_dropout(x, 0.3, False)
                         + aten.feature_alpha_dropout(x, 0.3, False), X),
    "to dtype": (lambda x: x.to(torch.int32), X * 10),
    "to same dtype": (lambda x: x.to(torch.float32) + 1, X),
    "aten::_to_copy": (lambda x: aten._to_copy(x, dtype=torch.float64), X),
    "type_as": (lambda x, y: x.type_as(y), X * 5, torch.zeros(1, dtype=torch.int64)),
    "bool to float": (lambda x: (x > 0).float(), X),
    "expand": (lambda x: x.expand(3, 4, 5), torch.randn(4, 1)),
    "expand with -1": (lambda x: x.expand(2, -1, 6), torch.randn(1, 3, 1)),
    "aten::expand_copy": (lambda x: aten.expand_copy(x, [2, 3, 4]), torch.randn(3, 1)),
    "broadcast_to": (lambda x: x.broadcast_to(2, 3, 4), torch.randn(4)),
    "expand_as": (lambda x, y: x.expand_as(y), torch.randn(1, 5), X),
    "squeeze all": (lambda x: x.squeeze(), torch.randn(1, 3, 1, 4)),
    "squeeze a dim of size 1": (lambda x: x.squeeze(2), torch.randn(1, 3, 1, 4)),
    "squeeze a dim not of size 1": (lambda x: x.squeeze(1) * 2, torch.randn(1, 3, 1, 4)),
    "squeeze dims": (lambda x: x.squeeze((0, 2)), torch.randn(1, 3, 1, 4)),
    "unsqueeze": (lambda x: x.unsqueeze(0), X),
    "unsqueeze negative": (lambda x: x.unsqueeze(-1), X),
    "aten::unsqueeze_copy": (lambda x: aten.unsqueeze_copy(x, 2), X),
    "cat": (lambda x, y: torch.cat([x, y], dim=1), X, torch.randn(2, 2, 4, 5)),
    "cat with type promotion": (lambda x, y: torch.cat([x, y], -1), X,
                                torch.ones(2, 3, 4, 2, dtype=torch.int64)),
    "cat of bool and int": (lambda x, y: torch.cat([x > 0, y], dim=1), torch.randn(2, 3),
                            torch.ones(2, 2, dtype=torch.int64)),
    "cat skips 1-d empty tensors": (lambda x, y: torch.cat([x, y]), torch.randn(3, 2),
                                    torch.randn(0)),
    "concat": (lambda x, y: torch.concat([x, y]), X, X),
    "concatenate": (lambda x, y: torch.concatenate([x, y], axis=2), X, X),
    "stack": (lambda x, y: torch.stack([x, y], dim=2), X, X),
    "stack negative dim": (lambda x, y: torch.stack([x, y], dim=-1), X, X),
    "split": (lambda x: x.split(2, dim=-1), X),
    "split with sizes": (lambda x: x.split([1, 3, 1], dim=3), X),
    "chunk": (lambda x: x.chunk(2, dim=2), X),
    "chunk uneven": (lambda x: x.chunk(2, dim=-1), X),
    "tensor_split sections": (lambda x: x.tensor_split(3, dim=3), X),
    "tensor_split indices": (lambda x: x.tensor_split([1, 4], dim=3), X),
    "tensor_split tensor indices": (lambda x, i: x.tensor_split(i, dim=3), X,
                                    torch.tensor([1, 3])),
    "aten::split_copy": (lambda x: aten.split_copy(x, 2, 1), X),
    "aten::split_with_sizes_copy": (lambda x: aten.split_with_sizes_copy(x, [1, 2], 1), X),
    "unbind": (lambda x: x.unbind(1), X),
    "aten::unbind_copy": (lambda x: aten.unbind_copy(x, 0), X),
    "select": (lambda x: x[:, 1], X),
    "select negative": (lambda x: x.select(2, -1), X),
    "aten::select_copy": (lambda x: aten.select_copy(x, 0, 1), X),
    "slice": (lambda x: x[:, 1:3, ::2], X),
    "slice negative bounds": (lambda x: x[..., -3:-1], X),
    "slice past the end": (lambda x: x[:, :10] + 1, X),
    "aten::slice_copy": (lambda x: aten.slice_copy(x, 1, 0, 2), X),
    "narrow": (lambda x: x.narrow(3, 1, 3), X),
    "aten::narrow_copy": (lambda x: aten.narrow_copy(x, 1, 1, 2), X),
    "roll one dim": (lambda x: x.roll(2, 3), X),
    "roll several dims": (lambda x: x.roll((1, -2), (1, 3)), X),
    "roll flattened": (lambda x: x.roll(7), X),
    "roll by the size": (lambda x: x.roll(5, -1) + 1, X),
    "repeat": (lambda x: x.repeat(2, 1, 3), torch.randn(3, 4)),
    "repeat adds dims": (lambda x: x.repeat(2, 1, 1, 1), torch.randn(3, 4)),
    "flip": (lambda x: x.flip(0, 3), X),
    "pad constant": (lambda x: F.pad(x, (1, 2, 0, 1), value=0.5), X),
    "pad negative crops": (lambda x: F.pad(x, (-1, 2)), X),
    "aten::constant_pad_nd": (lambda x: aten.constant_pad_nd(x, [2, 1], 3.0), X),
    "pad reflect": (lambda x: F.pad(x, (2, 1, 1, 2), mode="reflect"), X),
    "pad replicate": (lambda x: F.pad(x, (2, 1), mode="replicate"), torch.randn(2, 3, 5)),
    # ONNX Runtime's edge/reflect Pad refuse negative pads; replicate past a whole axis' crop.
    "pad replicate negative": (lambda x: F.pad(x, (-5, 7, 2, -3), mode="replicate"), X),
    "pad reflect negative": (lambda x: (F.pad(x, (-1, 2), mode="reflect"),
                                        F.pad(x, (3, -2), mode="reflect")),
                             torch.randn(2, 3, 6)),
    "pad circular": (lambda x: F.pad(x, (2, 1, 1, 3), mode="circular"), X),
    "aten::reflection_pad1d": (lambda x: aten.reflection_pad1d(x, [2, 1]), torch.randn(2, 3, 5)),
    "aten::reflection_pad3d": (lambda x: aten.reflection_pad3d(x, [1, 1, 1, 0, 0, 1]),
                               torch.randn(1, 2, 3, 4, 5)),
    "aten::replication_pad2d": (lambda x: aten.replication_pad2d(x, [1, 2, 2, 1]), X),
    "aten::replication_pad3d": (lambda x: aten.replication_pad3d(x, [1, 0, 0, 1, 1, 1]),
                                torch.randn(1, 2, 3, 4, 5)),
    "size and numel": (lambda x: x.reshape(x.size(0), x.numel() // x.size(0)), X),
    "aten::_shape_as_tensor": (lambda x: aten._shape_as_tensor(x), X),
    "aten::sym_numel": (lambda x: torch.full((2,), aten.sym_numel(x)), X),
    "aten::numel": (lambda x: torch.full((2,), aten.numel(x)), X),
    "diagonal": (torch.diagonal, torch.randn(4, 6)),
    "diagonal above": (lambda x: torch.diagonal(x, 2), torch.randn(4, 6)),
    "diagonal below, of other dims": (lambda x: torch.diagonal(x, -1, 3, 1), X),
    "diagonal past the end is empty": (lambda x: torch.diagonal(x, 7) + 1, torch.randn(4, 6)),
    "diagonal of a transposed view": (lambda x: x.transpose(0, 1).diagonal(1), torch.randn(4, 6)),
    "aten::diagonal_copy": (lambda x: aten.diagonal_copy(x, 1, 0, 2), X),
    "trace": (torch.trace, torch.randn(5, 3)),
    "meshgrid ij": (lambda x, y: torch.meshgrid(x, y, indexing="ij"), torch.randn(3),
                    torch.randn(4)),
    "meshgrid xy": (lambda x, y, z: torch.meshgrid(x, y, z, indexing="xy"), torch.randn(3),
                    torch.randn(4), torch.randn(2)),
    "as_strided": (lambda x: x.as_strided((3, 2), (2, 5), 1), X),
    "as_strided overlapping windows": (lambda x: x.as_strided((4, 3), (2, 1)), torch.randn(10)),
    "as_strided of a slice": (lambda x: x[1:].as_strided((2, 2), (1, 2), 3), torch.randn(10)),
    "view.dtype": (lambda x: x.view(torch.int32), X),
    "view_as_real": (lambda x: torch.view_as_real(x), torch.randn(3, dtype=torch.complex64)),
}


@pytest.mark.parametrize("case", cases(HAND))
def test_shape(case):
    function, *args = case
    check(function, *args)


def test_view_with_static_shape_is_one_reshape():
    assert op_types(check(lambda x: x.view(6, 20), X)) == ["Reshape"]


def test_flatten_from_axis_1_is_onnx_flatten():
    assert op_types(check(lambda x: x.flatten(1), X)) == ["Flatten"]


def test_split_is_one_split():
    assert op_types(check(lambda x: x.split([1, 3, 1], dim=3), X)) == ["Split"]


@pytest.mark.parametrize("opset", [13, 18])
def test_split_with_symbolic_sizes_of_unequal_parts(opset):
    # (Torchvision's RPN splits its anchors by each level's count, symbolic for an image of
    # any size: a third and two thirds here.)
    rows = torch.export.Dim("rows", min=2)
    program = check(lambda x: torch.split(x, [x.shape[0] // 3, x.shape[0] - x.shape[0] // 3]),
                    torch.randn(6, 2), opset=opset, dynamic_shapes={"x": {0: rows}},
                    run_with=[(torch.randn(10, 2),), (torch.randn(3, 2),)])
    assert op_types(program).count("Split") == 1


def test_permute_is_one_transpose():
    assert op_types(check(lambda x: x.permute(0, 2, 3, 1), X)) == ["Transpose"]


def test_identities_emit_nothing_but_an_identity_for_the_output():
    program = check(lambda x: x.contiguous().clone().detach(), X)
    assert op_types(program) == ["Identity"]


def test_expand_of_equal_sizes_is_dropped():
    program = check(lambda x: x.expand(2, 3, 4, 5) + 1, X)
    assert op_types(program) == ["Add"]


@pytest.mark.parametrize("opset", [13, 18, 19])
def test_circular_pad_at_opsets_before_and_with_wrap(opset):
    program = check(lambda x: F.pad(x, (2, 1, 1, 3), mode="circular"), X, opset=opset)
    pads = [n for n in program.model.graph if n.op_type == "Pad"]
    if opset >= 19:
        assert len(pads) == 1 and pads[0].attributes["mode"].value == "wrap"
    else:
        assert not pads


@pytest.mark.parametrize("opset", [19, 23])
def test_circular_pad_of_empty_and_dynamic_batches(opset):
    # ONNX Runtime's Pad fails in "wrap" mode on an empty input: Slice/Concat pad those.
    pad = lambda x: F.pad(x, (1, 2), mode="circular")  # noqa: E731
    check(pad, torch.randn(0, 3, 3), opset=opset)
    check(pad, torch.randn(2, 3, 3), opset=opset, dynamic_shapes={"x": {0: torch.export.Dim("n")}},
          run_with=[(torch.randn(0, 3, 3),), (torch.randn(5, 3, 3),)])


def test_reflect_pad_is_one_pad():
    program = check(lambda x: F.pad(x, (2, 1), mode="reflect"), torch.randn(2, 3, 5))
    (pad,) = program.model.graph
    assert pad.op_type == "Pad" and pad.attributes["mode"].value == "reflect"



@pytest.mark.parametrize("mode", ["constant", "replicate"])
def test_padding_by_nothing_emits_no_pad(mode):
    # Swin pads each window to a multiple of the window size: at 224 x 224, by nothing.
    program = check(lambda x: F.pad(x, (0, 0, 0, 0), mode=mode) * 2, torch.randn(2, 3, 4, 5))
    assert op_types(program) == ["Mul"]

@pytest.mark.parametrize("opset", [13, 14, 18])
def test_diagonal_with_dynamic_shapes(opset):
    rows, columns = torch.export.Dim("rows"), torch.export.Dim("columns")
    check(lambda x: (torch.diagonal(x), torch.diagonal(x, 1), torch.diagonal(x, -2)),
          torch.randn(4, 6), opset=opset, dynamic_shapes={"x": {0: rows, 1: columns}},
          run_with=[(torch.randn(7, 3),), (torch.randn(2, 9),)])


def test_diagonal_is_a_strided_slice_not_a_gather():
    program = check(lambda x: torch.diagonal(x, 1), torch.randn(4, 6), optimize=False)
    assert "Gather" not in op_types(program) and "Slice" in op_types(program)


@pytest.mark.parametrize("opset", [13, 18])
def test_roll_of_dynamic_axes_takes_the_shift_modulo_the_run_time_size(opset):
    # Shifts past the size and negative ones: torch rolls by shift mod size, which an
    # exported size cannot know.
    sizes = {"x": {1: torch.export.Dim("columns", min=2), 2: torch.export.Dim("depth", min=2)}}
    check(lambda x: (x.roll(3, 1), x.roll(-5, 2), x.roll((7, -1), (1, 2)), x.roll(-9)),
          torch.randn(2, 2, 3), opset=opset, dynamic_shapes=sizes,
          run_with=[(torch.randn(2, 5, 4),), (torch.randn(2, 3, 9),)])


def test_roll_flattened_by_more_than_the_elements():
    check(lambda x: x.roll(130), X)


def test_resize_keeps_the_first_elements():
    check(lambda x, t: (x.clone().resize_(3, 7) * 2, x.clone().resize_(25), torch.ops.aten.resize(
        x, [5, 5]), x.clone().resize_as_(t)), torch.randn(5, 5), torch.empty(2, 2, 3))


@pytest.mark.parametrize("function, match", [
    (lambda x: x.clone().resize_(6, 6), "uninitialised"),
    (lambda x: x.t().resize_(3, 3), "not contiguous"),
], ids=["growing", "not contiguous"])
def test_resize_it_cannot_reproduce_is_refused(function, match):
    import onnxport.errors

    with pytest.raises(onnxport.errors.TranslationError, match=match):
        check(function, torch.randn(5, 5))


def test_as_strided_scatter_through_a_strided_window():
    check(lambda x, y: torch.as_strided_scatter(x, y, (2, 3), (6, 2), 1) * 2,
          torch.randn(4, 5), torch.randn(2, 3))


def test_as_strided_scatter_through_overlapping_elements_is_refused():
    import onnxport.errors

    with pytest.raises(onnxport.errors.TranslationError, match="overlap"):
        check(lambda x, y: torch.as_strided_scatter(x, y, (2, 2), (1, 1)), torch.randn(3, 3),
              torch.randn(2, 2))


# squeeze of a size known only at run time: torch drops the axis exactly when it is 1 then.
# A result the model only returns follows it with an If (its rank is known only at run time);
# one that later ops use keeps the capture's decision, as an ONNX graph of one rank must, and
# fails at run time where torch decides otherwise: it never answers in another shape.
SQUEEZES = {"squeeze()": lambda x: x.squeeze(), "squeeze(0)": lambda x: x.squeeze(0),
            "squeeze(-3)": lambda x: x.squeeze(-3), "squeeze((0, 2))": lambda x: x.squeeze((0, 2))}


@pytest.mark.parametrize("dynamo", BOTH_PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("function", SQUEEZES.values(), ids=SQUEEZES.keys())
def test_squeeze_of_a_dynamic_axis_that_is_returned_follows_torch(function, dynamo):
    program = check(function, torch.randn(2, 3, 1), input_names=["x"],
                    dynamic_axes={"x": {0: "n"}}, dynamo=dynamo,
                    run_with=[(torch.randn(4, 3, 1),), (torch.randn(1, 3, 1),)])
    assert "If" in op_types(program)
    # Each branch declares its own rank: the one that drops the axis one less (it was 0).
    branch = next(node for node in program.model.graph if node.op_type == "If")
    ranks = {name: len(attribute.value.outputs[0].shape)
             for name, attribute in branch.attributes.items()}
    assert ranks["else_branch"] == ranks["then_branch"] + 1


@pytest.mark.parametrize("dynamo", BOTH_PATHS, ids=PATH_IDS)
def test_squeeze_of_a_dynamic_axis_used_later_fails_where_torch_decides_otherwise(dynamo):
    program = check(lambda x: x.squeeze(0).sum(-1), torch.randn(2, 3), input_names=["x"],
                    dynamic_axes={"x": {0: "n"}}, dynamo=dynamo, run_with=[(torch.randn(4, 3),)])
    with pytest.raises(Exception, match="squeeze_fails_when_axis_0_is_1"):
        program(torch.randn(1, 3))


def test_squeeze_of_a_dynamic_axis_that_is_1_in_the_example_warns_and_keeps_it():
    """The TorchScript path: the trace dropped the axis at 1, its shapes say dynamic: kept
    for the later op, right at every other size."""
    with pytest.warns(UserWarning, match="dynamic and 1 in the example"):
        program = onnxport.export(as_module(lambda x: x.squeeze(0) * 2), (torch.randn(1, 3),),
                                  input_names=["x"], dynamic_axes={"x": {0: "n"}}, dynamo=False)
    x = torch.randn(2, 3)
    assert torch.equal(program(x)[0], x * 2)
    with pytest.raises(Exception, match="squeeze_fails_when_axis_0_is_1"):
        program(torch.randn(1, 3))


def test_a_returned_squeeze_of_an_axis_that_is_1_in_the_example_follows_torch():
    # (The TorchScript path: torch.export fixes an axis that squeeze reads at 1.)
    program = check(lambda x: x.squeeze(0), torch.randn(1, 3), input_names=["x"],
                    dynamic_axes={"x": {0: "n"}}, dynamo=False,
                    run_with=[(torch.randn(2, 3),), (torch.randn(1, 3),)])
    # Its rank is known only at run time: declared as at the example, where the axis went
    # (the fake run, reasoning about 1 as any size, recorded [n, 3]; fuzz seed 1182 --small).
    assert len(program.model.graph.outputs[0].shape) == 1


@pytest.mark.parametrize("first", [2, 1])
def test_squeeze_of_a_size_read_from_input_values(first):
    """torch.zeros(n[0], m[0]).squeeze(0), as torch's exporter tests have it, from either
    side: the returned result takes torch's shape at n = 1 and at other n."""
    function = lambda n, m: torch.zeros(int(n[0]), int(m[0])).squeeze(0)  # noqa: E731
    check(function, torch.tensor([first]), torch.tensor([3]),
          run_with=[(torch.tensor([4]), torch.tensor([5])), (torch.tensor([1]), torch.tensor([3]))])


def test_squeeze_of_static_axes_is_one_squeeze():
    assert op_types(check(lambda x: x.squeeze(), torch.randn(2, 1, 3, 1))) == ["Squeeze"]


SPLITS_OF_A_DYNAMIC_AXIS = {  # (function, example rows, other rows with the same part count)
    "chunk(3)[0]": (lambda x: x.chunk(3, dim=0)[0], 4, [3, 5, 7, 8]),
    "chunk(3) of 6": (lambda x: x.chunk(3, dim=0), 6, [7, 8, 9]),
    "tensor_split(3)": (lambda x: torch.tensor_split(x, 3), 5, [3, 4, 7]),
    "tensor_split at [1, 3]": (lambda x: torch.tensor_split(x, [1, 3]), 5, [3, 4, 7]),
}


@pytest.mark.parametrize("opset", [17, 18])
@pytest.mark.parametrize("dynamo", BOTH_PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("case", SPLITS_OF_A_DYNAMIC_AXIS.values(),
                         ids=SPLITS_OF_A_DYNAMIC_AXIS.keys())
def test_split_of_a_dynamic_axis(case, dynamo, opset):
    """Each part by the op's own rule at run time: Split's ceil(n / parts) made chunk(3)[0]
    of 3 rows 2 rows where torch gives 1."""
    function, rows, others = case
    check(function, torch.randn(rows, 2), input_names=["x"], dynamic_axes={"x": {0: "n"}},
          dynamo=dynamo, opset=opset, run_with=[(torch.randn(n, 2),) for n in others])


class _EmptyReshapes(torch.nn.Module):
    def forward(self, x):
        return (x[:, :0].reshape(x.shape[0], 0, 5) + 1, x[:, :0].reshape(0, x.shape[0]),
                x[:0].reshape(x.shape[1], 0))


@pytest.mark.parametrize("dynamo", BOTH_PATHS, ids=PATH_IDS)
def test_reshape_to_an_empty_shape_with_dynamic_sizes(dynamo):
    # A 0 in the shape with sizes of dynamic axes: was "not supported" (found by fuzz_dynamic,
    # seed 2147); the result has no data, only its shape.
    program = onnxport.export(_EmptyReshapes(), (torch.randn(3, 4),), dynamo=dynamo,
                              input_names=["x"], dynamic_axes={"x": {0: "a", 1: "b"}})
    for shape in ((3, 4), (5, 2)):
        x = torch.randn(shape)
        for actual, expected in zip(program(x), _EmptyReshapes()(x)):
            assert actual.shape == expected.shape


class _OnePieceOfANarrowedAxis(torch.nn.Module):
    def __init__(self, take: str):
        super().__init__()
        self.take = take

    def forward(self, x):
        pieces = x.narrow(1, 1, x.size(1) - 1).chunk(3, 1)
        if self.take == "last":
            return pieces[-1]
        # (an index computed from the count: [0] in a capture from one piece)
        return pieces[len(pieces) - 1] if self.take == "last by count" else pieces[0]


def test_one_piece_of_a_dynamic_axis_warns_that_the_model_returns_the_first():
    # From a column of 2, the narrowed axis has 1: one chunk, which the graph takes as [0]
    # whatever the model indexed; [0] is right at every size.
    model = _OnePieceOfANarrowedAxis("first")
    with pytest.warns(DynamicDimensionFixedWarning, match="one piece of axis 1"):
        program = onnxport.export(model, (torch.randn(1, 2),), input_names=["x"],
                                  dynamic_axes={"x": {0: "a", 1: "b"}})
    x = torch.randn(3, 8)
    torch.testing.assert_close(program(x)[0], model(x))


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "dynamo=False"])
def test_the_last_piece_of_one_is_the_last_at_every_size(dynamo):
    # [-1] was silently the first piece at larger sizes (fuzz --small seed 3069), with the
    # warning only; it is computed from the width now (capture/quirks/one_piece_splits.py).
    model = _OnePieceOfANarrowedAxis("last")
    program = onnxport.export(model, (torch.randn(1, 2),), input_names=["x"],
                              dynamic_axes={"x": {0: "a", 1: "b"}}, dynamo=dynamo)
    assert str(program.model.graph.inputs[0].shape) == "[a,b]"
    for shape in ((1, 2), (3, 8), (2, 6), (4, 1)):
        x = torch.randn(shape)
        torch.testing.assert_close(program(x)[0], model(x))


def test_the_last_piece_of_one_by_its_count_is_never_silently_the_first():
    # Indexed by its count, the one piece is [0] in the capture: the check from the batch of
    # 1 grows the columns too (2 to 5) and sees it: the batch is static, and so are the
    # columns where torch's program holds at 2 only: ONNX Runtime refuses other sizes, never
    # answers wrongly.
    model = _OnePieceOfANarrowedAxis("last by count")
    with pytest.warns(DynamicDimensionFixedWarning, match="other dynamic sizes doubled"):
        program = onnxport.export(model, (torch.randn(1, 2),), input_names=["x"],
                                  dynamic_axes={"x": {0: "a", 1: "b"}})
    assert program.model.graph.inputs[0].shape[0] == 1
    for columns in (2, 3, 4, 8):
        x = torch.randn(1, columns)
        try:
            actual = program(x)[0]
        except Exception as error:  # noqa: BLE001 - loud is allowed, wrong is not
            assert "at_most" in str(error) or "invalid dimensions" in str(error), error
            continue
        torch.testing.assert_close(actual, model(x))


class _Sections(torch.nn.Module):
    def __init__(self, sections: int):
        super().__init__()
        self.sections = sections

    def forward(self, x):
        return x.tensor_split(self.sections, 1)


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "dynamo=False"])
@pytest.mark.parametrize("sections", [2, 3])
def test_tensor_split_of_a_dynamic_axis_into_parts_at_every_size(sections, dynamo):
    # Equal at the example (3 of 3), the parts were one Split into 3 outputs: ONNX makes the
    # last part shorter (2 + 2 + 0 of 4) where torch makes the first ones longer (2 + 1 + 1),
    # silently; and ONNX Runtime 1.30 refuses a Split of 1 column into 2.
    model = _Sections(sections)
    program = onnxport.export(model, (torch.randn(2, 3 * sections - 3 or 2),),
                              input_names=["x"], dynamic_axes={"x": {1: "b"}}, dynamo=dynamo)
    for width in (1, 4, 5, 7, 0):
        x = torch.randn(2, width)
        actual, expected = program(x), model(x)
        assert [tuple(a.shape) for a in actual] == [tuple(e.shape) for e in expected], width
        for a, e in zip(actual, expected):
            torch.testing.assert_close(a, e)


def _second_half_by_rows(x):
    # tensor_split leaves a//2 rows, 1 in the example: torch records the reshape to
    # [1, -1, b] as [(a//2), (a//2), ...] under that guard, and the reshape back copied its
    # first size (Reshape [0, -1]): 1 where the model has a//2 rows, silently.
    x = x.tensor_split(2, 0)[1]
    return x.reshape(1, -1, x.size(-1)).reshape(*x.shape[:-1], -1).chunk(3, 0)[0]


def _pooled_second_half(x):
    # The same recorded [(a//2), (a//2), ...], carried through a pool to the reshape back
    # (found by differential fuzzing, seed 24091): the last chunk had 0 rows where torch's has 1.
    x = x.tensor_split(2, 0)[1].repeat(1, 2)
    x = F.max_pool1d(x.reshape(1, -1, x.size(-1)), 2, ceil_mode=True).reshape(*x.shape[:-1], -1)
    return x.split(2, 1)[0].chunk(3, 0)[-1]


@pytest.mark.filterwarnings("ignore::onnxport.errors.DynamicDimensionFixedWarning")  # one piece
@pytest.mark.parametrize("model", [_second_half_by_rows, _pooled_second_half])
def test_a_size_given_as_a_number_is_the_size_a_later_reshape_copies(model):
    program = check(model, torch.randn(3, 5), input_names=["x"],
                    dynamic_axes={"x": {0: "a", 1: "b"}},
                    run_with=[(torch.randn(4, 4),), (torch.randn(6, 2),), (torch.randn(9, 3),)])
    # The sizes torch recorded from there on are declared unknown, not as its expressions
    # ((a//2)*(b//(a//2)) is 0 at (6, 2), where the output has 2 columns).
    assert all(getattr(d, "value", None) is None for d in program.model.graph.outputs[0].shape)


def _first_third_of_the_first_third(x):
    # Both chunks make one piece of the example's one column. The product's recorded shape
    # was the input's, so a pass shared the second chunk's read of its width with the
    # input's: the first third of 7 columns had 3 (fuzz seed 30272).
    return (x.chunk(3, 1)[0] * 2).chunk(3, 1)[0]


@pytest.mark.filterwarnings("ignore::onnxport.errors.DynamicDimensionFixedWarning")  # one piece
@pytest.mark.parametrize("dynamo", BOTH_PATHS, ids=PATH_IDS)
def test_what_is_computed_from_one_piece_has_the_pieces_sizes(dynamo):
    check(_first_third_of_the_first_third, torch.randn(3, 1), dynamo=dynamo, input_names=["x"],
          dynamic_axes={"x": {0: "a", 1: "b"}},
          run_with=[(torch.randn(2, 7),), (torch.randn(3, 5),), (torch.randn(2, 2),)])


def _rows_repeated_of_all_but_the_last_column(x):
    # repeat_interleave(2, 0) is Reshape([2 * rows, columns - 1]) of an expanded copy, both
    # sizes read at run time: from one column the second is 0, which Reshape read as "keep
    # the input's 2", and the file failed at its own example.
    return x.narrow(1, 0, x.size(1) - 1).repeat_interleave(2, 0)


@pytest.mark.parametrize("dynamo", BOTH_PATHS, ids=PATH_IDS)
def test_a_size_read_at_run_time_as_0_is_an_empty_size_not_a_copy(dynamo):
    check(_rows_repeated_of_all_but_the_last_column, torch.randn(1, 1), dynamo=dynamo,
          input_names=["x"], dynamic_axes={"x": {0: "a", 1: "b"}},
          run_with=[(torch.randn(3, 1),), (torch.randn(4, 5),), (torch.randn(2, 3),)])


@pytest.mark.parametrize("dynamo", BOTH_PATHS, ids=PATH_IDS)
def test_view_as_another_input_with_a_dynamic_axis_of_its_own(dynamo):
    # PyTorch's suite (view(other.shape) with each input's axes dynamic): the result's first
    # size is the other input's, no size of x, read from it at run time.
    check(lambda x, y: (x.reshape_as(y), x.view_as(y), x.view(y.shape)),
          torch.randn(2, 6), torch.randn(3, 4), dynamo=dynamo, input_names=["x", "y"],
          dynamic_axes={"x": {0: "a"}, "y": {0: "b"}},
          run_with=[(torch.randn(4, 6), torch.randn(6, 4)), (torch.randn(2, 6), torch.randn(3, 4))])
