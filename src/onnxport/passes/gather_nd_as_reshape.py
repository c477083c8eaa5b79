"""GatherNDAsReshape: GatherND(data, indices) becomes Reshape(data, indices.shape[:-1]) when the
constant indices name every element of data once, in row-major order. Precondition: batch_dims
0, data's shape static, indices' last dim data's rank.

transformers' padding mask reads attention_mask[batch, key] over an index grid (a vmapped mask
function); with static sizes that grid folds into such indices, and the gather is only a view."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from onnxport.passes.merge_reshapes import int64_initializer


def _reshape_target(node: ir.Node) -> list[int] | None:
    data, indices = node.inputs
    if data is None or indices is None or indices.const_value is None or data.shape is None:
        return None
    if node.attributes.get_int("batch_dims", 0) != 0:
        return None
    dims = list(data.shape)
    if not all(isinstance(d, int) for d in dims):
        return None
    index = indices.const_value.numpy()
    # A 0 in a Reshape's shape copies the input's dim: no empty results.
    if not dims or index.ndim < 1 or index.shape[-1] != len(dims) or 0 in index.shape or \
            index.size // len(dims) != int(np.prod(dims)):
        return None
    flat = index.reshape(-1, len(dims)).astype(np.int64)
    if (flat < 0).any() or (flat >= np.array(dims)).any():
        return None
    if not np.array_equal(np.ravel_multi_index(flat.T, dims), np.arange(flat.shape[0])):
        return None
    return list(index.shape[:-1])


class GatherNDAsReshape(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for node in list(ir.traversal.RecursiveGraphIterator(model.graph)):
            if node.op_type != "GatherND" or node.domain != "" or len(node.inputs) != 2:
                continue
            target = _reshape_target(node)
            if target is None:
                continue
            shape = int64_initializer(node.graph, f"{node.inputs[1].name}_shape", target)
            node.op_type = "Reshape"
            node.attributes.pop("batch_dims", None)
            node.replace_input_with(1, shape)
            node.outputs[0].shape = ir.Shape(target)
            modified = True
        return ir.passes.PassResult(model, modified)
