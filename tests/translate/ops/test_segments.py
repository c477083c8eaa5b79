"""embedding_bag and cumprod (ops/segments.py): nn.EmbeddingBag in every mode, with offsets,
2-d input, padding_idx, include_last_offset and per-sample weights, and cumprod on floats, ints
and bools, compared with eager (also on torch's OpInfo samples)."""

from __future__ import annotations

import pytest
import torch

from op_check import check, check_opinfo, opinfo_cases

INDICES = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0, 2])
# Bag 1 is empty: torch gives it zeros in every mode.
OFFSETS = torch.tensor([0, 4, 4, 7])


def _bag(**kwargs):
    torch.manual_seed(0)
    return torch.nn.EmbeddingBag(10, 3, **kwargs)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_bag_with_offsets(mode, padding_idx):
    n = torch.export.Dim("n", min=2, max=100)
    bags = torch.export.Dim("bags", min=2, max=50)
    check(_bag(mode=mode, padding_idx=padding_idx), INDICES, OFFSETS,
          dynamic_shapes=({0: n}, {0: bags}),
          run_with=[(torch.tensor([3, 3, 2, 7, 1, 0]), torch.tensor([0, 1, 1, 5, 5]))])


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_2d_input_and_last_offset(mode):
    check(_bag(mode=mode), INDICES.reshape(2, 5))
    check(_bag(mode=mode, include_last_offset=True), INDICES, torch.tensor([0, 4, 4, 7, 10]))


def test_embedding_bag_per_sample_weights():
    check(_bag(mode="sum"), INDICES, OFFSETS, torch.rand(10))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumprod(dim):
    x = torch.randn(3, 5, 4)
    x[1, 2, 0] = 0.0  # exp(cumsum(log)) would give nan here
    check(lambda t: torch.cumprod(t, dim), x)


@pytest.mark.parametrize("x", [torch.randint(-3, 4, (5, 3)), torch.rand(5, 3) > 0.3,
                               torch.tensor(3.0)], ids=["int64", "bool", "0-d"])
def test_cumprod_dtypes(x):
    check(lambda t: torch.cumprod(t, 0), x)
    check(lambda t: torch.cumprod(t, 0, dtype=torch.float64), x)


def test_cumprod_dynamic_length():
    n = torch.export.Dim("n", min=2, max=100)
    check(lambda t: torch.cumprod(t, 1), torch.randn(2, 6), dynamic_shapes=({1: n},),
          run_with=[(torch.randn(2, 11),)])


@pytest.mark.parametrize("name, variant, dtype, subset", opinfo_cases(
    ["cumprod", ("cumprod", torch.int64), "nn.functional.embedding_bag"]))
def test_opinfo(name, variant, dtype, subset):
    check_opinfo(name, variant, dtype, subset)


SEGMENT_OPINFO = ["_segment_reduce:lengths", "_segment_reduce:offsets"]


@pytest.mark.parametrize("name, variant, dtype, subset", opinfo_cases(SEGMENT_OPINFO))
def test_segment_reduce_opinfo(name, variant, dtype, subset):
    check_opinfo(name, variant, dtype, subset)


# Segment 1 is empty, segment 0 holds a NaN: torch's identities, initial and NaN rules.
DATA = torch.tensor([1.0, float("nan"), 3.0, -4.0, 5.0, 2.5])


@pytest.mark.parametrize("reduce", ["sum", "mean", "prod", "max", "min"])
@pytest.mark.parametrize("initial", [None, 2.0])
def test_segment_reduce(reduce, initial):
    lengths, offsets = torch.tensor([2, 0, 3, 1]), torch.tensor([0, 2, 2, 5, 6])
    check(lambda x, lengths, offsets: (
        torch.segment_reduce(x, reduce, lengths=lengths, initial=initial),
        torch.segment_reduce(x, reduce, offsets=offsets, initial=initial)),
        DATA, lengths, offsets,
        run_with=[(torch.randn(6), torch.tensor([0, 6, 0, 0]), torch.tensor([0, 1, 3, 3, 6]))])


@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
def test_segment_reduce_along_an_inner_axis(reduce):
    # lengths per leading row, and values after the axis reduced alike.
    x = torch.randn(2, 6, 3)
    check(lambda x, lengths: torch.segment_reduce(x, reduce, lengths=lengths, axis=1), x,
          torch.tensor([[2, 4, 0], [1, 1, 4]]))
