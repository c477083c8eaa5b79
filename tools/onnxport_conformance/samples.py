"""OpInfo samples as exportable cases: each sample becomes a module whose tensor arguments are
inputs and whose other arguments are constants (op_db ships with the torch wheel)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Iterator

import torch
from torch.utils import _pytree as pytree

DTYPES = {"float32": torch.float32, "int64": torch.int64, "bool": torch.bool,
          "float16": torch.float16}
# The op-level pass count is over these; float16 is reported on its own.
COUNTED_DTYPES = ("float32", "int64", "bool")
SAMPLES_PER_DTYPE = 4

# Ops whose outputs are random: compared on shape and dtype only. Ops not listed whose eager
# results differ between two seeds are found at run time too (Case.random).
RANDOM_OPS = frozenset({
    "bernoulli", "multinomial", "normal", "normal.number_mean", "rand_like", "randn_like",
    "randint_like", "randint", "rand", "randn", "normal.in_place", "nn.functional.dropout", "nn.functional.dropout2d",
    "nn.functional.dropout3d", "nn.functional.alpha_dropout",
    "nn.functional.feature_alpha_dropout.with_train", "nn.functional.rrelu", "uniform",
    "exponential", "geometric", "cauchy", "log_normal", "empty", "empty_like", "empty_strided",
    "new_empty", "new_empty_strided", "empty_permuted",
    # Windows placed by torch.rand samples (no _random_samples in OpInfo's): at small sizes two
    # eager calls can agree by chance, so the check at run time does not always see it.
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d"})


# Ops whose eager call OpInfo seeds (wrapper_set_seed), random in the samples that ask for
# dropout: eager repeats itself, an exported graph (inference: no dropout) does not.
RANDOM_SAMPLES: dict[str, Callable[[Any], bool]] = {
    "nn.functional.scaled_dot_product_attention": lambda s: s.kwargs.get("dropout_p", 0.0) > 0,
    "nn.functional.multi_head_attention_forward": lambda s: (
        len(s.args) > 9 and s.args[9] > 0 and s.kwargs.get("training", True)),
}


def _dim_arg(position: int, default: int | None = -1) -> Callable[[Any], int | None]:
    def find(sample) -> int | None:
        if "dim" in sample.kwargs:
            return sample.kwargs["dim"]
        if len(sample.args) > position and isinstance(sample.args[position], int):
            return sample.args[position]
        return default
    return find


# Ops that pick elements (indices may differ on ties): the dimension their index output runs
# along, None for an index into the flattened input. Indices are compared by the values they
# point at.
TIE_OPS: dict[str, Callable[[Any], int | None]] = {
    "argmax": _dim_arg(0, None), "argmin": _dim_arg(0, None),
    "max.reduction_with_dim": _dim_arg(0), "min.reduction_with_dim": _dim_arg(0),
    "sort": _dim_arg(0), "argsort": _dim_arg(0), "topk": _dim_arg(1),
    "kthvalue": _dim_arg(1), "mode": _dim_arg(0), "median": _dim_arg(0),
    "nanmedian": _dim_arg(0), "cummax": _dim_arg(0), "cummin": _dim_arg(0),
}


@dataclasses.dataclass
class Case:
    op: str
    dtype: str
    index: int
    module: torch.nn.Module
    inputs: tuple[torch.Tensor, ...]
    tie_dim: Callable[[], int | None] | None = None
    random_at_run_time: bool = False

    @property
    def random(self) -> bool:
        return self.op in RANDOM_OPS or self.random_at_run_time

    @property
    def key(self) -> str:
        return f"{self.op}/{self.dtype}/{self.index}"


class SampleModule(torch.nn.Module):
    """Calls the op with the sample's arguments; tensors come from forward's parameters."""

    def __init__(self, function: Callable, spec, constants: list, tensor_slots: list[int]):
        super().__init__()
        self.function = function
        self.spec = spec
        self.constants = constants
        self.tensor_slots = tensor_slots

    def call(self, *tensors):
        leaves = list(self.constants)
        for slot, tensor in zip(self.tensor_slots, tensors):
            leaves[slot] = tensor
        input, args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        output = self.function(input, *args, **kwargs)
        return tuple(t for t in pytree.tree_leaves(output) if isinstance(t, torch.Tensor))


def _module_class(count: int) -> type:
    # torch.export names graph inputs after forward's parameters: x0, x1, ... let ONNX
    # Runtime be fed by name when an exporter drops an input it does not use.
    return _module_classes(count)


@functools.lru_cache(maxsize=None)
def _module_classes(count: int) -> type:
    names = ", ".join(f"x{i}" for i in range(count))
    source = f"def forward(self{', ' if names else ''}{names}):\n    return self.call({names})\n"
    namespace: dict = {}
    exec(source, namespace)
    return type(f"Sample{count}", (SampleModule,), {"forward": namespace["forward"]})


def op_name(opinfo) -> str:
    return opinfo.name + (f".{opinfo.variant_test_name}" if opinfo.variant_test_name else "")


@functools.lru_cache(maxsize=1)
def op_infos() -> dict[str, Any]:
    from torch.testing._internal.common_methods_invocations import op_db

    return {op_name(o): o for o in op_db}


def _usable(value) -> bool:
    return not (isinstance(value, torch.Tensor)
                and (value.is_complex() or value.layout != torch.strided or value.is_quantized))


def cases(op: str, dtype: str, limit: int = SAMPLES_PER_DTYPE) -> Iterator[Case]:
    """The first ``limit`` samples of ``op`` in ``dtype`` (seeded, so the same every run)."""
    opinfo = op_infos()[op]
    torch_dtype = DTYPES[dtype]
    if torch_dtype not in opinfo.supported_dtypes("cpu"):
        return
    torch.manual_seed(0)
    try:
        samples = opinfo.sample_inputs("cpu", torch_dtype, requires_grad=False)
        for index, sample in enumerate(samples):
            if index >= limit:
                break
            leaves, spec = pytree.tree_flatten((sample.input, tuple(sample.args),
                                                dict(sample.kwargs)))
            if not all(_usable(leaf) for leaf in leaves):
                continue
            slots = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
            constants = [None if i in slots else leaf for i, leaf in enumerate(leaves)]
            module = _module_class(len(slots))(opinfo.op, spec, constants, slots)
            inputs = tuple(leaves[i].detach().clone() for i in slots)
            tie = TIE_OPS.get(op)
            random = RANDOM_SAMPLES.get(op, lambda s: False)(sample)
            yield Case(op, dtype, index, module.eval(), inputs,
                       (lambda s=sample, t=tie: t(s)) if tie else None, random)
    except Exception:
        # A sample generator that fails for this dtype offers no samples.
        return
