"""``transformers:ID_OR_FOLDER``: a model loaded with ``from_pretrained`` for a task, with example
inputs named as transformers names them and their batch and sequence (or image size) dynamic.

Each input is described by its dims: a number (static) or a label ("batch", "sequence"...), and
a label means the same size in every input that has it. ``--shape`` sets the sizes of the labels
of the input it names; the labels become the ONNX names of the dynamic dims."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import os
from typing import Any

from onnxport.cli.errors import ModelBuildError, UsageError
from onnxport.cli.sources import DTYPES, Built, did_you_mean

# task -> the transformers Auto class that loads a model for it
TASKS = {
    "feature-extraction": "AutoModel",
    "text-classification": "AutoModelForSequenceClassification",
    "text-generation": "AutoModelForCausalLM",
    "text-generation-with-past": "AutoModelForCausalLM",
    "text2text-generation": "AutoModelForSeq2SeqLM",
    "image-classification": "AutoModelForImageClassification",
    "object-detection": "AutoModelForObjectDetection",
    "automatic-speech-recognition": "AutoModelForSpeechSeq2Seq",
    "zero-shot-image-classification": "AutoModelForZeroShotImageClassification",
}
# other names for them (optimum's and transformers' older ones)
ALIASES = {
    "default": "feature-extraction",
    "seq2seq": "text2text-generation",
    "seq2seq-lm": "text2text-generation",
    "causal-lm": "text-generation",
    "causal-lm-with-past": "text-generation-with-past",
    "sequence-classification": "text-classification",
    "speech2seq-lm": "automatic-speech-recognition",
}
# the example sizes of each label; distinct so that torch.export does not tie two of them
SIZES = {"batch": 2, "sequence": 7, "decoder_sequence": 6, "past_sequence": 5, "height": 64,
         "width": 64, "samples": 5120}
_PAST_TOTAL = "past_sequence + sequence"


def check_task(task: str | None) -> str | None:
    """The task's canonical name; a usage error (without importing anything) if unknown."""
    if task is None:
        return None
    task = ALIASES.get(task, task)
    if task not in TASKS:
        raise UsageError(f"unknown --task {task!r}{did_you_mean(task, [*TASKS, *ALIASES])} "
                         f"(tasks: {', '.join(TASKS)})")
    return task


@dataclasses.dataclass
class InputSpec:
    name: str
    dims: list  # int (static) or str (a label, dynamic)
    kind: str  # "ids", "mask", "zeros", "float"


def load(name: str, options) -> Built:
    import torch

    try:
        import transformers
    except ImportError:
        raise UsageError("transformers is not installed; run `pip install transformers`") \
            from None
    if not name:
        raise UsageError("give a model after transformers:, e.g. transformers:path/to/folder "
                         "or transformers:bert-base-uncased")
    looks_like_path = os.path.isabs(name) or name.startswith((".", "~")) or os.path.exists(name)
    name = os.path.expanduser(name)
    if looks_like_path and not os.path.isdir(name):
        raise UsageError(f"transformers:{name}: no such folder")
    folder = os.path.join(name, getattr(options, "subfolder", None) or "")
    if looks_like_path and not os.path.isfile(os.path.join(folder, "config.json")):
        raise UsageError(f"transformers:{name}: the folder {folder!r} has no config.json (write "
                         "one with model.save_pretrained(folder))")
    # optimum-cli's options of the same names
    loading = {"trust_remote_code": bool(getattr(options, "trust_remote_code", False))}
    for option in ("cache_dir", "revision", "subfolder"):
        if getattr(options, option, None):
            loading[option] = getattr(options, option)
    with _quiet_transformers(transformers):
        try:
            config = transformers.AutoConfig.from_pretrained(name, **loading)
        except Exception as error:
            raise UsageError(f"cannot load the configuration of {name!r}: "
                             f"{_first_line(error)}") from None
        task = check_task(options.task) or infer_task(config)
        model_class = _model_class(transformers, config, task, inferred=options.task is None)
        dtype = getattr(torch, DTYPES[options.dtype]) if options.dtype else torch.float32
        try:
            model = model_class.from_pretrained(name, dtype=dtype, **loading)
        except Exception as error:
            raise ModelBuildError(f"{model_class.__name__}.from_pretrained({name!r}) failed: "
                                  f"{type(error).__name__}: {_first_line(error)}") from error
    device = options.device or "cpu"
    model.eval().to(device)
    with_past = task.endswith("-with-past")
    if hasattr(model.config, "use_cache"):
        model.config.use_cache = with_past  # a cache is returned only when it is asked for
    specs = input_specs(model, task)
    sizes = _sizes(specs, options.shape, _label_sizes(options, specs))
    kwargs = make_inputs(model, specs, sizes, dtype=dtype, device=device, seed=0)
    if with_past:
        kwargs = _with_cache(model, kwargs, specs, sizes, dtype, device)
    elif "use_cache" in inspect.signature(model.forward).parameters:
        kwargs["use_cache"] = False  # T5's decoder reads its own config's, not the model's
    dynamic = {spec.name: {axis: dim for axis, dim in enumerate(spec.dims) if isinstance(dim, str)}
               for spec in specs}
    return Built(model, (), kwargs, {k: v for k, v in dynamic.items() if v},
                 input_names=[spec.name for spec in specs], task=task)


@contextlib.contextmanager
def _quiet_transformers(transformers):
    """No loading bar or config remarks from transformers across the command's progress."""
    logging = transformers.utils.logging
    verbosity, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        logging.set_verbosity(verbosity)
        if bars:
            logging.enable_progress_bar()


def infer_task(config) -> str:
    """The task of the first of the config's architectures (what save_pretrained wrote)."""
    architectures = getattr(config, "architectures", None) or []
    if not architectures:
        return "feature-extraction"
    arch = architectures[0]
    if arch.endswith(("ForCausalLM", "LMHeadModel")):
        return "text-generation"
    if arch.endswith(("ForConditionalGeneration", "ForSpeechSeq2Seq", "ForSeq2SeqLM")):
        if hasattr(config, "num_mel_bins"):
            return "automatic-speech-recognition"
        if getattr(config, "is_encoder_decoder", False):
            return "text2text-generation"
    if arch.endswith("ForSequenceClassification"):
        return "text-classification"
    if arch.endswith("ForImageClassification"):
        return "image-classification"
    if arch.endswith("ForObjectDetection"):
        return "object-detection"
    if arch.endswith("ForCTC"):
        return "automatic-speech-recognition"
    if hasattr(config, "text_config") and hasattr(config, "vision_config") and \
            arch.endswith("Model"):
        return "zero-shot-image-classification"
    if arch.endswith("Model"):
        return "feature-extraction"
    raise UsageError(f"cannot tell the task of {arch} from its name; give --task "
                     f"({', '.join(TASKS)})")


def _model_class(transformers, config, task: str, *, inferred: bool):
    architectures = getattr(config, "architectures", None) or []
    if inferred and architectures and hasattr(transformers, architectures[0]):
        return getattr(transformers, architectures[0])  # exactly the class that was saved
    auto = TASKS[task]
    if task == "automatic-speech-recognition" and not hasattr(config, "num_mel_bins"):
        auto = "AutoModelForCTC"  # wav2vec2 and its kind: raw audio in, characters out
    return getattr(transformers, auto)


def input_specs(model, task: str) -> list[InputSpec]:
    """The inputs the task feeds the model, in the order optimum's exports take them."""
    config = model.config
    parameters = inspect.signature(model.forward).parameters
    main = getattr(model, "main_input_name", "input_ids")
    encoder_decoder = getattr(config, "is_encoder_decoder", False)
    specs = []
    if main == "input_ids":
        specs += [InputSpec("input_ids", ["batch", "sequence"], "ids")]
        if "attention_mask" in parameters:
            mask = _PAST_TOTAL if task == "text-generation-with-past" else "sequence"
            specs.append(InputSpec("attention_mask", ["batch", mask], "mask"))
        if "token_type_ids" in parameters and getattr(config, "type_vocab_size", 0):
            specs.append(InputSpec("token_type_ids", ["batch", "sequence"], "zeros"))
        if "pixel_values" in parameters:  # CLIP and its kind: text and image
            specs.append(_pixel_values(config))
    elif main == "pixel_values":
        specs.append(_pixel_values(config))
    elif main == "input_features":
        frames = 2 * getattr(config, "max_source_positions", 1500)  # Whisper needs exactly these
        specs.append(InputSpec("input_features", ["batch", config.num_mel_bins, frames], "float"))
    elif main == "input_values":
        specs.append(InputSpec("input_values", ["batch", "samples"], "float"))
    else:
        raise UsageError(f"{type(model).__name__} takes {main!r} first, which the command "
                         "cannot make inputs for; export it from Python with onnxport.export")
    if encoder_decoder and task in ("text2text-generation", "automatic-speech-recognition"):
        specs.append(InputSpec("decoder_input_ids", ["batch", "decoder_sequence"], "ids"))
    if task == "text-generation-with-past":
        heads, head_dim, layers = _cache_geometry(config)
        for layer in range(layers):
            for role in ("key", "value"):
                specs.append(InputSpec(f"past_key_values.{layer}.{role}",
                                       ["batch", heads, "past_sequence", head_dim], "float"))
    return specs


def _pixel_values(config) -> InputSpec:
    vision = getattr(config, "vision_config", None) or config
    channels = getattr(vision, "num_channels", 3)
    size = getattr(vision, "image_size", None)
    if size is None:
        return InputSpec("pixel_values", ["batch", channels, "height", "width"], "float")
    # ViT and its kind check the image size against the config's: static
    height, width = (size, size) if isinstance(size, int) else tuple(size)
    return InputSpec("pixel_values", ["batch", channels, height, width], "float")


def _cache_geometry(config) -> tuple[int, int, int]:
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = text.num_attention_heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    return kv_heads, head_dim, text.num_hidden_layers


# --batch-size and the like (optimum-cli's names): the label whose example size each sets
SIZE_OPTIONS = {"batch_size": "batch", "sequence_length": "sequence", "height": "height",
                "width": "width"}


def _label_sizes(options, specs: list[InputSpec]) -> dict[str, int]:
    """The example sizes that --batch-size, --sequence-length, --height and --width give."""
    labels = {dim for spec in specs for dim in spec.dims if isinstance(dim, str)}
    sizes = {}
    for option, label in SIZE_OPTIONS.items():
        size = getattr(options, option, None)
        if size is None:
            continue
        if label not in labels:
            shapes = ", ".join(f"{s.name} {' x '.join(map(str, s.dims))}" for s in specs)
            raise UsageError(f"--{option.replace('_', '-')}: no input of this model has a "
                             f"{label} dim (its inputs: {shapes})")
        sizes[label] = size
    return sizes


def _sizes(specs: list[InputSpec], shapes: dict[str, tuple[int, ...]],
           label_sizes: dict[str, int] | None = None) -> dict[str, Any]:
    """The size of each label: the defaults, then those of --batch-size and the like, then
    those ``--shape`` gives; an input's static dims that ``--shape`` changes become that
    input's own (``spec.dims`` is updated)."""
    sizes = {**SIZES, **(label_sizes or {})}
    by_name = {spec.name: spec for spec in specs}
    for name, shape in shapes.items():
        spec = by_name.get(name)
        if spec is None:
            raise UsageError(f"--shape {name}=...: the model has no input {name!r} (its inputs: "
                             f"{', '.join(by_name)}){did_you_mean(name, list(by_name))}")
        if len(shape) != len(spec.dims):
            raise UsageError(f"--shape {name}={'x'.join(map(str, shape))}: {name} has "
                             f"{len(spec.dims)} dimensions ({' x '.join(map(str, spec.dims))})")
        for axis, (dim, size) in enumerate(zip(spec.dims, shape)):
            if dim == _PAST_TOTAL:
                continue  # follows from the other two
            if isinstance(dim, str):
                sizes[dim] = size
            else:
                spec.dims[axis] = size
    return sizes


def _size(dim, sizes: dict[str, int]) -> int:
    if dim == _PAST_TOTAL:
        return sizes["past_sequence"] + sizes["sequence"]
    return sizes[dim] if isinstance(dim, str) else dim


def make_inputs(model, specs: list[InputSpec], sizes: dict[str, int], *, dtype, device,
                seed: int) -> dict[str, Any]:
    """Random inputs of the given sizes (token ids within the vocabulary, masks of ones)."""
    import torch

    config = model.config
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    vocab = getattr(text, "vocab_size", None) or 100
    generator = torch.Generator().manual_seed(seed)
    inputs = {}
    for spec in specs:
        shape = [_size(dim, sizes) for dim in spec.dims]
        if spec.kind == "ids":
            tensor = torch.randint(0, vocab, shape, generator=generator)
        elif spec.kind == "mask":
            tensor = torch.ones(shape, dtype=torch.long)
        elif spec.kind == "zeros":
            tensor = torch.zeros(shape, dtype=torch.long)
        else:
            tensor = torch.randn(shape, generator=generator).to(dtype)
        inputs[spec.name] = tensor.to(device)
    return inputs


def _with_cache(model, inputs: dict, specs, sizes, dtype, device) -> dict:
    """The ``past_key_values.N.key/value`` tensors as the DynamicCache the model takes."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    _, _, layers = _cache_geometry(model.config)
    for layer in range(layers):
        cache.update(inputs.pop(f"past_key_values.{layer}.key"),
                     inputs.pop(f"past_key_values.{layer}.value"), layer)
    # transformers 5.24 takes it as cache= (past_key_values= is deprecated there)
    field = "cache" if "cache" in inspect.signature(model.forward).parameters else \
        "past_key_values"
    return {**inputs, field: cache}


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]
