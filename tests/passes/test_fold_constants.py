"""FoldConstants: folded graphs run in ONNX Runtime with eager's numbers, and folding never
writes large fills into the file."""

import math

import numpy as np
import onnx_ir as ir
import torch

import onnxport
from onnxport.passes.fold_constants import FILL_LIMIT, FoldConstants


def test_static_mask_arithmetic_is_folded():
    class Masked(torch.nn.Module):
        def forward(self, x):
            mask = torch.ones(4, 4).tril() == 0
            positions = torch.arange(4).unsqueeze(0).expand(4, 4)
            return x.masked_fill(mask, -1.0) + positions

    x = torch.randn(2, 4, 4)
    program = onnxport.export(Masked(), (x,))
    ops = [n.op_type for n in program.model.graph]
    assert ops == ["Where", "Add"], ops
    torch.testing.assert_close(program(x)[0], Masked()(x))


def test_shape_of_static_value_is_a_constant():
    def f(x):
        return torch.zeros_like(x[0]).new_ones(x.shape[1:]) + x

    x = torch.randn(3, 5)
    program = onnxport.export(f, (x,))
    assert "Shape" not in [n.op_type for n in program.model.graph]
    torch.testing.assert_close(program(x)[0], f(x))


def test_constant_graph_output_stays_an_output():
    def f(x):
        return x + 1, torch.arange(3) * 2

    x = torch.randn(2)
    program = onnxport.export(f, (x,))
    got = program(x)
    torch.testing.assert_close(got[1], torch.arange(3) * 2)
    assert len(program.model.graph.outputs) == 2
    # Its Identity of an initializer is already folded: a second run finds nothing to do.
    assert not FoldConstants()(program.model).modified


# -- large fills stay ConstantOfShape (creation's file-size limit is not undone) --------------
def _initializer_sizes(program):
    initializers = program.model.graph.initializers
    return {name: math.prod(value.shape) for name, value in initializers.items()}


def _constant_of_shape_fills(program):
    """The fill value of every ConstantOfShape in the graph, in graph order."""
    return [n.attributes["value"].value.numpy().item() for n in program.model.graph
            if n.op_type == "ConstantOfShape"]


def _saved_size(program, tmp_path):
    path = tmp_path / "model.onnx"
    program.save(path)
    return sum(f.stat().st_size for f in tmp_path.iterdir())


def test_large_fill_stays_constant_of_shape(tmp_path):
    def f(x):
        return x + torch.full((128, 128), 0.5)

    x = torch.randn(128, 128)
    program = onnxport.export(f, (x,))
    assert _constant_of_shape_fills(program) == [0.5]
    assert max(_initializer_sizes(program).values(), default=0) <= FILL_LIMIT
    # 128 * 128 float32 would be 64 KB if the fill were written into the file.
    assert _saved_size(program, tmp_path) < 4096
    torch.testing.assert_close(program(x)[0], f(x), rtol=1e-3, atol=1e-4)


def test_elementwise_ops_of_a_large_fill_become_one_fill():
    def f(x):  # Cast then Mul of a fill: folded into the fill's value, still not stored
        return x + torch.ones(128, 128, dtype=torch.int64).float() * 3

    x = torch.randn(128, 128)
    program = onnxport.export(f, (x,))
    assert [n.op_type for n in program.model.graph] == ["ConstantOfShape", "Add"]
    assert _constant_of_shape_fills(program) == [3.0]
    torch.testing.assert_close(program(x)[0], f(x), rtol=1e-3, atol=1e-4)


def test_small_results_of_a_large_fill_are_folded():
    def f(x):  # a reduction and the shape of a large fill fold to small constants
        fill = torch.full((128, 128), 2.0)
        return x + fill.sum(0) + fill.shape[0]

    x = torch.randn(3, 128)
    program = onnxport.export(f, (x,))
    ops = [n.op_type for n in program.model.graph]
    assert "ConstantOfShape" not in ops and "ReduceSum" not in ops, ops
    torch.testing.assert_close(program(x)[0], f(x), rtol=1e-3, atol=1e-4)


def test_expand_of_a_constant_scalar_is_a_fill_not_a_stored_tensor():
    class ScalarExpand(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("scale", torch.tensor(1.5))

        def forward(self, x):
            return x * self.scale.expand(128, 128)

    x = torch.randn(128, 128)
    program = onnxport.export(ScalarExpand(), (x,))
    assert max(_initializer_sizes(program).values(), default=0) <= FILL_LIMIT
    assert [n.op_type for n in program.model.graph] == ["ConstantOfShape", "Mul"]
    assert _constant_of_shape_fills(program) == [1.5]
    torch.testing.assert_close(program(x)[0], ScalarExpand()(x), rtol=1e-3, atol=1e-4)


def test_a_mask_computed_from_a_large_fill_is_folded():
    def f(x):  # swin's shifted-window mask: a zeros fill written in regions, not uniform
        mask = torch.zeros(64, 64)
        mask[:32, 32:] = 1.0
        return x + mask

    x = torch.randn(64, 64)
    program = onnxport.export(f, (x,))
    assert [n.op_type for n in program.model.graph] == ["Add"]
    torch.testing.assert_close(program(x)[0], f(x), rtol=1e-3, atol=1e-4)


def test_a_large_fill_graph_output_keeps_its_name():
    def f(x):
        return x + 1, torch.zeros(64, 64, dtype=torch.int64)

    x = torch.randn(2)
    program = onnxport.export(f, (x,), output_names=["y", "zeros"])
    assert [v.name for v in program.model.graph.outputs] == ["y", "zeros"]
    assert program.model.graph.outputs[1].producer().op_type == "ConstantOfShape"
    got = program(x)
    torch.testing.assert_close(got[0], x + 1, rtol=1e-3, atol=1e-4)
    torch.testing.assert_close(got[1], torch.zeros(64, 64, dtype=torch.int64))


def test_a_large_nan_fill_stays_a_fill():
    def f(x):
        return x + torch.full((64, 64), float("nan")) * 2

    x = torch.randn(64, 64)
    program = onnxport.export(f, (x,))
    assert max(_initializer_sizes(program).values(), default=0) <= FILL_LIMIT
    assert torch.isnan(program(x)[0]).all()


def test_pass_reports_no_change_when_only_large_fills_are_left():
    shape = ir.Value(name="shape", shape=ir.Shape([2]), type=ir.TensorType(ir.DataType.INT64),
                     const_value=ir.tensor(np.array([64, 64], dtype=np.int64), name="shape"))
    x = ir.Value(name="x", shape=ir.Shape([64, 64]), type=ir.TensorType(ir.DataType.FLOAT))
    fill = ir.node("ConstantOfShape", [shape],
                   attributes={"value": ir.tensor(np.array([1.0], dtype=np.float32))})
    fill.outputs[0].dtype = ir.DataType.FLOAT
    add = ir.node("Add", [x, fill.outputs[0]])
    add.outputs[0].name = "y"
    graph = ir.Graph([x], add.outputs, nodes=[fill, add], initializers=[shape],
                     opset_imports={"": 18})
    model = ir.Model(graph, ir_version=10)
    result = FoldConstants()(model)
    assert not result.modified
    assert [n.op_type for n in model.graph] == ["ConstantOfShape", "Add"]


def test_gather_elements_of_constants_is_folded():
    # BERT's token-type path: a [1, 512] buffer gathered by a [1, S] slice of positions.
    class TokenTypes(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("types", torch.arange(512).reshape(1, 512) % 3)
            self.register_buffer("positions", torch.arange(512).reshape(1, 512))
            self.embedding = torch.nn.Embedding(3, 4)

        def forward(self, x):
            index = self.positions[:, 2:x.shape[1] + 2]
            types = torch.gather(self.types, 1, index).expand(x.shape[0], -1)
            return self.embedding(types) + x

    model, x = TokenTypes(), torch.randn(2, 6, 4)
    program = onnxport.export(model, (x,))
    ops = [n.op_type for n in program.model.graph]
    assert "GatherElements" not in ops, ops
    torch.testing.assert_close(program(x)[0], model(x))


class _ShiftedWindowMask(torch.nn.Module):
    """Swin's shifted-window attention mask: region ids written into a zeros image (larger than
    FILL_LIMIT) by slice assignments, cut into windows, compared pairwise, masked_fill'ed."""

    def forward(self, scores):  # scores: [batch, windows, tokens, tokens]
        size, window, shift = 48, 8, 4
        image = torch.zeros(size, size)
        count = 0
        for h in ((0, -window), (-window, -shift), (-shift, None)):
            for w in ((0, -window), (-window, -shift), (-shift, None)):
                image[h[0]:h[1], w[0]:w[1]] = count
                count += 1
        windows = image.view(size // window, window, size // window, window).permute(0, 2, 1, 3)
        windows = windows.reshape(-1, window * window)
        mask = windows.unsqueeze(1) - windows.unsqueeze(2)
        mask = mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)
        return (scores + mask).softmax(-1)


def test_shifted_window_mask_with_shared_intermediates_is_folded():
    # Intermediates larger than the shared-constant limit, each with several users (the zeros
    # image: its Slice and its ScatterElements; the pairwise difference: Equal and two Where),
    # were left in the graph: all their users fold, so nothing is stored twice.
    model = _ShiftedWindowMask()
    scores = torch.randn(1, 36, 64, 64)
    program = onnxport.export(model, (scores,),
                              dynamic_shapes={"scores": {0: torch.export.Dim("batch")}})
    ops = [n.op_type for n in program.model.graph]
    assert ops == ["Add", "Softmax"], ops
    (mask,) = [v for v in program.model.graph.initializers.values()]
    assert mask.shape.numpy() == (36, 64, 64)
    for batch in (1, 3):
        scores = torch.randn(batch, 36, 64, 64)
        torch.testing.assert_close(program(scores)[0], model(scores), rtol=1e-3, atol=1e-4)



def test_a_large_weight_whose_users_all_fold_is_stored_once():
    class TwoViews(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("weight", torch.randn(16, 1 << 15))  # 2 MB: not a mask

        def forward(self, x):
            return x @ (self.weight * 2).t() + x @ (self.weight + 1).t()

    model, x = TwoViews(), torch.randn(3, 1 << 15)
    program = onnxport.export(model, (x,))
    assert sum(_initializer_sizes(program).values()) <= (1 << 19) + FILL_LIMIT
    torch.testing.assert_close(program(x)[0], model(x), rtol=1e-3, atol=1e-3)
