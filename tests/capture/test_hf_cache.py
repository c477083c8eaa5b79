"""transformers caches flatten to tensors named after their layer and role."""

import pytest
import torch

from onnxport.capture import hf_cache
from onnxport.capture.pytree_names import output_names, tensor_leaves

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
