import torch

import onnxport


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
