"""The models issues 2 and 7 name, built with random weights, with example inputs (shared by the
tests and the benchmarks)."""

from __future__ import annotations

import dataclasses
from typing import Callable

import torch

TORCHVISION_MODELS = [
    "alexnet", "vgg11", "resnet18", "resnet50", "densenet121", "inception_v3", "googlenet",
    "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "shufflenet_v2_x1_0",
    "squeezenet1_0", "regnet_y_400mf", "convnext_tiny", "vit_b_16", "swin_t",
]
TRANSFORMERS_MODELS = ["bert", "gpt2", "llama", "t5"]


class MLPModel(torch.nn.Module):
    """The MLP of the TorchDynamo exporter document."""

    def __init__(self):
        super().__init__()
        self.fc0 = torch.nn.Linear(8, 8, bias=True)
        self.fc1 = torch.nn.Linear(8, 4, bias=True)
        self.fc2 = torch.nn.Linear(4, 2, bias=True)
        self.fc3 = torch.nn.Linear(2, 2, bias=True)

    def forward(self, tensor_x: torch.Tensor):
        tensor_x = self.fc0(tensor_x)
        tensor_x = torch.sigmoid(tensor_x)
        tensor_x = self.fc1(tensor_x)
        tensor_x = torch.sigmoid(tensor_x)
        tensor_x = self.fc2(tensor_x)
        tensor_x = torch.sigmoid(tensor_x)
        return self.fc3(tensor_x)


def torchvision_model(name: str, batch: int = 2):
    import torchvision

    torch.manual_seed(0)
    kwargs = {"weights": None}
    if name in ("inception_v3", "googlenet"):
        kwargs.update(init_weights=False, aux_logits=False)
    model = torchvision.models.get_model(name, **kwargs).eval()
    size = 299 if name == "inception_v3" else 224
    return model, (torch.randn(batch, 3, size, size),), {}


def transformers_model(name: str, batch: int = 2, seq: int = 16):
    import transformers as tf

    torch.manual_seed(0)
    ids = torch.randint(0, 100, (batch, seq))
    mask = torch.ones(batch, seq, dtype=torch.long)
    if name == "bert":
        config = tf.BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2,
                               num_attention_heads=4, intermediate_size=128)
        return tf.BertModel(config).eval(), (ids,), {"attention_mask": mask}
    if name == "gpt2":
        config = tf.GPT2Config(vocab_size=100, n_embd=64, n_layer=2, n_head=4, n_positions=64)
        return tf.GPT2LMHeadModel(config).eval(), (ids,), {"attention_mask": mask}
    if name == "llama":
        config = tf.LlamaConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2,
                                num_attention_heads=4, num_key_value_heads=2,
                                intermediate_size=128, max_position_embeddings=64)
        return tf.LlamaForCausalLM(config).eval(), (ids,), {"attention_mask": mask}
    if name == "t5":
        config = tf.T5Config(vocab_size=100, d_model=64, d_kv=16, num_layers=2, num_heads=4,
                             d_ff=128, decoder_start_token_id=0)
        return tf.T5ForConditionalGeneration(config).eval(), (ids,), {
            "attention_mask": mask, "decoder_input_ids": ids[:, :8]}
    raise KeyError(name)


def kv_cache_inputs(model, batch: int, sequence: int, past: int, seed: int = 0) -> dict:
    """Keyword inputs of one decoding step of a causal LM from ``transformers_model``: ``sequence``
    new tokens after ``past`` cached ones, the cache a DynamicCache of random keys and values,
    and the first row left-padded (its first two cached positions masked out)."""
    from transformers import DynamicCache

    config = model.config
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = config.hidden_size // config.num_attention_heads
    generator = torch.Generator().manual_seed(seed)
    cache = DynamicCache(config=config)
    for layer in range(config.num_hidden_layers):
        key, value = (torch.randn(batch, heads, past, head_dim, generator=generator)
                      for _ in range(2))
        cache.update(key, value, layer)
    mask = torch.ones(batch, past + sequence, dtype=torch.long)
    mask[0, :min(2, past)] = 0
    ids = torch.randint(0, config.vocab_size, (batch, sequence), generator=generator)
    return {"input_ids": ids, "attention_mask": mask, "past_key_values": cache}


def mlp_model(batch: int = 97):
    torch.manual_seed(0)
    return MLPModel().eval(), (torch.rand(batch, 8),), {}


def randomize_(model: torch.nn.Module) -> torch.nn.Module:
    """Give normalization statistics and zero-initialized weights random values, so that no
    output is all zeros or constant and a comparison with ONNX Runtime can fail."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
                module.running_mean.uniform_(-0.2, 0.2, generator=generator)
                module.running_var.uniform_(0.5, 1.5, generator=generator)
        for parameter in model.parameters():
            if parameter.is_floating_point() and not parameter.abs().sum():
                parameter.normal_(0, 0.05, generator=generator)
    return model


def build(name: str, batch: int = 2):
    if name == "mlp":
        return mlp_model()
    if name in TRANSFORMERS_MODELS:
        model, args, kwargs = transformers_model(name, batch)
    else:
        model, args, kwargs = torchvision_model(name, batch)
    return randomize_(model), args, kwargs


def dynamic_axes_for(name: str, args, kwargs, parameter_names) -> dict:
    """Batch dynamic on every input (and sequence too for the transformers)."""
    axes = {}
    names = list(parameter_names)
    for i, arg in enumerate(args):
        axes[names[i]] = {0: "batch"}
        if name in TRANSFORMERS_MODELS:
            axes[names[i]][1] = "sequence"
    for key in kwargs:
        axes[key] = {0: "batch"}
        if name in TRANSFORMERS_MODELS:
            axes[key][1] = "decoder_sequence" if key.startswith("decoder") else "sequence"
    return axes


# -- issue 7: exported from a batch of 1 with a named dynamic batch ----------------------------
BATCH1_TORCHVISION = ["alexnet", "resnet50", "mobilenet_v3_small", "efficientnet_b0",
                      "convnext_tiny", "swin_t", "vit_b_16", "maxvit_t", "inception_v3"]
BATCH1_TIMM = ["resnet50d", "convnext_atto", "vit_tiny_patch16_224", "levit_128s",
               "mobilevitv2_050"]
BATCH1_TRANSFORMERS = ["BertModel", "DistilBertModel", "DebertaV2Model", "GPT2LMHeadModel",
                       "GPTNeoXForCausalLM", "LlamaForCausalLM", "MistralForCausalLM",
                       "Phi3ForCausalLM", "Qwen2ForCausalLM", "T5ForConditionalGeneration",
                       "BartForConditionalGeneration", "WhisperForConditionalGeneration",
                       "ViTModel", "Wav2Vec2Model", "MixtralForCausalLM", "Qwen2MoeForCausalLM"]
BATCH1_MODELS = (["torchvision." + n for n in BATCH1_TORCHVISION]
                 + ["timm." + n for n in BATCH1_TIMM]
                 + ["transformers." + n for n in BATCH1_TRANSFORMERS])
SEQUENCE, OTHER_SEQUENCE = 16, 11  # text models run at a second sequence length too


@dataclasses.dataclass
class Batch1Case:
    """A model and a way to make its inputs at any batch (and sequence length)."""

    model: torch.nn.Module
    make_inputs: Callable[..., tuple[tuple, dict]]  # (batch, sequence) -> (args, kwargs)
    dynamic_axes: dict  # by forward parameter name
    text: bool = False


def batch1_case(name: str) -> Batch1Case:
    family, _, model_name = name.partition(".")
    torch.manual_seed(0)
    if family == "torchvision":
        model, (x,), _ = torchvision_model(model_name, batch=1)
        size = x.shape[-1]
        return Batch1Case(randomize_(model), lambda batch, sequence=None: (
            (torch.randn(batch, 3, size, size),), {}), {"x": {0: "batch"}})
    if family == "timm":
        import timm

        model = timm.create_model(model_name, pretrained=False).eval()
        size = model.pretrained_cfg.get("input_size", (3, 224, 224))
        return Batch1Case(randomize_(model), lambda batch, sequence=None: (
            (torch.randn(batch, *size),), {}), {"x": {0: "batch"}})
    if family == "transformers":
        return _transformers_batch1(model_name)
    raise KeyError(name)


def _text_inputs(names, vocab=100, decoder=False):
    def make(batch, sequence=SEQUENCE):
        generator = torch.Generator().manual_seed(batch * 100 + sequence)
        kwargs = {"input_ids": torch.randint(0, vocab, (batch, sequence), generator=generator)}
        if "attention_mask" in names:
            mask = torch.ones(batch, sequence, dtype=torch.long)
            # The first row left-padded, as batched generation pads: a causal LM's first rows
            # then attend to nothing, which torch's attention gives zeros (and Softmax nan).
            mask[0, :sequence // 4] = 0
            kwargs["attention_mask"] = mask
        if decoder:
            kwargs["decoder_input_ids"] = torch.randint(
                0, vocab, (batch, max(2, sequence // 2)), generator=generator)
        return (), kwargs
    return make


_TEXT_AXES = {"input_ids": {0: "batch", 1: "sequence"},
              "attention_mask": {0: "batch", 1: "sequence"},
              "decoder_input_ids": {0: "batch", 1: "decoder_sequence"}}


def _transformers_batch1(name: str) -> Batch1Case:
    import transformers as tf

    small = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=64)
    decoder_only = dict(vocab_size=100, max_position_embeddings=64, **small)
    configs = {
        "BertModel": lambda: tf.BertConfig(vocab_size=100, **small),
        "DistilBertModel": lambda: tf.DistilBertConfig(vocab_size=100, dim=32, n_layers=2,
                                                       n_heads=4, hidden_dim=64),
        "DebertaV2Model": lambda: tf.DebertaV2Config(vocab_size=100, **small),
        "GPT2LMHeadModel": lambda: tf.GPT2Config(vocab_size=100, n_embd=32, n_layer=2,
                                                 n_head=4, n_positions=64),
        "GPTNeoXForCausalLM": lambda: tf.GPTNeoXConfig(**decoder_only),
        "LlamaForCausalLM": lambda: tf.LlamaConfig(num_key_value_heads=2, **decoder_only),
        "MistralForCausalLM": lambda: tf.MistralConfig(num_key_value_heads=2, **decoder_only),
        "Phi3ForCausalLM": lambda: tf.Phi3Config(num_key_value_heads=2, pad_token_id=0,
                                                 **decoder_only),
        "Qwen2ForCausalLM": lambda: tf.Qwen2Config(num_key_value_heads=2, **decoder_only),
        # Mixtures of experts (grouped products of each expert's rows)
        "MixtralForCausalLM": lambda: tf.MixtralConfig(
            num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, **decoder_only),
        "Qwen2MoeForCausalLM": lambda: tf.Qwen2MoeConfig(
            num_key_value_heads=2, num_experts=4, num_experts_per_tok=2,
            moe_intermediate_size=16, shared_expert_intermediate_size=16, **decoder_only),
        "T5ForConditionalGeneration": lambda: tf.T5Config(
            vocab_size=100, d_model=32, d_kv=8, num_layers=2, num_heads=4, d_ff=64,
            decoder_start_token_id=0),
        "BartForConditionalGeneration": lambda: tf.BartConfig(
            vocab_size=100, d_model=32, encoder_layers=2, decoder_layers=2,
            encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
            decoder_ffn_dim=64, max_position_embeddings=64),
        "MarianMTModel": lambda: tf.MarianConfig(
            vocab_size=100, d_model=32, encoder_layers=2, decoder_layers=2,
            encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
            decoder_ffn_dim=64, max_position_embeddings=64, pad_token_id=0,
            decoder_start_token_id=0),
    }
    if name in configs:
        model = randomize_(getattr(tf, name)(configs[name]()).eval())
        decoder = name in ("T5ForConditionalGeneration", "BartForConditionalGeneration",
                           "MarianMTModel")
        names = ["input_ids", "attention_mask"] + (["decoder_input_ids"] if decoder else [])
        return Batch1Case(model, _text_inputs(names, decoder=decoder),
                          {n: _TEXT_AXES[n] for n in names}, text=True)
    if name == "WhisperForConditionalGeneration":
        config = tf.WhisperConfig(vocab_size=100, d_model=32, encoder_layers=2, decoder_layers=2,
                                  encoder_attention_heads=4, decoder_attention_heads=4,
                                  encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=16,
                                  max_source_positions=32, max_target_positions=32,
                                  decoder_start_token_id=0, pad_token_id=0)
        model = randomize_(tf.WhisperForConditionalGeneration(config).eval())

        def make(batch, sequence=8):
            generator = torch.Generator().manual_seed(batch * 100 + sequence)
            return (), {"input_features": torch.randn(batch, 16, 64, generator=generator),
                        "decoder_input_ids": torch.randint(0, 100, (batch, sequence),
                                                           generator=generator)}
        return Batch1Case(model, make, {"input_features": {0: "batch"},
                                        "decoder_input_ids": {0: "batch", 1: "decoder_sequence"}},
                          text=True)
    vision = {
        "ViTModel": lambda: tf.ViTModel(tf.ViTConfig(image_size=32, patch_size=8,
                                                     num_channels=3, **small)),
        "Dinov2Model": lambda: tf.Dinov2Model(tf.Dinov2Config(image_size=32, patch_size=8,
                                                              num_channels=3, **small)),
        "SiglipVisionModel": lambda: tf.SiglipVisionModel(tf.SiglipVisionConfig(
            image_size=32, patch_size=8, num_channels=3, **small)),
    }
    if name in vision:
        model = randomize_(vision[name]().eval())
        return Batch1Case(model, lambda batch, sequence=None: (
            (), {"pixel_values": torch.randn(batch, 3, 32, 32)}), {"pixel_values": {0: "batch"}})
    if name == "Wav2Vec2Model":
        config = tf.Wav2Vec2Config(conv_dim=(16,) * 7, num_conv_pos_embeddings=16,
                                   num_conv_pos_embedding_groups=4, **small)
        model = randomize_(tf.Wav2Vec2Model(config).eval())

        def make(batch, sequence=SEQUENCE):
            # sequence counts frames of audio: 320 samples each
            generator = torch.Generator().manual_seed(batch * 100 + sequence)
            return (), {"input_values": torch.randn(batch, 320 * sequence, generator=generator)}
        return Batch1Case(model, make, {"input_values": {0: "batch", 1: "samples"}}, text=True)
    raise KeyError(name)
