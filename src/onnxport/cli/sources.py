"""SPEC -> the model in eval mode with example inputs: ``torchvision:``, ``timm:``,
``transformers:`` (in ``cli/transformers_source.py``) or ``path/to/file.py:factory``; and what
every source shares: ``--weights``, ``--dtype``, ``--device`` and ``--shape``."""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import importlib.util
import os
import sys
from typing import Any, Sequence

from onnxport.cli.errors import ModelBuildError, UsageError

SPEC_FORMS = "torchvision:NAME, timm:NAME, transformers:ID_OR_FOLDER or path/to/file.py:factory"


@dataclasses.dataclass
class Built:
    """A model ready to export: inputs, the dynamic axes its source makes by default (keyed by
    ONNX input name), and the ONNX names of its tensor inputs in graph order, when known."""

    model: Any
    args: tuple
    kwargs: dict
    dynamic_axes: dict[str, dict[int, str]] = dataclasses.field(default_factory=dict)
    input_names: list[str] | None = None
    task: str | None = None


def load_spec(spec: str, options) -> Built:
    """The model in eval mode with example inputs, from SPEC."""
    source, separator, name = spec.partition(":")
    if separator and source == "transformers":
        from onnxport.cli import transformers_source

        return transformers_source.load(name, options)
    if options.task is not None:
        raise UsageError("--task is for transformers:ID_OR_FOLDER models only")
    batch = 1  # a dim asked to be dynamic stays dynamic from a batch of 1
    if separator and source == "torchvision":
        return Built(*torchvision_model(name, batch))
    if separator and source == "timm":
        return Built(*timm_model(name, batch))
    path, separator, factory = spec.rpartition(":")
    if not separator or not path.endswith(".py"):
        raise UsageError(f"cannot read SPEC {spec!r}: expected {SPEC_FORMS}")
    return Built(*factory_model(path, factory))


def torchvision_model(name: str, batch: int):
    import torch

    try:
        import torchvision
    except ImportError:
        raise UsageError("torchvision is not installed; run `pip install torchvision`") from None
    known = torchvision.models.list_models()
    if name not in known:
        raise UsageError(f"unknown torchvision model {name!r}{did_you_mean(name, known)}")
    options: dict[str, Any] = {"weights": None}
    if name in ("inception_v3", "googlenet"):
        options.update(init_weights=False, aux_logits=False)
    try:
        model = torchvision.models.get_model(name, **options).eval()
    except Exception as error:
        raise ModelBuildError(f"building torchvision model {name!r} failed: "
                              f"{type(error).__name__}: {error}") from error
    size = 299 if name == "inception_v3" else 224
    return model, (torch.randn(batch, 3, size, size),), {}


def timm_model(name: str, batch: int):
    import torch

    try:
        import timm
    except ImportError:
        raise UsageError("timm is not installed; run `pip install timm` to export timm "
                         "models") from None
    if not timm.is_model(name):
        raise UsageError(f"unknown timm model {name!r}{did_you_mean(name, timm.list_models())}")
    try:
        model = timm.create_model(name, pretrained=False).eval()
    except Exception as error:
        raise ModelBuildError(f"building timm model {name!r} failed: "
                              f"{type(error).__name__}: {error}") from error
    config = getattr(model, "default_cfg", None) or getattr(model, "pretrained_cfg", None) or {}
    input_size = tuple(config.get("input_size") or (3, 224, 224))
    return model, (torch.randn(batch, *input_size),), {}


def factory_model(path: str, factory_name: str):
    import torch

    if not factory_name.isidentifier():
        raise UsageError(f"{factory_name!r} in SPEC is not a function name; write "
                         f"{path}:FACTORY")
    if not os.path.isfile(path):
        raise UsageError(f"no such file: {path!r}")
    stem = "".join(c if c.isalnum() else "_" for c in os.path.splitext(os.path.basename(path))[0])
    module_name = f"_onnxport_factory_{stem}"
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None or module_spec.loader is None:
        raise UsageError(f"cannot load {path!r} as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module  # dataclasses and pickling look the module up here
    with _importable_beside(path):
        try:
            module_spec.loader.exec_module(module)
        except Exception as error:
            sys.modules.pop(module_name, None)
            raise ModelBuildError(f"loading {path!r} failed: {type(error).__name__}: "
                                  f"{error}") from error
        factory = getattr(module, factory_name, None)
        if factory is None:
            defined = [n for n, v in vars(module).items()
                       if callable(v) and not n.startswith("_")
                       and getattr(v, "__module__", None) == module_name]
            raise UsageError(f"{path!r} has no function {factory_name!r}"
                             f"{did_you_mean(factory_name, defined)}")
        if not callable(factory):
            raise UsageError(f"{path}:{factory_name} is not a function (it is of type "
                             f"{type(factory).__name__})")
        try:
            result = factory()
        except Exception as error:
            raise ModelBuildError(f"{path}:{factory_name}() raised {type(error).__name__}: "
                                  f"{error}") from error
    shape = (f"{path}:{factory_name}() must return (model, args) or (model, args, kwargs) "
             "with args a tuple of inputs and kwargs a dict")
    if not isinstance(result, (tuple, list)) or len(result) not in (2, 3):
        raise UsageError(f"{shape}; it returned {_describe(result)}")
    model, args = result[0], result[1]
    kwargs = result[2] if len(result) == 3 else {}
    if isinstance(args, torch.Tensor):
        args = (args,)
    if isinstance(args, list):
        args = tuple(args)
    if not isinstance(args, tuple) or not isinstance(kwargs, dict):
        raise UsageError(f"{shape}; it returned ({', '.join(_describe(r) for r in result)})")
    if not callable(model):
        raise UsageError(f"{shape}; its model is a {type(model).__name__}")
    if isinstance(model, torch.nn.Module):
        model.eval()
    return model, args, kwargs


@contextlib.contextmanager
def _importable_beside(path: str):
    """Let the factory file import its neighbours, as ``python file.py`` would."""
    folder = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(folder)


def _describe(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return f"a {type(value).__name__}"


# -- what every source shares ---------------------------------------------------------------
DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def load_weights(model: Any, path: str) -> None:
    """Load a state dict from ``.safetensors`` or a ``torch.save`` file (read with
    ``weights_only=True``: no code in it runs) into ``model``. Names the model does not have,
    and shapes that differ, are refused; the model's own values stay for names it lacks."""
    import torch

    if not os.path.isfile(path):
        raise UsageError(f"--weights {path}: no such file")
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"--weights needs a torch.nn.Module; the model is a "
                         f"{type(model).__name__}")
    try:
        if path.endswith(".safetensors"):
            from safetensors.torch import load_file

            state = load_file(path)
        else:
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        raise UsageError(f"--weights {path}: cannot read it as a state dict "
                         f"({type(error).__name__}: {_first_line(error)})") from None
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
        state = state["state_dict"]  # a Lightning-style checkpoint
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise UsageError(f"--weights {path}: not a state dict (a dict of names to tensors)")
    own = model.state_dict()
    if state and all(k.startswith("module.") for k in state) and \
            not any(k.startswith("module.") for k in own):
        state = {k.removeprefix("module."): v for k, v in state.items()}  # saved from DataParallel
    unexpected = sorted(set(state) - set(own))
    mismatched = [f"{k} {list(state[k].shape)} (the model's is {list(own[k].shape)})"
                  for k in state if k in own and state[k].shape != own[k].shape]
    if unexpected or mismatched:
        problems = []
        if unexpected:
            problems.append(f"{len(unexpected)} name(s) the model does not have: "
                            f"{_listed(unexpected)}")
        if mismatched:
            problems.append(f"shapes that differ: {_listed(mismatched)}")
        raise UsageError(f"--weights {path} does not fit the model: " + "; ".join(problems))
    model.load_state_dict(state, strict=False)


def place(built: Built, dtype: str | None, device: str | None) -> None:
    """``--dtype`` and ``--device`` for the model and its floating-point inputs."""
    import torch
    import torch.utils._pytree as pytree

    torch_dtype = getattr(torch, DTYPES[dtype]) if dtype else None
    if device is not None:
        _check_device(device)
    if isinstance(built.model, torch.nn.Module):
        built.model.to(device=device, dtype=torch_dtype)

    def move(value):
        if not isinstance(value, torch.Tensor):
            return value
        if torch_dtype is not None and value.is_floating_point():
            value = value.to(torch_dtype)
        return value.to(device) if device is not None else value

    built.args = tuple(pytree.tree_map(move, list(built.args)))
    built.kwargs = pytree.tree_map(move, built.kwargs)


def _check_device(device: str) -> None:
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UsageError(f"--device {device}: torch sees no CUDA device here")


def reshape_inputs(built: Built, shapes: dict[str, tuple[int, ...]]) -> None:
    """``--shape NAME=..`` for the model's top-level tensor arguments (NAME the parameter's):
    a new random tensor of that shape (integers within the range of the old one)."""
    import torch

    from onnxport.capture import parameter_names

    parameters = list(parameter_names(built.model))
    names = [parameters[k] if k < len(parameters) else f"arg{k}" for k in range(len(built.args))]
    names += list(built.kwargs)
    positions = {name: k for k, name in enumerate(names)}
    for name, shape in shapes.items():
        if name not in positions:
            raise UsageError(f"--shape {name}=...: the model has no input {name!r} (its inputs: "
                             f"{', '.join(names)}){did_you_mean(name, names)}")
        k = positions[name]
        in_args = k < len(built.args)
        old = built.args[k] if in_args else list(built.kwargs.values())[k - len(built.args)]
        if not isinstance(old, torch.Tensor):
            raise UsageError(f"--shape {name}: that input is a {type(old).__name__}, not a tensor")
        if len(shape) != old.dim():
            raise UsageError(f"--shape {name}={'x'.join(map(str, shape))}: that input has "
                             f"{old.dim()} dimensions ({'x'.join(map(str, old.shape))})")
        if old.is_floating_point():
            new = torch.randn(shape, dtype=old.dtype, device=old.device)
        else:
            high = int(old.max()) + 1 if old.numel() else 2
            new = torch.randint(0, max(high, 1), shape, dtype=old.dtype, device=old.device)
        if in_args:
            built.args = (*built.args[:k], new, *built.args[k + 1:])
        else:
            built.kwargs[list(built.kwargs)[k - len(built.args)]] = new


def tensor_input_names(built: Built) -> list[str]:
    """The ONNX names of the model's tensor inputs, as the export will name them."""
    if built.input_names is not None:
        return list(built.input_names)
    from onnxport.capture import parameter_names
    from onnxport.capture.dynamic import tensor_input_slots

    slots = tensor_input_slots(built.args, built.kwargs, parameter_names(built.model))
    return [slot.name for slot in slots]


def batch_axes(built: Built) -> dict[str, dict[int, str]]:
    """``--dynamic-batch``: axis 0 of every tensor input, named "batch"."""
    import torch

    from onnxport.capture import parameter_names
    from onnxport.capture.dynamic import tensor_input_slots

    slots = tensor_input_slots(built.args, built.kwargs, parameter_names(built.model))
    return {slot.name: {0: "batch"} for slot in slots
            if isinstance(slot.tensor, torch.Tensor) and slot.tensor.dim() > 0}


def did_you_mean(name: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=3)
    return f"; did you mean {', '.join(close)}?" if close else ""


def _listed(items: Sequence[str], limit: int = 5) -> str:
    return ", ".join(items[:limit]) + (f" and {len(items) - limit} more" if len(items) > limit
                                       else "")


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [""])[0]
