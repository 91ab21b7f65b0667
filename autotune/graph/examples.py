"""Example networks as graphs, in the spirit of TVM's ``relay.testing`` models: the ones the
tests tune at small sizes and ``bench/model.py`` at full size.

    g = examples.mlp(layers=4, batch=64, wide=4096, narrow=1024)
    g = examples.resnet_block(channels=64, size=56)
    g = examples.transformer_block(seq=256, d=512, heads=8, ffn=2048)

Weights come from the graph's seeded generator (batch norm's statistics from ``seed``), so
the same call builds the same network in every process.
"""
from __future__ import annotations

import numpy as np

from .network import Graph


def mlp(layers: int = 4, batch: int = 8, wide: int = 64, narrow: int = 32) -> Graph:
    """Dense layers alternating narrow -> wide -> narrow, each with a bias, relu between them;
    parameters ``w<n>`` and ``b<n>``."""
    g = Graph("mlp")
    h = g.input("x", (batch, narrow))
    for n in range(layers):
        n_in, n_out = (narrow, wide) if n % 2 == 0 else (wide, narrow)
        h = g.dense(h, g.param(f"w{n}", (n_out, n_in)), g.param(f"b{n}", (n_out,)))
        if n < layers - 1:
            h = g.relu(h)
    g.output("y", h)
    return g


def resnet_block(channels: int = 8, size: int = 10, seed: int = 3) -> Graph:
    """ResNet's basic block: conv3x3 -> batch norm -> relu -> conv3x3 -> batch norm ->
    + x -> relu, NCHW, batch 1; parameters ``w1``, ``w2`` and ``bn<n>_{gamma,beta,mean,var}``
    (folded into the convolutions' epilogues when the graph is built)."""
    g = Graph("resnet")
    x = g.input("x", (1, channels, size, size))
    rng = np.random.default_rng(seed)

    def bn(h, name):
        params = [g.param(f"{name}_{p}", value=v.astype(np.float32)) for p, v in (
            ("gamma", rng.uniform(0.5, 1.5, channels)), ("beta", rng.uniform(-0.1, 0.1, channels)),
            ("mean", rng.uniform(-0.1, 0.1, channels)), ("var", rng.uniform(0.5, 1.5, channels)))]
        return g.batch_norm(h, *params)

    h = g.relu(bn(g.conv2d(x, g.param("w1", (channels, channels, 3, 3)), padding=1), "bn1"))
    h = bn(g.conv2d(h, g.param("w2", (channels, channels, 3, 3)), padding=1), "bn2")
    g.output("y", g.relu(g.add(x, h)))  # the residual first: the add still joins the conv's group
    return g


def transformer_block(seq: int = 16, d: int = 32, heads: int = 4, ffn: int = 64, causal: bool = False) -> Graph:
    """A pre-norm encoder block: ``h = x + o(attention(q, k, v of ln1(x)))``, then
    ``h + fc2(gelu(fc1(ln2(h))))``; parameters ``<layer>.w``/``<layer>.b`` for q, k, v, o,
    fc1, fc2 and ``ln1.g``, ``ln1.b``, ``ln2.g``, ``ln2.b`` (ones and zeros)."""
    g = Graph("encoder")
    x = g.input("x", (seq, d))

    def linear(v, n_out, name):
        return g.dense(v, g.param(f"{name}.w", (n_out, v.shape[1])), g.param(f"{name}.b", (n_out,)))

    def layernorm(v, name):
        return g.layernorm(v, g.param(f"{name}.g", value=np.ones(d, np.float32)),
                           g.param(f"{name}.b", value=np.zeros(d, np.float32)))

    n1 = layernorm(x, "ln1")
    a = g.attention(*(linear(n1, d, p) for p in "qkv"), heads=heads, causal=causal)
    h = g.add(linear(a, d, "o"), x)
    g.output("y", g.add(linear(g.gelu(linear(layernorm(h, "ln2"), ffn, "fc1")), d, "fc2"), h))
    return g
