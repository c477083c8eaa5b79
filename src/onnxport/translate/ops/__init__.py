"""The op library: importing this package registers every translation, by op family."""

from onnxport.translate.ops import (  # noqa: F401
    attention,
    control_flow,
    conv_pool,
    creation,
    dropout,
    elementwise,
    indexing,
    linalg,
    normalization,
    quantized,
    recurrent,
    reductions,
    resize,
    segments,
    shape,
    spectral,
    symbolic,
    torchvision_ops,
)
