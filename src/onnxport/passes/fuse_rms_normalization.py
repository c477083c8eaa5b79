"""FuseRMSNormalization: [w *] x / Sqrt(ReduceMean(x * x or Pow(x, 2), trailing axes) + eps)
becomes RMSNormalization(x, w or ones). Precondition: opset >= 23, fp32 x of known rank,
constant axes, exponent and eps, w no wider than the normalized axes.

Models write their RMSNorm by hand (transformers' Llama, T5); the one op runs faster and reads
as what it is. Runs after ReciprocalToDiv, which turns their x * rsqrt(..) into this Div."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from onnxport.passes._nodes import producer, scalar


def _mean_of_squares(value: ir.Value | None, x: ir.Value) -> list[int] | None:
    """The axes of ReduceMean(x * x or x ** 2, axes, keepdims=1) that ``value`` is, else None."""
    mean = producer(value, "ReduceMean")
    if mean is None or mean.attributes.get_int("keepdims", 1) != 1 or len(mean.inputs) < 2:
        return None
    axes_tensor = mean.inputs[1].const_value if mean.inputs[1] is not None else None
    if axes_tensor is None:
        return None
    square = mean.inputs[0]
    power, product = producer(square, "Pow"), producer(square, "Mul")
    if power is not None and not (power.inputs[0] is x and scalar(power.inputs[1]) == 2.0):
        return None
    if product is not None and not (product.inputs[0] is x and product.inputs[1] is x):
        return None
    if power is None and product is None:
        return None
    return [int(a) for a in axes_tensor.numpy().reshape(-1)]


def _match(div: ir.Node):
    """(x, first normalized axis, eps) when ``div`` is x / sqrt(mean(x^2) + eps), else None."""
    x = div.inputs[0]
    sqrt = producer(div.inputs[1], "Sqrt")
    add = producer(sqrt.inputs[0], "Add") if sqrt is not None else None
    if x is None or add is None or x.dtype != ir.DataType.FLOAT or x.shape is None:
        return None
    for mean_value, eps_value in (add.inputs, reversed(add.inputs)):
        eps = scalar(eps_value)
        axes = _mean_of_squares(mean_value, x) if eps is not None else None
        if axes is not None:
            break
    else:
        return None
    rank = len(x.shape)
    axes = sorted(a % rank for a in axes)
    if not axes or axes != list(range(axes[0], rank)):
        return None
    return x, axes[0], eps


def _scale_of(mul: ir.Node, normalized: ir.Value, x: ir.Value, axis: int) -> ir.Value | None:
    """w of Mul(w, normalized) when w only scales the normalized axes."""
    weight = mul.inputs[0] if mul.inputs[1] is normalized else mul.inputs[1]
    if weight is None or weight is normalized or weight.shape is None:
        return None
    if weight.dtype != x.dtype or len(weight.shape) > len(x.shape) - axis:
        return None
    if mul.outputs[0].shape is None or list(mul.outputs[0].shape) != list(x.shape):
        return None
    return weight


class FuseRMSNormalization(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        if model.opset_imports.get("", 0) < 23:
            return ir.passes.PassResult(model, False)
        modified = False
        for div in list(ir.traversal.RecursiveGraphIterator(model.graph)):
            if div.op_type != "Div" or div.domain != "" or (matched := _match(div)) is None:
                continue
            x, axis, eps = matched
            last, scale = div, None
            uses = div.outputs[0].uses()
            if len(uses) == 1 and not div.outputs[0].is_graph_output():
                user = uses[0].node
                if user.op_type == "Mul" and user.domain == "" and len(user.inputs) == 2:
                    scale = _scale_of(user, div.outputs[0], x, axis)
                    last = user if scale is not None else div
            if scale is None:
                dims = list(x.shape)[axis:]
                if not all(isinstance(d, int) for d in dims):
                    continue
                name = f"{div.outputs[0].name}_ones"
                scale = ir.Value(name=name, shape=ir.Shape(dims), type=ir.TensorType(x.dtype),
                                 const_value=ir.tensor(np.ones(dims, np.float32), name=name))
                div.graph.register_initializer(scale)
            old = last.outputs[0]
            fused = ir.node("RMSNormalization", [x, scale], {"axis": axis, "epsilon": eps},
                            name=last.name, metadata_props=dict(last.metadata_props))
            fused.outputs[0].shape, fused.outputs[0].type = old.shape, old.type
            ir.convenience.replace_nodes_and_values(last.graph, last, [last], [fused], [old],
                                                    [fused.outputs[0]])
            modified = True
        return ir.passes.PassResult(model, modified)
