import pytest
import torch

import onnxport


def _randomized(model):
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-1, 1, generator=generator)
                module.running_var.uniform_(0.5, 2, generator=generator)
                if module.affine:
                    module.weight.uniform_(0.5, 1.5, generator=generator)
                    module.bias.uniform_(-1, 1, generator=generator)
    return model.eval()


@pytest.mark.parametrize("bias,affine,groups", [(False, True, 1), (True, True, 1), (False, False, 2)])
def test_batchnorm_folds_into_conv(bias, affine, groups):
    model = _randomized(torch.nn.Sequential(
        torch.nn.Conv2d(4, 6, 3, bias=bias, groups=groups), torch.nn.BatchNorm2d(6, affine=affine),
        torch.nn.ReLU()))
    x = torch.randn(2, 4, 8, 8)
    program = onnxport.export(model, (x,))
    assert [n.op_type for n in program.model.graph] == ["Conv", "Relu"]
    torch.testing.assert_close(program(x)[0], model(x), rtol=1e-3, atol=1e-4)


def test_batchnorm_output_as_graph_output_and_shared_conv_output_stay():
    class TwoUses(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 3, 1)
            self.bn = torch.nn.BatchNorm2d(3)

        def forward(self, x):
            y = self.conv(x)
            return self.bn(y), y  # the conv output is used twice: no fold

    model = _randomized(TwoUses())
    x = torch.randn(1, 3, 4, 4)
    program = onnxport.export(model, (x,))
    assert "BatchNormalization" in [n.op_type for n in program.model.graph]
    for got, want in zip(program(x), model(x)):
        torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-4)

    single = _randomized(torch.nn.Sequential(torch.nn.Conv2d(3, 3, 1), torch.nn.BatchNorm2d(3)))
    program = onnxport.export(single, (x,), output_names=["out"])
    assert [n.op_type for n in program.model.graph] == ["Conv"]
    assert program.model.graph.outputs[0].name == "out"
    torch.testing.assert_close(program(x)[0], single(x), rtol=1e-3, atol=1e-4)
