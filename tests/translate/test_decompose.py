"""Selective decomposition: ops without a translation are decomposed one node at a time, and
ops with one are left whole."""

import pytest
import torch

import onnxport
from onnxport.errors import DynamicDimensionFixedWarning, UnsupportedOpsError
from onnxport.translate.registry import default_registry


def test_op_without_translation_is_decomposed_in_place():
    def f(x, y, z):
        return torch.addcmul(x, y, z, value=0.5) + torch.lerp(x, y, 0.3)

    registry = default_registry()
    assert not registry.is_registered("aten::addcmul")
    assert not registry.is_registered("aten::lerp")
    args = (torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4))
    program = onnxport.export(f, args)
    torch.testing.assert_close(program(*args)[0], f(*args), rtol=1e-3, atol=1e-4)
    origins = {n.metadata_props.get("onnxport.decomposed_from") for n in program.model.graph}
    assert {"aten::addcmul", "aten::lerp.Scalar"} <= origins, origins


def test_decomposition_with_dynamic_shapes():
    def f(x):
        return torch.nn.functional.glu(x, dim=-1) + torch.nn.functional.hardshrink(x[..., :2], 0.3)

    x = torch.randn(3, 4)
    program = onnxport.export(f, (x,), dynamic_shapes={"x": {0: torch.export.Dim("n")}})
    x5 = torch.randn(5, 4)
    torch.testing.assert_close(program(x5)[0], f(x5), rtol=1e-3, atol=1e-4)


def test_known_ops_are_not_decomposed():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4), torch.nn.GELU())
    x = torch.randn(2, 4)
    program = onnxport.export(model, (x,), opset_version=20)
    assert [n.op_type for n in program.model.graph] == ["Gemm", "LayerNormalization", "Gelu"]
    torch.testing.assert_close(program(x)[0], model(x), rtol=1e-3, atol=1e-4)


class _Unsupported(torch.nn.Module):
    """Ops with no translation: one called directly, another only reached by decomposing
    an op that has none (as_strided_scatter -> prims::as_strided_scatter)."""

    def forward(self, x):
        b = torch.as_strided_scatter(x, x[0], (4,), (1,))
        c = torch.geqrf(x)[0]
        d = torch.relu(x)  # supported
        return b, c, d


def test_every_unsupported_op_is_listed_at_once_with_its_source_line(untranslated):
    with pytest.raises(UnsupportedOpsError) as raised:
        onnxport.export(_Unsupported(), (torch.randn(2, 4),))
    missing = raised.value.missing
    assert set(missing) == {"prims::as_strided_scatter", "aten::geqrf"}, missing
    assert ("in the decomposition of aten::as_strided_scatter"
            in missing["prims::as_strided_scatter"][0])
    for name, line in [("prims::as_strided_scatter", "b = "), ("aten::geqrf", "c = ")]:
        place = missing[name][0]
        # Relative to tests/translate (on sys.path): sources hold no absolute path.
        assert place.startswith(f"test_decompose.py:{_line_of(line)} in forward"), place


def _line_of(text):
    lines = open(__file__).read().splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.strip().startswith(text))


def test_an_op_inside_a_decomposition_with_no_translation_is_an_unsupported_op(untranslated):
    """It was called as None ('NoneType' object is not callable)."""
    with pytest.raises(UnsupportedOpsError,
                       match=r"prims::as_strided_scatter: used at .* "
                             r"\(in the decomposition of aten::as_strided_scatter\)"):
        onnxport.export(lambda x: torch.as_strided_scatter(x, x[:2], (2,), (1,)),
                        (torch.randn(3),))


def test_a_decomposition_that_calls_its_own_op_is_an_unsupported_op():
    """sym_storage_offset's decomposition re-emits sym_storage_offset: without its
    translation, decomposing it would recurse with no end. (Traced symbolically, torch 2.11
    stops earlier, at a guard on the offset: the op is named unsupported all the same.)"""
    registry = default_registry()
    saved = registry.lookup("aten::sym_storage_offset", 18)
    registry.unregister("aten::sym_storage_offset")
    try:
        with pytest.raises(UnsupportedOpsError, match="aten::sym_storage_offset: used at .*"
                           "(its decomposition calls it again|decomposing it failed)"):
            onnxport.export(lambda x, i: torch.tensor_split(x, i),
                            (torch.randn(8), torch.tensor([2, 5])))
    finally:
        registry.register("aten::sym_storage_offset", saved.function, saved.since_opset)


def test_decompositions_to_prims_ops_export():
    """torch's reference decompositions call prims ops (broadcast_in_dim, expm1, log1p,
    var, convert_element_type): these translate."""
    def f(x, y):
        grid = torch.meshgrid(x, y, indexing="ij")  # -> prims::broadcast_in_dim
        return grid[0] * grid[1], torch.ops.prims.var(y, [0], 1.0), torch.ops.prims.expm1(x)

    args = (torch.randn(3), torch.randn(4))
    registry = default_registry()
    names = ("aten::meshgrid", "aten::meshgrid.indexing")  # (translated: decomposed here)
    saved = [registry.lookup(name, 18) for name in names]
    for name in names:
        registry.unregister(name)
    try:
        program = onnxport.export(f, args)
    finally:
        for name, translation in zip(names, saved):
            registry.register(name, translation.function, translation.since_opset)
    for actual, expected in zip(program(*args), f(*args)):
        torch.testing.assert_close(actual, expected, rtol=1e-3, atol=1e-4)
    origins = {n.metadata_props.get("onnxport.decomposed_from") for n in program.model.graph}
    assert "aten::meshgrid.indexing" in origins, origins


def test_a_decomposition_that_returns_a_named_tuple():
    """log_sigmoid_forward's decomposition builds torch.return_types.log_sigmoid_forward."""
    registry = default_registry()
    names = ["aten::log_sigmoid", "aten::log_sigmoid_forward"]
    saved = {name: registry.lookup(name, 18) for name in names}
    for name in names:
        registry.unregister(name)
    try:
        x = torch.randn(3, 4) * 10
        program = onnxport.export(torch.nn.functional.logsigmoid, (x,))
        torch.testing.assert_close(program(x)[0], torch.nn.functional.logsigmoid(x),
                                   rtol=1e-3, atol=1e-4)
    finally:
        for name, translation in saved.items():
            registry.register(name, translation.function, translation.since_opset)


def test_a_decomposition_is_traced_once():
    """check_supported traces the decompositions it looks through; translation reuses them."""
    calls = []
    from torch.fx.experimental import proxy_tensor

    real = proxy_tensor.make_fx

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    proxy_tensor.make_fx = counting
    try:
        program = onnxport.export(lambda x: torch.lerp(x, x * 2, 0.3), (torch.randn(3),))
    finally:
        proxy_tensor.make_fx = real
    assert len(calls) == 1, calls
    assert program.model.graph.num_nodes() > 0


def test_a_node_on_another_device_is_decomposed_as_on_the_cpu():
    # On CUDA grid_sampler's decomposition picks cudnn_grid_sampler, which no CPU export
    # meets ("1 unsupported op" for raft_small on a GPU only). Without a GPU in CI, fake
    # values on "meta" stand for the other device.
    from torch._subclasses.fake_tensor import FakeTensorMode

    from onnxport.translate.decompose import decomposition

    graph = torch.fx.Graph()
    x, grid = graph.placeholder("x"), graph.placeholder("grid")
    with FakeTensorMode():
        x.meta["val"] = torch.empty(1, 2, 5, 5, device="meta")
        grid.meta["val"] = torch.empty(1, 3, 3, 2, device="meta")
    node = graph.call_function(torch.ops.aten.grid_sampler.default, (x, grid, 0, 0, True))
    traced = decomposition(node).module.graph
    targets = [n.target for n in traced.nodes if n.op == "call_function"]
    assert targets == [torch.ops.aten.grid_sampler_2d.default]
    assert all(n.meta["val"].device.type == "cpu" for n in traced.nodes if "val" in n.meta)


class _UnfoldAfterABroadcast(torch.nn.Module):
    """timm's volo: an unfold (im2col, decomposed at translation) of a tensor whose batch
    comes from a broadcast with a position embedding."""

    def __init__(self):
        super().__init__()
        self.position = torch.nn.Parameter(torch.randn(1, 8, 8, 4))

    def forward(self, x):
        return torch.nn.functional.unfold((x + self.position).permute(0, 3, 1, 2), 3,
                                          padding=1, stride=2)


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_a_dynamic_size_a_decomposition_passes_to_an_op_stays_dynamic(dynamo):
    # Traced with real ints, im2col's closing view took the batch as the example's 2: the
    # file's batch was static, with no warning, and a batch of 1 (volo's example) failed.
    model = _UnfoldAfterABroadcast()
    program = onnxport.export(model, (torch.randn(2, 8, 8, 4),), input_names=["x"],
                              dynamic_axes={"x": {0: "b"}}, dynamo=dynamo)
    assert str(program.model.graph.inputs[0].shape[0]) == "b"
    for batch in (2, 1, 3):
        x = torch.randn(batch, 8, 8, 4)
        torch.testing.assert_close(program(x)[0], model(x), rtol=1e-3, atol=1e-4)


class _Vander(torch.nn.Module):
    def forward(self, x):
        return torch.vander(x, 4) * 2


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_a_decomposition_that_writes_into_views_of_its_own_tensors(dynamo):
    # vander's composite kernel fills a column of an empty tensor and cumprods into a slice
    # of it: traced as is, translation saw only the empty tensor (zeros on dynamo=False, as
    # the trace records aten::vander whole; garbage on the default path).
    # (Static: vander's kernel reads its input's size as a number, which fixes the axis.)
    program = onnxport.export(_Vander(), (torch.randn(5),), dynamo=dynamo)
    for inputs in (torch.randn(5), torch.randn(5) * 3):
        torch.testing.assert_close(program(inputs)[0], _Vander()(inputs), rtol=1e-3, atol=1e-4)


class _Bucketize(torch.nn.Module):
    def forward(self, v, boundaries):
        return torch.bucketize(v, boundaries)


@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
def test_a_decomposition_that_fixes_a_dynamic_size_is_named_in_a_warning(dynamo):
    # bucketize's decomposition (the op has a translation now: taken out here) searches a
    # length it reads as a number. The capture had kept the boundaries' length dynamic; the
    # file took only the example's, with no warning, and ONNX Runtime refused other lengths.
    registry = default_registry()
    saved = registry.lookup("aten::bucketize.Tensor", 18)
    registry.unregister("aten::bucketize.Tensor")
    boundaries = torch.tensor([-1.0, 0.0, 0.5, 2.0, 3.0])
    try:
        with pytest.warns(DynamicDimensionFixedWarning,
                          match=r"axis 0 of input 'b' is dynamic, but the decomposition of "
                                r"aten::bucketize.Tensor at .* only size 5 there"):
            program = onnxport.export(_Bucketize(), (torch.randn(3), boundaries),
                                      input_names=["v", "b"], dynamic_axes={"v": [0], "b": [0]},
                                      dynamo=dynamo)
    finally:
        registry.register("aten::bucketize.Tensor", saved.function, saved.since_opset)
    assert program.model.graph.inputs[1].shape[0] == 5
    for v in (torch.randn(3), torch.randn(7) * 2):
        torch.testing.assert_close(program(v, boundaries)[0], torch.bucketize(v, boundaries))
