"""In-place ops: rebinding where that is exact, torch's functionalization where a write is
seen through another alias."""

import pytest
import torch

import onnxport
from onnxport.capture.torch_export import needs_functionalization


def _check(model, *args):
    program = onnxport.export(model, args)
    with torch.no_grad():
        want = model(*[a.clone() for a in args])
    torch.testing.assert_close(program(*args)[0], want, rtol=1e-3, atol=1e-4)
    return torch.export.export(model, args, strict=False)


class WriteIntoViewReadThroughBase(torch.nn.Module):
    def forward(self, x):
        y = x * 1
        y[:, 1:3] = 0.5  # a write into a view, read back through y
        z = y.view(-1)
        z.add_(1)        # a write into another view of y
        return y * 2


class InPlaceChain(torch.nn.Module):
    def forward(self, x):
        y = torch.relu(x * 3)
        y.add_(1)
        y.mul_(2)        # later reads of y see both writes
        return y + y.flatten().view(y.shape)


class DropoutOnView(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.dropout = torch.nn.Dropout(inplace=True)

    def forward(self, x):
        return self.dropout(torch.flatten(x * 2, 1))


def test_write_into_view_is_functionalized():
    program = _check(WriteIntoViewReadThroughBase(), torch.randn(2, 4))
    assert needs_functionalization(program)


def test_in_place_chain_is_rebound_without_functionalization():
    program = _check(InPlaceChain(), torch.randn(2, 3))
    assert not needs_functionalization(program)


def test_in_place_on_a_view_nobody_reads_again_needs_no_functionalization():
    program = _check(DropoutOnView().eval(), torch.randn(2, 3, 2))
    assert not needs_functionalization(program)


class WrittenAndUnwrittenViews(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        first, second = y.split(2, 0)
        w = y.transpose(0, 1)        # a view of y that the write below changes
        first.view(-1).mul_(3)       # a write into a view of a piece of y
        u = (x + 1).view(-1)         # a view of a tensor that no op writes into
        return w + 0, u * 2, second.sum(), y


@pytest.mark.parametrize("dynamo", [None, False])
def test_a_write_is_seen_through_every_alias_and_other_views_are_kept(dynamo):
    model, x = WrittenAndUnwrittenViews(), torch.randn(4, 3)
    program = onnxport.export(model, (x,), dynamo=dynamo)
    want = model(x.clone())
    for got, expected in zip(program(x), want):
        torch.testing.assert_close(got, expected, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_export_leaves_the_models_state_as_it_was(dynamo):
    # Tracing runs forward: dynamo=False moved a training-mode BatchNorm's statistics and
    # counter, and renormalized an embedding's rows in place (max_norm), in the user's model.
    torch.manual_seed(0)
    norm = torch.nn.Sequential(torch.nn.Conv2d(3, 3, 1), torch.nn.BatchNorm2d(3))
    before = {k: v.clone() for k, v in norm.state_dict().items()}
    x = torch.randn(2, 3, 4, 4)
    program = onnxport.export(norm, (x,), dynamo=dynamo,
                              training=onnxport.TrainingMode.TRAINING)
    for key, value in norm.state_dict().items():
        assert torch.equal(value, before[key]), key
    torch.testing.assert_close(program(x)[0], norm.train()(x), rtol=1e-3, atol=1e-4)

    embedding = torch.nn.Embedding(10, 4, max_norm=1.0)
    weight = embedding.weight.detach().clone()
    ids = torch.tensor([1, 2, 7])
    program = onnxport.export(embedding, (ids,), dynamo=dynamo)
    assert torch.equal(embedding.weight, weight)
    with torch.no_grad():
        torch.testing.assert_close(program(ids)[0], embedding(ids), rtol=1e-3, atol=1e-4)
