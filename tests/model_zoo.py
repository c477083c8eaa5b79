"""The models issue 2 names, built with random weights, with example inputs (shared by the
tests and the benchmark)."""

from __future__ import annotations

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
