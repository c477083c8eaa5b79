"""capture/script_mutations.py: writes that scripted branches and loops make to tensors from
outside them become values (functional ops, If outputs, loop-carried values). The rewritten
TorchScript graph is run by TorchScript itself and must compute what the scripted model does."""

from __future__ import annotations

import pytest
import torch

from onnxport.capture.script_mutations import functionalize_writes


class _WritesInBranches(torch.nn.Module):
    def forward(self, x, i):
        if bool(x.sum() > 0):
            x[i] = 0.0
            x.mul_(3)
        else:
            x.add_(1)
        return x * 2


class _WritesInALoop(torch.nn.Module):
    def forward(self, x):
        for k in range(3):
            x.add_(k)
        return x


class _BranchInALoop(torch.nn.Module):
    def forward(self, x):
        y = x.clone()
        for k in range(x.size(0)):
            y[k] = y[k] * k  # a write through a view: left in place
            if bool(y.sum() > 100):
                y.add_(-1)
        return y


class _OwnTensor(torch.nn.Module):
    def forward(self, x):
        if bool(x.sum() > 0):
            y = x * 2
            y.add_(1)  # the branch's own tensor: nothing to rewrite
            return y
        return x


class _ViewsOfItsOwnTensor(torch.nn.Module):
    def forward(self, x):
        acc = torch.zeros(3)
        for k in range(x.size(0)):
            b = x[k] * 1.0
            row = b[1]  # read after the writes below: sees them
            b[1, 0] = 9.0
            b[:, 2] += 1.0
            b.t()[0].mul_(2.0)
            acc = acc + row + b[0]
        return acc


CASES = [
    (_WritesInBranches, (torch.rand(4, 3), torch.tensor([0, 2]))),
    (_WritesInBranches, (-torch.rand(4, 3), torch.tensor([1]))),
    (_WritesInALoop, (torch.rand(3),)),
    (_BranchInALoop, (torch.rand(5, 3) * 30,)),
    (_BranchInALoop, (torch.rand(5, 3),)),
    (_OwnTensor, (torch.rand(3),)),
    (_ViewsOfItsOwnTensor, (torch.rand(4, 3, 3),)),
]


@pytest.mark.parametrize("cls, inputs", CASES,
                         ids=[f"{c.__name__}-{k}" for k, (c, _) in enumerate(CASES)])
def test_the_rewritten_graph_computes_what_the_script_does(cls, inputs):
    scripted = torch.jit.script(cls())
    graph = scripted.inlined_graph
    functionalize_writes(graph)
    graph.lint()
    writes_outside = [n for n in graph.findAllNodes("aten::add_") + graph.findAllNodes(
        "aten::mul_") + graph.findAllNodes("aten::index_put_")]
    assert not writes_outside or cls is _OwnTensor
    # (a write through a view in a loop body, of its own tensor too, is a functional op now)
    assert not [node for loop in graph.findAllNodes("prim::Loop")
                for node in loop.findAllNodes("aten::copy_") + loop.findAllNodes("aten::mul_")]
    rewritten = torch._C._create_function_from_graph("forward", graph)
    expected = scripted(*(t.clone() for t in inputs))
    torch.testing.assert_close(rewritten(scripted._c, *(t.clone() for t in inputs)), expected)
