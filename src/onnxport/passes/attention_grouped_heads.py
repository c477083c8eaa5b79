"""AttentionGroupedHeads: an Attention key or value input Reshape(Expand(Unsqueeze(kv, [2])))
that repeats each of kv's heads n times becomes kv itself.
Precondition: 4-D [batch, heads, sequence, head size] shapes known on the chain, only the new
axis expanded, heads merged back in place (repeat_kv, the transformers form of GQA).

ONNX Attention pairs query head h with key/value head h // n when it is given fewer key/value
heads, which is what the repeated heads spelled out; without the copies it reads kv once."""

from __future__ import annotations

import onnx_ir as ir

from onnxport.passes._nodes import producer


def _dims(value: ir.Value | None, rank: int) -> list | None:
    if value is None or value.shape is None or len(value.shape) != rank:
        return None
    return list(value.shape)


def _repeated_source(value: ir.Value | None) -> ir.Value | None:
    """kv when ``value`` is kv's heads each repeated n times, else None."""
    reshape = producer(value, "Reshape")
    expand = producer(reshape.inputs[0], "Expand") if reshape is not None else None
    unsqueeze = producer(expand.inputs[0], "Unsqueeze") if expand is not None else None
    if unsqueeze is None or len(unsqueeze.inputs) < 2 or unsqueeze.inputs[1] is None:
        return None
    axes = unsqueeze.inputs[1].const_value
    if axes is None or [int(a) for a in axes.numpy().reshape(-1)] not in ([2], [-3]):
        return None
    source = unsqueeze.inputs[0]
    kv, expanded, merged = _dims(source, 4), _dims(expand.outputs[0], 5), _dims(value, 4)
    if kv is None or expanded is None or merged is None:
        return None
    heads, repeats = kv[1], expanded[2]
    if not isinstance(heads, int) or not isinstance(repeats, int) or repeats < 1:
        return None
    kept = [expanded[0], expanded[1], expanded[3], expanded[4]]
    if kept != kv or merged != [kv[0], heads * repeats, kv[2], kv[3]]:
        return None
    return source


class AttentionGroupedHeads(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for node in list(ir.traversal.RecursiveGraphIterator(model.graph)):
            if node.op_type != "Attention" or node.domain != "" or len(node.inputs) < 3:
                continue
            if _dims(node.inputs[0], 4) is None:
                continue  # the 3-D form counts heads in attributes instead
            for index in (1, 2):
                source = _repeated_source(node.inputs[index])
                if source is not None:
                    node.replace_input_with(index, source)
                    modified = True
        return ir.passes.PassResult(model, modified)
