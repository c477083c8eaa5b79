"""FlatRowwise with MergeReshapes: linear layers on 3-D inputs meet their inputs as [M, N] rows,
with no Reshape between two Gemms; numbers stay eager's, at static and dynamic shapes."""

import pytest
import torch

import model_zoo
import onnxport


def _op_types(program):
    return [n.op_type for n in program.model.graph]


class Block(torch.nn.Module):
    """A transformer MLP half and an RMSNorm: Linear, GELU, residual Add, LayerNorm, Linear."""

    def __init__(self):
        super().__init__()
        self.up, self.down = torch.nn.Linear(8, 16), torch.nn.Linear(16, 8)
        self.norm = torch.nn.LayerNorm(8)
        self.out = torch.nn.Linear(8, 4, bias=False)
        self.scale = torch.nn.Parameter(torch.rand(8) + 0.5)

    def forward(self, x):
        h = self.norm(x + self.down(torch.nn.functional.gelu(self.up(x))))
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * self.scale
        return torch.relu(self.out(h))


def test_rows_stay_flat_between_gemms():
    model, x = Block(), torch.randn(2, 5, 8)
    program = onnxport.export(model, (x,), opset_version=18)
    ops = _op_types(program)
    assert ops.count("Gemm") == 3 and "MatMul" not in ops, ops
    # One Reshape of the input into rows, one of the result out of them: none in between.
    assert ops.count("Reshape") == 2, ops
    assert ops[0] == "Reshape" and ops[-1] == "Reshape", ops
    torch.testing.assert_close(program(x)[0], model(x), rtol=1e-3, atol=1e-4)


def test_dynamic_batch_and_sequence():
    model, x = Block(), torch.randn(2, 5, 8)
    batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
    program = onnxport.export(model, (x,), dynamic_shapes={"x": {0: batch, 1: sequence}},
                              opset_version=18)
    ops = _op_types(program)
    # The output's [batch, sequence] is read off the graph input (ShapeOfGraphInput), so no
    # 3-D value is kept for its shape alone; the RMSNorm's mean is per row too.
    assert ops.count("Gemm") == 3 and ops.count("Reshape") == 2, ops
    shapes = [n for n in program.model.graph if n.op_type == "Shape"]
    assert [n.inputs[0].name for n in shapes] == ["x"], shapes
    for shape in [(2, 5, 8), (3, 7, 8)]:
        x = torch.randn(*shape)
        torch.testing.assert_close(program(x)[0], model(x), rtol=1e-3, atol=1e-4)


def test_one_dynamic_dimension_needs_no_shape_subgraph():
    model, x = Block(), torch.randn(2, 5, 8)
    program = onnxport.export(model, (x,), dynamic_shapes={"x": {0: torch.export.Dim("batch")}},
                              opset_version=18)
    # -1 stands for the one unknown dimension.
    assert "Shape" not in _op_types(program) and "Concat" not in _op_types(program)
    for shape in [(2, 5, 8), (4, 5, 8)]:
        x = torch.randn(*shape)
        torch.testing.assert_close(program(x)[0], model(x), rtol=1e-3, atol=1e-4)


def test_rows_do_not_cross_an_op_mixing_them():
    class Mixing(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

        def forward(self, x):
            # softmax over the sequence axis mixes rows: it must run on the 3-D value.
            return self.b(torch.softmax(self.a(x), dim=1) + x.mean(1, keepdim=True))

    model, x = Mixing(), torch.randn(2, 5, 8)
    program = onnxport.export(model, (x,), opset_version=18)
    torch.testing.assert_close(program(x)[0], model(x), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("name", ["bert", "llama"])
def test_transformer_layers_have_no_reshape_between_gemms(name):
    model, args, kwargs = model_zoo.build(name)
    program = onnxport.export(model, args, kwargs=kwargs, opset_version=18)
    entries = set()
    for node in program.model.graph:
        producer = node.inputs[0].producer() if node.op_type == "Gemm" else None
        # The rows come from another Gemm, a norm or an elementwise op, or from a Reshape of
        # the attention heads back into rows; only the embeddings enter the stream otherwise.
        if producer is not None and producer.op_type == "Reshape":
            if producer.inputs[0].producer().op_type != "Transpose":
                entries.add(producer.name)
    assert len(entries) == 1, entries
    with torch.no_grad():
        expected = model(*args, **kwargs)
    expected = [t for t in torch.utils._pytree.tree_leaves(expected) if isinstance(t, torch.Tensor)]
    for actual, wanted in zip(program(*args, **kwargs), expected, strict=True):
        torch.testing.assert_close(actual, wanted, rtol=1e-3, atol=1e-4)


class WhereOnLinear(torch.nn.Module):
    """A Where whose condition and other branch are 3-D values: both are made rows."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.where(x > 0, self.linear(x), x * 2)


def test_where_flattens_two_of_its_inputs_with_two_named_reshapes():
    model, x = WhereOnLinear(), torch.randn(2, 5, 8)
    program = onnxport.export(model, (x,), opset_version=18)
    names = [n.name for n in program.model.graph]
    assert len(names) == len(set(names)), names
    torch.testing.assert_close(program(x)[0], model(x), rtol=1e-3, atol=1e-4)
