"""transformers caches flatten to tensors named after their layer and role."""

import pytest
import torch

from onnxport import hf_cache
from onnxport.pytree_names import (
    bookkeeping_outputs, exported_leaves, output_names, tensor_leaves)

transformers = pytest.importorskip("transformers")


def _filled(cache, layers, past):
    for layer in range(layers):
        cache.update(torch.randn(1, 2, past, 4), torch.randn(1, 2, past, 4), layer)
    return cache


def test_dynamic_cache_leaves_are_named_by_layer_and_role():
    hf_cache.register_cache_pytrees()
    cache = _filled(transformers.DynamicCache(), layers=2, past=3)
    leaves = tensor_leaves({"past_key_values": cache})
    assert [".".join(path) for path, _ in leaves] == [
        "past_key_values.0.key", "past_key_values.0.value",
        "past_key_values.1.key", "past_key_values.1.value"]
    assert leaves[3][1] is cache.layers[1].values


def test_encoder_decoder_cache_leaves_say_which_attention():
    hf_cache.register_cache_pytrees()
    cache = transformers.EncoderDecoderCache(
        _filled(transformers.DynamicCache(), 1, 3), _filled(transformers.DynamicCache(), 1, 5))
    names = [".".join(path) for path, _ in tensor_leaves(cache)]
    assert names == ["0.decoder.key", "0.decoder.value", "0.encoder.key", "0.encoder.value"]


def test_output_names_follow_keys_and_rename_the_returned_cache():
    hf_cache.register_cache_pytrees()
    cache = _filled(transformers.DynamicCache(), layers=1, past=3)
    outputs = transformers.modeling_outputs.CausalLMOutputWithPast(
        logits=torch.randn(1, 2, 5), past_key_values=cache)
    spec = torch.utils._pytree.tree_structure(outputs)
    assert output_names(spec) == ["logits", "present.0.key", "present.0.value"]


def test_plain_tuple_outputs_keep_no_name():
    spec = torch.utils._pytree.tree_structure((torch.randn(1), [torch.randn(1)]))
    assert output_names(spec) == [None, None]


def test_unknown_cache_context_names_leaves_by_position():
    assert hf_cache.cache_leaf_names({"unexpected": "form"}, 2) == ["0", "1"]


def test_sliding_window_layers_keep_their_bookkeeping_out_of_the_outputs():
    hf_cache.register_cache_pytrees()
    cache = transformers.DynamicCache(config=transformers.MistralConfig(
        num_hidden_layers=2, hidden_size=16, num_attention_heads=2, num_key_value_heads=2,
        sliding_window=4))
    _filled(cache, layers=2, past=3)
    outputs = transformers.modeling_outputs.CausalLMOutputWithPast(
        logits=torch.randn(1, 2, 5), past_key_values=cache)
    leaves, spec = torch.utils._pytree.tree_flatten(outputs)
    names = output_names(spec)
    assert [names[k] for k in sorted(bookkeeping_outputs(spec))] == [
        "present.0._sliding_window_tensor", "present.1._sliding_window_tensor"]
    assert [leaf is layer.keys for leaf, layer in zip(exported_leaves(outputs)[1::2],
                                                      cache.layers)] == [True, True]


def _sliding_window_model(name):
    small = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, intermediate_size=64, max_position_embeddings=64)
    if name == "mistral":  # every layer slides, over fewer tokens than the inputs have
        config = transformers.MistralConfig(sliding_window=6, **small)
        return transformers.MistralForCausalLM(config).eval()
    # Qwen2 slides from layer max_window_layers on: one full layer, one sliding
    config = transformers.Qwen2Config(use_sliding_window=True, sliding_window=6,
                                      max_window_layers=1, **small)
    return transformers.Qwen2ForCausalLM(config).eval()


# (On torch 2.11, mistral on dynamo=False failed until the traced graph's fake run started
# again from a batch of 2: from 1, SDPA decided whether read-back sizes broadcast, which
# torch.export's replay could not for unbacked sizes.)
@pytest.mark.parametrize("name,dynamo", [("mistral", True), ("qwen2", True), ("mistral", False)])
def test_sliding_window_model_exports_its_kv_cache_as_keys_and_values(name, dynamo):
    import onnxport

    torch.manual_seed(0)
    model = _sliding_window_model(name)

    def inputs(batch, sequence):
        generator = torch.Generator().manual_seed(batch * 100 + sequence)
        return {"input_ids": torch.randint(0, 100, (batch, sequence), generator=generator),
                "attention_mask": torch.ones(batch, sequence, dtype=torch.long)}

    axes = {"input_ids": {0: "batch", 1: "sequence"},
            "attention_mask": {0: "batch", 1: "sequence"}}
    program = onnxport.export(model, (), kwargs=inputs(1, 16), dynamic_axes=axes,
                              dynamo=dynamo)
    assert program.output_names == ["logits"] + [
        f"present.{layer}.{role}" for layer in range(2) for role in ("key", "value")]
    # Batch 1 as exported, then batch 3 at a sequence still longer than the window, then one
    # shorter than it.
    for batch, sequence in [(1, 16), (3, 11), (3, 4)]:
        kwargs = inputs(batch, sequence)
        with torch.no_grad():
            expected = exported_leaves(model(**kwargs))
        actual = program(**kwargs)
        assert len(actual) == len(expected) == 5
        for a, e in zip(actual, expected):
            torch.testing.assert_close(a, e, rtol=1e-3, atol=1e-4)


def test_a_cache_given_by_the_new_keyword_has_the_usual_names():
    # transformers 5.24 takes the cache as ``cache=`` and returns it as ``cache``; the ONNX
    # names stay past_key_values.N.* in and present.N.* out, as on older versions.
    import inspect

    import model_zoo
    import onnxport

    model, _, _ = model_zoo.transformers_model("llama")
    if "cache" not in inspect.signature(model.forward).parameters:
        pytest.skip("this transformers takes the cache as past_key_values only")
    inputs = model_zoo.kv_cache_inputs(model, batch=2, sequence=3, past=5)
    inputs["cache"] = inputs.pop("past_key_values")
    program = onnxport.export(model, (), kwargs=inputs)
    layers = model.config.num_hidden_layers
    roles = [f"{n}.{role}" for n in range(layers) for role in ("key", "value")]
    assert program.input_names == ["input_ids", "attention_mask"] + [
        f"past_key_values.{r}" for r in roles]
    assert program.output_names == ["logits"] + [f"present.{r}" for r in roles]
    def again():  # the cache is updated in place by a run: a fresh one each time
        fresh = model_zoo.kv_cache_inputs(model, batch=2, sequence=3, past=5)
        fresh["cache"] = fresh.pop("past_key_values")
        return fresh

    with torch.no_grad():
        expected = exported_leaves(model(**again()))
    actual = program(**again())
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, rtol=1e-3, atol=1e-4)
