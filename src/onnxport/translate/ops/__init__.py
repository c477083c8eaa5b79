"""The op library: importing this package registers every translation, by op family."""

from onnxport.translate.ops import (  # noqa: F401
    attention,
    control_flow,
    conv_pool,
    counting,
    creation,
    elementwise,
    index_reduce,
    indexing,
    linalg,
    matrix_functions,
    normalization,
    random,
    recurrent,
    reductions,
    resize,
    selection,
    shape,
    special,
    symbolic,
    torchvision_ops,
)
