"""Every model issue 2 names exports with static and with dynamic batch, runs in ONNX Runtime
and matches PyTorch (fp32: rtol 1e-3, atol 1e-4); a subset of issue 7's exports from a batch of 1
(benchmarks/batch1_models.py runs all of them)."""

from __future__ import annotations

import warnings

import pytest
import torch

import model_zoo
import onnxport
from onnxport._versions import torch_at_least
from onnxport.capture import parameter_names
from onnxport.errors import DynamicDimensionFixedWarning

ALL_MODELS = ["mlp"] + model_zoo.TORCHVISION_MODELS + model_zoo.TRANSFORMERS_MODELS


def assert_matches_eager(program, model, args, kwargs):
    with torch.no_grad():
        expected = model(*args, **kwargs)
    expected = [t for t in torch.utils._pytree.tree_leaves(expected) if isinstance(t, torch.Tensor)]
    actual = program(*args, **kwargs)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("name", ALL_MODELS)
def test_static_shapes(name):
    model, args, kwargs = model_zoo.build(name)
    program = onnxport.export(model, args, kwargs=kwargs)
    assert_matches_eager(program, model, args, kwargs)
    for value in program.model.graph.inputs:
        assert all(isinstance(d, int) for d in value.shape), value


def _resized(name, args, kwargs, batch, sequence):
    """The same inputs at another batch size (and sequence length for the transformers)."""
    def resize(t, key=None):
        if name in model_zoo.TRANSFORMERS_MODELS:
            length = sequence // 2 if key == "decoder_input_ids" else sequence
            if t.dtype == torch.long and key != "attention_mask":
                return torch.randint(0, 100, (batch, length))
            return torch.ones(batch, length, dtype=t.dtype)
        return torch.randn(batch, *t.shape[1:], dtype=t.dtype)

    return tuple(resize(a) for a in args), {k: resize(v, k) for k, v in kwargs.items()}


@pytest.mark.parametrize("name", ALL_MODELS)
def test_dynamic_batch(name):
    model, args, kwargs = model_zoo.build(name)
    axes = model_zoo.dynamic_axes_for(name, args, kwargs, parameter_names(model))
    program = onnxport.export(model, args, kwargs=kwargs, dynamic_axes=axes)
    first = program.model.graph.inputs[0]
    assert first.shape[0] == onnxport_dim("batch"), first
    # Another batch size (and sequence length) than the example the model was captured with.
    new_args, new_kwargs = _resized(name, args, kwargs, batch=3, sequence=11)
    assert_matches_eager(program, model, new_args, new_kwargs)


def onnxport_dim(name):
    import onnx_ir as ir

    return ir.SymbolicDim(name)


# -- a decoding step: the KV cache as input --------------------------------------------------
def _decode_step_shapes(model):
    batch = torch.export.Dim("batch")
    layers = model.config.num_hidden_layers
    return {
        "input_ids": {0: batch, 1: torch.export.Dim("sequence")},
        # past + sequence, which a Dim cannot spell: left to torch.export
        "attention_mask": {0: batch, 1: torch.export.Dim.DYNAMIC},
        "past_key_values": [{0: batch, 2: torch.export.Dim("past_sequence")}] * (2 * layers),
    }


def _eager(model, kwargs):
    """The model's outputs as a flat list; the cache is copied because forward extends it."""
    import copy

    kwargs = {k: copy.deepcopy(v) if k == "past_key_values" else v for k, v in kwargs.items()}
    with torch.no_grad():
        outputs = model(**kwargs)
    return [t for t in torch.utils._pytree.tree_leaves(outputs) if isinstance(t, torch.Tensor)]


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_kv_cache_input_with_dynamic_batch_sequence_and_past(name):
    model, _, _ = model_zoo.build(name)
    example = model_zoo.kv_cache_inputs(model, batch=2, sequence=3, past=5)
    program = onnxport.export(model, (), kwargs=example, dynamic_shapes=_decode_step_shapes(model))

    layers = model.config.num_hidden_layers
    kv = [f"{layer}.{role}" for layer in range(layers) for role in ("key", "value")]
    graph = program.model.graph
    assert [v.name for v in graph.inputs] == \
        ["input_ids", "attention_mask"] + [f"past_key_values.{n}" for n in kv]
    assert [v.name for v in graph.outputs] == ["logits"] + [f"present.{n}" for n in kv]
    dim = onnxport_dim
    assert list(graph.inputs[0].shape) == [dim("batch"), dim("sequence")]
    for value in graph.inputs[2:]:
        assert (value.shape[0], value.shape[2]) == (dim("batch"), dim("past_sequence")), value
    # Output dims that are sums of named dims are spelled with those names.
    for value in graph.outputs[1:]:
        assert str(value.shape[2]) == "past_sequence + sequence", value

    # Other batch sizes, new-token counts (one: plain decoding) and past lengths than exported.
    for batch, sequence, past in [(2, 3, 5), (3, 1, 7), (1, 4, 2)]:
        inputs = model_zoo.kv_cache_inputs(model, batch, sequence, past, seed=batch + past)
        expected = _eager(model, inputs)
        actual = program(**inputs)
        assert len(actual) == len(expected) == 1 + 2 * layers
        assert actual[1].shape[2] == past + sequence
        for a, e in zip(actual, expected):
            torch.testing.assert_close(a, e, rtol=1e-3, atol=1e-4)


def test_kv_cache_given_before_the_other_inputs():
    # Graph inputs follow the order of kwargs, so names and dims must follow the cache's place.
    model, _, _ = model_zoo.build("gpt2")
    example = model_zoo.kv_cache_inputs(model, batch=2, sequence=3, past=5)
    example = {"past_key_values": example["past_key_values"], "input_ids": example["input_ids"],
               "attention_mask": example["attention_mask"]}
    program = onnxport.export(model, (), kwargs=example, dynamic_shapes=_decode_step_shapes(model))
    graph = program.model.graph
    assert [v.name for v in graph.inputs][-2:] == ["input_ids", "attention_mask"]
    assert graph.inputs[0].name == "past_key_values.0.key"
    assert graph.inputs[0].shape[2] == onnxport_dim("past_sequence")
    assert graph.inputs[-2].shape[1] == onnxport_dim("sequence")
    inputs = model_zoo.kv_cache_inputs(model, batch=3, sequence=1, past=6, seed=1)
    inputs = {k: inputs[k] for k in example}
    for a, e in zip(program(**inputs), _eager(model, inputs)):
        torch.testing.assert_close(a, e, rtol=1e-3, atol=1e-4)


# -- issue 7: a batch of 1 as the example, the batch dynamic -------------------------------
BATCH1_IN_CI = ["torchvision.resnet18", "torchvision.mobilenet_v3_small",
                "timm.vit_tiny_patch16_224",
                pytest.param("transformers.BertModel", marks=pytest.mark.xfail(
                    not torch_at_least("2.14"), strict=False,
                    reason="torch 2.11 fixes the batch at BertEmbeddings' token_type_ids "
                           "expand when sizes 0 and 1 stay symbolic; the retry at batch 2 "
                           "bounds the sequence by the 512 positions (eager's limit too), "
                           "which warns. Transformers 5.15, 5.17 and 5.24 fail alike on "
                           "torch 2.11")),
                "transformers.LlamaForCausalLM", "transformers.T5ForConditionalGeneration",
                "transformers.WhisperForConditionalGeneration"]


@pytest.mark.parametrize("name", BATCH1_IN_CI)
def test_dynamic_batch_from_an_example_batch_of_one(name):
    case = model_zoo.batch1_case(name)
    args, kwargs = case.make_inputs(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DynamicDimensionFixedWarning)  # no dim may end up static
        program = onnxport.export(case.model, args, kwargs=kwargs, dynamic_axes=case.dynamic_axes)
    graph = program.model.graph
    for value in [*graph.inputs, *graph.outputs]:
        assert value.shape[0] == onnxport_dim("batch"), value
    # Batch 1 as exported, then batch 3 (at another sequence length for the text models).
    for sizes in [(1,), (3, model_zoo.OTHER_SEQUENCE) if case.text else (3,)]:
        args, kwargs = case.make_inputs(*sizes)
        assert_matches_eager(program, case.model, args, kwargs)


# Mixtures of experts: transformers multiplies each expert's rows with grouped_mm, which
# torch.export records as transformers' own fallback op and tracing as aten::_grouped_mm
# (whose fake kernel refused float32): neither had a translation.
@pytest.mark.parametrize("dynamo", [None, False], ids=["default", "torchscript"])
@pytest.mark.parametrize("name", ["transformers.MixtralForCausalLM",
                                  "transformers.Qwen2MoeForCausalLM"])
def test_mixture_of_experts_with_dynamic_batch_and_sequence(name, dynamo):
    case = model_zoo.batch1_case(name)
    args, kwargs = case.make_inputs(2)
    program = onnxport.export(case.model, args, kwargs=kwargs, dynamic_axes=case.dynamic_axes,
                              dynamo=dynamo)
    for sizes in [(2,), (3, model_zoo.OTHER_SEQUENCE)]:
        args, kwargs = case.make_inputs(*sizes)
        assert_matches_eager(program, case.model, args, kwargs)


# -- issue 17: files every supported ONNX Runtime loads --------------------------------------
# Their attention modules build the mask path twice; ZeroMaskedRows once named two nodes alike,
# which ONNX Runtime 1.30 refuses (1.32 refuses three of them) and onnx.checker lets through.
ATTENTION_TWICE = ["transformers.ViTModel", "transformers.BartForConditionalGeneration",
                   "transformers.Wav2Vec2Model", "transformers.WhisperForConditionalGeneration",
                   "transformers.Dinov2Model", "transformers.SiglipVisionModel",
                   "transformers.MarianMTModel"]


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("name", ATTENTION_TWICE)
def test_every_node_and_value_name_is_unique(name, dynamic):
    # The static export is the one that named two nodes alike (its masks are constants).
    case = model_zoo.batch1_case(name)
    args, kwargs = case.make_inputs(2)
    program = onnxport.export(case.model, args, kwargs=kwargs,
                              dynamic_axes=case.dynamic_axes if dynamic else None)
    proto = program.model_proto
    nodes = [node.name for node in proto.graph.node]
    assert len(nodes) == len(set(nodes))
    values = [v for node in proto.graph.node for v in node.output]
    assert len(values) == len(set(values))
    other = [(3, model_zoo.OTHER_SEQUENCE) if case.text else (3,)] if dynamic else []
    for sizes in [(2,), *other]:
        args, kwargs = case.make_inputs(*sizes)
        assert_matches_eager(program, case.model, args, kwargs)
