"""histogram and histogramdd (ops/counting.py): bins from counts (the data's range or a given
one) and from edges, weights, density, values on the edges, outside them and NaN, compared with
eager (also on torch's OpInfo samples)."""

from __future__ import annotations

import pytest
import torch

import onnxport

from op_check import as_module, check, check_opinfo, opinfo_cases

COUNTING = ["histogram", "histogramdd"]


@pytest.mark.parametrize("name, variant, dtype, subset", opinfo_cases(COUNTING))
def test_counting_opinfo(name, variant, dtype, subset):
    check_opinfo(name, variant, dtype, subset)


# Values on every edge of linspace(-2, 3, 11) (the last one in the last bin), between them,
# and repeated. With a given range or edges, a NaN too (not counted; torch refuses it when the
# range is the data's).
VALUES = torch.cat([torch.linspace(-2, 3, 11), torch.randn(40), torch.tensor([0.5, 0.5])])
WITH_NAN = torch.cat([VALUES, torch.tensor([float("nan")])])


@pytest.mark.parametrize("options", [dict(bins=10), dict(bins=7, range=(-1.0, 1.5)),
                                     dict(bins=4, density=True), dict(bins=3, range=(2.0, 2.0))],
                         ids=["data range", "given range", "density", "empty range"])
def test_histogram_of_bin_counts(options):
    x = WITH_NAN if "range" in options else VALUES
    check(lambda x, w: (torch.histogram(x, **options),
                        torch.histogram(x, weight=w, **options)),
          x, torch.rand(x.numel()), run_with=[(torch.randn(x.numel()) * 5, torch.rand(x.numel()))])


def test_histogram_of_given_edges():
    check(lambda x, edges: (torch.histogram(x, edges), torch.histogram(x, edges, density=True)),
          WITH_NAN, torch.tensor([-1.0, -0.25, 0.0, 0.5, 2.0]))


@pytest.mark.parametrize("density", [False, True])
def test_histogramdd(density):
    points = torch.cat([torch.randn(30, 3), torch.tensor([[0.0, 0.0, 0.0]])])
    check(lambda x, w, e0, e1, e2: (
        torch.histogramdd(x, [3, 4, 2], density=density),
        torch.histogramdd(x, [2, 2, 5], range=[-1.0, 1.0, 0.0, 2.0, -3.0, 3.0], weight=w,
                          density=density),
        torch.histogramdd(x, [e0, e1, e2], density=density)),
        points, torch.rand(31), torch.tensor([-1.0, 0.0, 1.0]), torch.tensor([-2.0, 0.5, 2.0]),
        torch.tensor([-0.5, 0.0, 0.25, 0.5]))


def test_histogram_edges_are_torchs_to_the_last_bit():
    # linspace(-5.25, 6.75, 10)[3] is -1.2499998807907104 in torch (a fused multiply-add),
    # -1.25 by a multiply then an add: the values -1.25 belong to bin 2, not 3.
    values = torch.tensor([-5.25, -1.25, -1.25, 0.0, 6.75, 2.75, 1.4166665])
    check(lambda x: (torch.histogram(x, 9), torch.histogramdd(x.reshape(-1, 1), [9])),
          values, run_with=[(torch.round(torch.randn(7) * 8) / 4,)], rtol=0, atol=0)


class _HistcOfFloats(torch.nn.Module):
    def forward(self, ids):
        return torch.histc(ids.float(), bins=4, min=0, max=3)


def test_histc_of_integers_counts_in_their_dtype():
    # CUDA's histc takes integers (transformers counts each expert's rows so, from cuda: the
    # translation wrote Floor of int32, and the checker refused the model); the CPU's does
    # not. CI has no GPU: the program captured on the CPU is given the integer input CUDA's
    # has, and the int32 counts it returns.
    ids = torch.tensor([3, 0, 1, 1, 3, 2, 3], dtype=torch.int32)
    exported = torch.export.export(_HistcOfFloats(), (ids,))
    histc = next(n for n in exported.graph.nodes if n.target is torch.ops.aten.histc.default)
    converted = histc.args[0]
    histc.args = (converted.args[0], *histc.args[1:])
    exported.graph.erase_node(converted)
    histc.meta["val"] = histc.meta["val"].to(torch.int32)
    counts = onnxport.export(exported)(ids)[0]
    assert counts.dtype == torch.int32
    assert counts.tolist() == torch.histc(ids.float(), bins=4, min=0, max=3).int().tolist()


@pytest.mark.parametrize("dynamo", [None, False])
def test_bincount_with_a_dynamic_minlength(dynamo):
    # minlength a dynamic size: the translation took it as an int (a TypeError).
    values = torch.tensor([0, 1, 1, 3])
    check(lambda v, x: torch.bincount(v, minlength=x.size(0)) * 2, values, torch.randn(3),
          dynamo=dynamo, input_names=["v", "x"], dynamic_axes={"v": {0: "m"}, "x": {0: "n"}},
          run_with=[(values, torch.randn(7)), (torch.tensor([5, 0]), torch.randn(2))])


@pytest.mark.parametrize("dynamo", [None, False])
def test_randint_with_a_dynamic_bound(dynamo):
    # Random: the shapes are compared, and every draw lies in [low, high).
    def model(x):
        return torch.randint(1, x.size(0), (x.size(1), 500)), torch.randint(x.size(1), (3,))

    program = onnxport.export(as_module(model), (torch.randn(4, 3),), dynamo=dynamo,
                              input_names=["x"], dynamic_axes={"x": {0: "a", 1: "b"}})
    for a, b in ((4, 3), (9, 6)):
        drawn, small = program(torch.randn(a, b))
        assert drawn.shape == (b, 500) and small.shape == (3,)
        assert drawn.min() >= 1 and drawn.max() <= a - 1 and drawn.max() >= a - 2
        assert small.min() >= 0 and small.max() <= b - 1


class _UniqueAlong(torch.nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.unique(x, sorted=True, return_inverse=True, return_counts=True, dim=self.dim)


@pytest.mark.parametrize("scripted", [False, True], ids=["traced", "scripted"])
@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_unique_along_a_dim(dim, dynamo, scripted):
    # aten::unique_dim was translated as _unique2, its dim taken for ``sorted``: a flattened
    # unique (the checker refused its rank; scripted, too many arguments).
    model = _UniqueAlong(dim)
    model = torch.jit.script(model) if scripted else model
    x = torch.tensor([[1, 0, 1], [0, 1, 0], [1, 0, 1], [1, 1, 0], [0, 1, 0]])
    check(model, x, dynamo=dynamo, dynamic_axes={"x": [0, 1]}, input_names=["x"],
          run_with=[(torch.randint(0, 2, (7, 4)),), (torch.randint(0, 2, (2, 3)),)])
