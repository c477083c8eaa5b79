"""Translate: walk a captured graph once and emit ONNX through the builder ``g``."""

from onnxport.translate.builder import GraphBuilder
from onnxport.translate.graph import TranslationContext, translate_graph
from onnxport.translate.registry import Registry, default_registry, translates

__all__ = ["GraphBuilder", "Registry", "TranslationContext", "default_registry", "translate_graph",
           "translates"]
