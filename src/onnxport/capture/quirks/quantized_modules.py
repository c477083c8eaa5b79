"""torch.ao's quantized modules as their reference form, for capture: torch.export cannot trace
their packed weights (C++ objects), so each is swapped for a float module that computes the
same thing with ``quantized_decomposed`` quantize/dequantize calls, the form PT2E produces and
translate/ops/quantized.py turns into ONNX QuantizeLinear/DequantizeLinear."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

# (quantized dtype) -> (plain dtype of its integers, smallest, largest)
INTEGER_RANGES = {torch.quint8: (torch.uint8, 0, 255), torch.qint8: (torch.int8, -128, 127),
            torch.qint32: (torch.int32, -(2**31), 2**31 - 1)}


def decomposed_ops():
    import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers the ops)

    return torch.ops.quantized_decomposed


def requantize(x, scale: float, zero_point: int, dtype: torch.dtype = torch.quint8):
    """``x`` rounded to the grid of a quantized tensor, and back to float (a Q/DQ pair)."""
    q = decomposed_ops()
    integer, low, high = INTEGER_RANGES[dtype]
    x = q.quantize_per_tensor(x, scale, zero_point, low, high, integer)
    return q.dequantize_per_tensor(x, scale, zero_point, low, high, integer)


class _QuantizedWeight(torch.nn.Module):
    """A quantized weight stored as its integers and parameters; calling it dequantizes."""

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.dtype = weight.dtype
        self.register_buffer("integers", weight.int_repr())
        self.per_channel = weight.qscheme() in (torch.per_channel_affine,
                                                torch.per_channel_symmetric)
        if self.per_channel:
            self.register_buffer("scales", weight.q_per_channel_scales().float())
            self.register_buffer("zero_points", weight.q_per_channel_zero_points())
            self.axis = weight.q_per_channel_axis()
        else:
            self.scale, self.zero_point = weight.q_scale(), weight.q_zero_point()

    def forward(self):
        integer, low, high = INTEGER_RANGES[self.dtype]
        q = decomposed_ops()
        if self.per_channel:
            return q.dequantize_per_channel(self.integers, self.scales, self.zero_points,
                                            self.axis, low, high, integer)
        return q.dequantize_per_tensor(self.integers, self.scale, self.zero_point, low, high,
                                       integer)


class QuantizeReference(torch.nn.Module):
    def __init__(self, scale: float, zero_point: int, dtype: torch.dtype):
        super().__init__()
        self.scale, self.zero_point, self.dtype = scale, zero_point, dtype

    def forward(self, x):
        return requantize(x, self.scale, self.zero_point, self.dtype)


class DequantizeReference(torch.nn.Module):
    """The tensors between the reference modules are floats already."""

    def forward(self, x):
        return x


class WeightedReference(torch.nn.Module):
    """A statically quantized conv or linear (with a fused ReLU): float op on dequantized
    input and weight, its output rounded to the module's output grid."""

    def __init__(self, module, function, relu: bool):
        super().__init__()
        self.weight = _QuantizedWeight(module.weight())
        bias = module.bias()
        self.register_buffer("bias", None if bias is None else bias.detach().float())
        self.function, self.relu = function, relu
        self.scale, self.zero_point = float(module.scale), int(module.zero_point)

    def forward(self, x):
        y = self.function(x, self.weight(), self.bias)
        if self.relu:
            y = F.relu(y)
        return requantize(y, self.scale, self.zero_point)


class DynamicLinearReference(torch.nn.Module):
    """A dynamically quantized linear: the input is quantized to uint8 with parameters chosen
    from its own range at each call (ONNX DynamicQuantizeLinear), the weight is int8."""

    def __init__(self, module):
        super().__init__()
        weight, bias = module._packed_params._weight_bias()
        self.weight = _QuantizedWeight(weight)
        self.register_buffer("bias", None if bias is None else bias.detach().float())

    def forward(self, x):
        q = decomposed_ops()
        # ONNX DynamicQuantizeLinear's range: all of uint8. torch's fbgemm kernel uses 0..127
        # (reduce_range) - a finer grid here, so the difference stays within eager's own error.
        scale, zero_point = q.choose_qparams.tensor(x, 0, 255, torch.finfo(torch.float32).eps,
                                                    torch.uint8)
        xq = q.quantize_per_tensor.tensor(x, scale, zero_point, 0, 255, torch.uint8)
        x = q.dequantize_per_tensor.tensor(xq, scale, zero_point, 0, 255, torch.uint8)
        return F.linear(x, self.weight(), self.bias)


class DynamicLSTMReference(torch.nn.Module):
    """A dynamically quantized LSTM: torch's LSTM on the dequantized int8 weights (ONNX LSTM
    has no integer form; the weights stay int8 in the file behind DequantizeLinear). Eager
    also quantizes each step's input, so the two differ within that rounding."""

    def __init__(self, module):
        super().__init__()
        self.num_layers, self.bidirectional = module.num_layers, module.bidirectional
        self.batch_first, self.hidden_size = module.batch_first, module.hidden_size
        parameters = module._weight_bias()
        self.weights = torch.nn.ModuleDict(
            {name: _QuantizedWeight(w) for name, w in parameters["weight"].items()})
        for name, bias in parameters["bias"].items():
            self.register_buffer(name, bias.detach().float())
        suffixes = ["", "_reverse"] if self.bidirectional else [""]
        self.order = [(f"weight_ih_l{layer}{s}", f"weight_hh_l{layer}{s}",
                       f"bias_ih_l{layer}{s}", f"bias_hh_l{layer}{s}")
                      for layer in range(self.num_layers) for s in suffixes]

    def forward(self, input, hx=None):
        if hx is None:
            directions = 2 if self.bidirectional else 1
            batch = input.shape[0] if self.batch_first else input.shape[1]
            zeros = input.new_zeros(self.num_layers * directions, batch, self.hidden_size)
            hx = (zeros, zeros)
        flat = []
        for w_ih, w_hh, b_ih, b_hh in self.order:
            flat += [self.weights[w_ih](), self.weights[w_hh](), getattr(self, b_ih),
                     getattr(self, b_hh)]
        output, h, c = torch.lstm(input, list(hx), flat, True, self.num_layers, 0.0, False,
                                  self.bidirectional, self.batch_first)
        return output, (h, c)


class FunctionalReference(torch.nn.Module):
    """QFunctional's add/mul/cat on floats, rounded to its output grid."""

    def __init__(self, module):
        super().__init__()
        self.scale, self.zero_point = float(module.scale), int(module.zero_point)

    def _out(self, y):
        return requantize(y, self.scale, self.zero_point)

    def add(self, x, y):
        return self._out(x + y)

    def add_relu(self, x, y):
        return self._out(F.relu(x + y))

    def mul(self, x, y):
        return self._out(x * y)

    def add_scalar(self, x, y):
        return self._out(x + y)

    def mul_scalar(self, x, y):
        return self._out(x * y)

    def cat(self, tensors, dim=0):
        return self._out(torch.cat(tensors, dim))


class ActivationReference(torch.nn.Module):
    """A quantized elementwise or normalizing module (Hardswish, ELU, LeakyReLU, ReLU6,
    LayerNorm, GroupNorm, InstanceNorm, BatchNorm...): its float module's forward, rounded to
    its output grid when it has one of its own."""

    def __init__(self, module, float_type):
        super().__init__()
        # A float module of the quantized one's attributes, weights and buffers (a norm's
        # weight and running statistics: inputs of the trace, not constants): a second swap
        # (capture_model, then capture_torch_export) finds nothing quantized in it.
        self.float_module = copy.copy(module)
        self.float_module.__class__ = float_type
        self.float_module._parameters = dict(module._parameters)
        self.float_module._buffers = {name: value for name, value in module._buffers.items()
                                      if name not in ("scale", "zero_point")}
        self.float_module._modules = {}
        scale = getattr(module, "scale", None)
        self.grid = None if scale is None else (float(scale), int(module.zero_point))

    def forward(self, x):
        y = self.float_module(x)
        return y if self.grid is None else requantize(y, *self.grid)


# The float modules whose quantized forms run the float forward, then round to their grid.
_FLOAT_MODULES = ("torch.nn.modules.activation", "torch.nn.modules.normalization",
                  "torch.nn.modules.batchnorm", "torch.nn.modules.instancenorm")


def _float_base(module) -> type | None:
    """The float torch.nn module a quantized elementwise or normalizing module derives from;
    for a private base (nnq.BatchNorm2d's _BatchNorm, whose forward needs a subclass), the
    torch.nn module of the quantized one's name."""
    for base in type(module).__mro__[1:]:
        if base.__module__.startswith(_FLOAT_MODULES):
            named = getattr(torch.nn, type(module).__name__, None)
            if base.__name__.startswith("_") and isinstance(named, type) and \
                    issubclass(named, base):
                return named
            return base
    return None


def _reference(module: torch.nn.Module) -> torch.nn.Module | None:
    """The reference form of one quantized module, or None when it is not one."""
    import torch.ao.nn.intrinsic.quantized as nniq
    import torch.ao.nn.quantized as nnq
    import torch.ao.nn.quantized.dynamic as nnqd

    if isinstance(module, nnqd.LSTM):
        weights = module._weight_bias()["weight"].values()
        if getattr(module, "proj_size", 0) or any(w.dtype != torch.qint8 for w in weights):
            return None
        return DynamicLSTMReference(module)
    if isinstance(module, nnqd.Linear):
        if module._packed_params.dtype != torch.qint8:
            return None  # float16 dynamic weights: left to fail with the packed-params error
        return DynamicLinearReference(module)
    if isinstance(module, nnq.Quantize):
        return QuantizeReference(float(module.scale), int(module.zero_point), module.dtype)
    if isinstance(module, nnq.DeQuantize):
        return DequantizeReference()
    if isinstance(module, nnq.QFunctional):
        return FunctionalReference(module)
    convs = {nnq.Conv1d: F.conv1d, nnq.Conv2d: F.conv2d, nnq.Conv3d: F.conv3d}
    for kind, function in convs.items():
        if isinstance(module, kind):
            if module.padding_mode != "zeros":
                return None
            stride, padding = module.stride, module.padding
            dilation, groups = module.dilation, module.groups

            def conv(x, w, b, function=function):
                return function(x, w, b, stride, padding, dilation, groups)

            relu = isinstance(module, (nniq.ConvReLU1d, nniq.ConvReLU2d, nniq.ConvReLU3d))
            return WeightedReference(module, conv, relu)
    transposed = {nnq.ConvTranspose1d: F.conv_transpose1d, nnq.ConvTranspose2d: F.conv_transpose2d,
                  nnq.ConvTranspose3d: F.conv_transpose3d}
    for kind, function in transposed.items():
        if isinstance(module, kind):
            stride, padding, output_padding = module.stride, module.padding, module.output_padding
            groups, dilation = module.groups, module.dilation

            def conv_transpose(x, w, b, function=function):
                return function(x, w, b, stride, padding, output_padding, groups, dilation)

            return WeightedReference(module, conv_transpose, False)
    if isinstance(module, nnq.Linear):
        return WeightedReference(module, F.linear, isinstance(module, nniq.LinearReLU))
    float_type = _float_base(module)
    if float_type is not None and not list(module.children()):
        return ActivationReference(module, float_type)
    return None


def is_quantized_module(module: torch.nn.Module) -> bool:
    return type(module).__module__.startswith(("torch.ao.nn.quantized",
                                               "torch.ao.nn.intrinsic.quantized"))


def as_reference(model):
    """``model`` with its torch.ao quantized modules swapped for their reference form (a copy;
    the user's model is not changed), or ``model`` itself when it has none."""
    if not isinstance(model, torch.nn.Module) or not any(
            is_quantized_module(m) for m in model.modules()):
        return model
    swaps = {name: _reference(m) for name, m in model.named_modules() if is_quantized_module(m)}
    swapped = [name for name, ref in swaps.items() if ref is not None]
    # (Modules inside a swapped one, nnq.Linear's packed params, go with it.)
    _refuse_packed(model, {name for name, ref in swaps.items() if ref is None and not any(
        _within(name, outer) for outer in swapped)})
    swaps = {name: ref for name, ref in swaps.items() if ref is not None}
    if not swaps:
        return model
    if "" in swaps:
        return swaps[""]
    # Copy only the modules on the path to a swap; everything else is shared with the user's.
    copied = copy.copy(model)
    copied._modules = dict(model._modules)
    for name, reference in sorted(swaps.items(), key=lambda item: item[0].count(".")):
        parent = copied
        *path, leaf = name.split(".")
        for part in path:
            child = copy.copy(parent._modules[part])
            child._modules = dict(child._modules)
            parent._modules[part] = child
            parent = child
        parent._modules[leaf] = reference
    return copied


def _within(name: str, outer: str) -> bool:
    """Whether module ``name`` is ``outer`` or inside it ("" is the model)."""
    return not outer or name == outer or name.startswith(f"{outer}.")


def _refuse_packed(model: torch.nn.Module, left: set[str]) -> None:
    """A clear error for a quantized module left without a reference form whose weights are
    packed for torch's own kernels (a transposed convolution, an embedding): no capture can
    look inside those, and torch's error names a C++ class."""
    from onnxport.errors import CaptureError

    for name, module in model.named_modules():
        if name in left and hasattr(module, "_packed_params"):
            raise CaptureError(
                f"the quantized module {name or 'model'} ({type(module).__module__}."
                f"{type(module).__name__}) has no ONNX form in onnxport yet: its weights are "
                "packed for torch's own kernels. Export the float model, or quantize it with "
                "PT2E (torch.ao.quantization.quantize_pt2e), whose quantize/dequantize calls "
                "export")
