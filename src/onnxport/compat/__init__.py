"""torch.onnx's compatibility surface over the core: users' symbolic functions and the ``g``
they run on, ``operator_export_type``, autograd Function symbolics, ``JitScalarType``, the
export enums, training-mode handling, the registry API and the dynamo page's front door
(``dynamo_api``: ``dynamo_export``, ``ExportOptions``, which runs the pipeline like ``export``).
The public modules (``onnxport.symbolic_helper``, ``onnxport.utils``, ...) are thin modules
over it."""
