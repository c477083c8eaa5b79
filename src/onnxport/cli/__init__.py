"""The ``onnxport`` command: builds a model from a SPEC and hands it to ``onnxport.export``.

It sits on top of the API and only calls it. Parsing, ``--help``, ``--version`` and usage
errors import neither torch nor rich, so that they answer at once."""

from onnxport.cli.command import build_parser, main

__all__ = ["build_parser", "main"]
