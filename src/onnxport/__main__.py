"""``python -m onnxport``: the same command as ``onnxport``."""

from onnxport.cli import main

raise SystemExit(main())
