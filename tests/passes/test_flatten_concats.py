"""FlattenConcats: nested torch.cat along one axis is one Concat."""

import torch

import onnxport


class Nested(torch.nn.Module):
    def forward(self, x):
        inner = torch.cat([x.sin(), x.cos()], 1)  # Inception's branch3x3, feeding only the cat
        shared = torch.cat([x, x.exp()], 1)  # read twice: stays a Concat of its own
        other_axis = torch.cat([x, x], 2)  # another axis: stays
        return torch.cat([x.tanh(), inner, shared], 1), shared.sum(), \
            torch.cat([other_axis, other_axis], 1)


def test_a_concat_feeding_only_a_concat_on_its_axis_is_merged():
    model = Nested()
    x = torch.randn(2, 3, 4)
    program = onnxport.export(model, (x,), input_names=["x"], dynamic_axes={"x": {0: "b"}})
    concats = [n for n in program.model.graph if n.op_type == "Concat"]
    # the outer cat takes tanh, sin, cos and the shared cat; the other-axis pair stays two
    assert sorted(len(n.inputs) for n in concats) == [2, 2, 2, 4], \
        [len(n.inputs) for n in concats]
    for batch in (2, 5):
        x = torch.randn(batch, 3, 4)
        for ours, eager in zip(program(x), model(x)):
            torch.testing.assert_close(ours, eager, rtol=1e-3, atol=1e-4)
