"""The operator library, written with the public te API only (like TVM's topi).

Plain functions build output tensors from given input tensors::

    C = te.ops.matmul(A, B)                      # A (M, K), B (K, N)
    Y = te.ops.dense(X, W, bias=b, relu=True)    # X (M, K), W (N, K), b (N,)
    O = te.ops.conv2d_nchw(data, kernel, stride=2, padding=1)

Importing this package also registers one workload per op (``te.create_workload(name,
**params)``): matmul, batch_matmul, dense, conv2d, depthwise_conv2d, softmax, pool2d,
elementwise, elementwise_chain, conv2d_winograd (``winograd``), and the multi-stage blocks layernorm, mlp, qkv, attention
and conv2d_bn_relu (``blocks``). Workload parameters are JSON-able (ints, strings, bools,
lists) and each workload returns ``[inputs..., outputs...]``.

FLOPs (``te.flop_count``) count every arithmetic op of every stage: matmul is 2*M*N*K,
conv2d 2*N*K*OH*OW*C*R*S (pad is free); dense adds M*N per bias-add and per relu, avg
pooling one divide per output, softmax 5 per element (max, subtract, exp, sum, divide).
"""
from .blocks import attention, conv2d_bn_relu, flash_attention, gelu, layer_norm, mlp, qkv
from .conv import conv2d_nchw, conv2d_nhwc, depthwise_conv2d_nchw, pad
from .elementwise import ELEMENTWISE_OPS, add, exp, mul, relu, sigmoid, sub, tanh
from .linalg import batch_matmul, dense, matmul
from .nn import pool2d, softmax
from .winograd import conv2d_winograd_nchw

__all__ = [
    "ELEMENTWISE_OPS", "add", "attention", "batch_matmul", "conv2d_bn_relu", "conv2d_nchw",
    "conv2d_nhwc", "conv2d_winograd_nchw", "dense", "depthwise_conv2d_nchw", "exp", "flash_attention", "gelu", "layer_norm", "matmul", "mlp",
    "mul", "pad", "pool2d", "qkv", "relu", "sigmoid", "softmax", "sub", "tanh",
]
