"""A whole network tuned under one budget, end to end against NumPy composed, in one run.

    python bench/model.py                         # the MLP, 2000 trials, gradient and round-robin
    python bench/model.py --trials 400 --no-round-robin
    python bench/model.py --net resnet --trials 500 --no-round-robin
    python bench/model.py --net transformer --no-round-robin

The networks (``autotune.graph.examples``): ``mlp``, a 4-layer MLP, batch 64, 1024 -> 4096 -> 1024 ->
4096 -> 1024, bias and relu after each layer but the last (two distinct tasks of weight 2);
``resnet``, ResNet-50's basic block at 64 channels, 56x56, batch 1: conv3x3 -> batch norm ->
relu -> conv3x3 -> batch norm -> + x -> relu (two tasks; batch norm folded);
``transformer``, a pre-norm encoder block, seq 256, d 512, 8 heads, feed-forward 2048:
layernorm -> q, k, v projections (one merged task) -> attention -> output projection + x
-> layernorm -> dense -> gelu -> dense + residual (six tasks). Where PyTorch is installed
the re-timing also times the same network in PyTorch (eager, inference mode).

1. ``tune_graph`` with the gradient task scheduler into a database of its own, and (unless
   ``--no-round-robin``) with round-robin into another, same seed and budget; the
   scheduler's estimate of the network's latency (sum of weight x best time) after each
   batch is kept, to say at which trial the gradient run reached round-robin's final one.
2. In a fresh process: the network rebuilt from the gradient run's database
   (``build_graph``: each task's best stored config, weights packed once) and timed
   alternately with NumPy composed of the same steps (``x @ w.T``, ``+= b``, ``maximum``
   on preallocated buffers, OpenBLAS's threads at their default settings), five rounds of
   at least 0.2 s each, a pause before each timing; the medians and their ratio. The
   outputs are checked against ``Graph.run_numpy`` first.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from anchor import blas_description, reexec_without_blas_overrides, seconds_per_call  # noqa: E402

LAYERS = [(1024, 4096), (4096, 1024), (1024, 4096), (4096, 1024)]
BATCH = 64


def mlp():
    from autotune.graph import examples

    return examples.mlp(layers=len(LAYERS), batch=BATCH, wide=LAYERS[0][1], narrow=LAYERS[0][0])


CHANNELS, SIZE = 64, 56


def resnet():
    from autotune.graph import examples

    return examples.resnet_block(channels=CHANNELS, size=SIZE, seed=0)


SEQ, D_MODEL, HEADS, FFN = 256, 512, 8, 2048


def transformer():
    from autotune.graph import examples

    return examples.transformer_block(seq=SEQ, d=D_MODEL, heads=HEADS, ffn=FFN)


def numpy_transformer(g):
    """The encoder block on NumPy, step by step on preallocated buffers: the projections
    with np.matmul, attention as batched np.matmul around an in-place softmax, the gelu
    through scipy's erf (NumPy has none)."""
    from scipy.special import erf

    p = {v.name: a for v, a in g.params.items()}
    dim = D_MODEL // HEADS
    n1, q, k, v, a, h, n2, y = (np.empty((SEQ, D_MODEL), np.float32) for _ in range(8))
    f1, gelu = np.empty((SEQ, FFN), np.float32), np.empty((SEQ, FFN), np.float32)
    scores, row = np.empty((HEADS, SEQ, SEQ), np.float32), np.empty((HEADS, SEQ, 1), np.float32)
    heads_out, stat = np.empty((HEADS, SEQ, dim), np.float32), np.empty((SEQ, 1), np.float32)
    scale, inv_sqrt2 = np.float32(1 / np.sqrt(dim)), np.float32(1 / np.sqrt(2))

    def split(t):  # (seq, heads * dim) -> (heads, seq, dim), a view
        return t.reshape(SEQ, HEADS, dim).transpose(1, 0, 2)

    def layernorm(src, name, out):
        np.mean(src, axis=-1, keepdims=True, out=stat)
        np.subtract(src, stat, out=out)
        np.mean(np.square(out), axis=-1, keepdims=True, out=stat)
        np.add(stat, 1e-5, out=stat)
        np.sqrt(stat, out=stat)
        out /= stat
        out *= p[f"{name}.g"]
        out += p[f"{name}.b"]

    def linear(src, name, out):
        np.matmul(src, p[f"{name}.w"].T, out=out)
        out += p[f"{name}.b"]

    def run(x):
        layernorm(x, "ln1", n1)
        for name, buf in (("q", q), ("k", k), ("v", v)):
            linear(n1, name, buf)
        np.matmul(split(q), split(k).transpose(0, 2, 1), out=scores)
        np.multiply(scores, scale, out=scores)
        np.max(scores, axis=-1, keepdims=True, out=row)
        np.subtract(scores, row, out=scores)
        np.exp(scores, out=scores)
        np.sum(scores, axis=-1, keepdims=True, out=row)
        np.divide(scores, row, out=scores)
        np.matmul(scores, split(v), out=heads_out)
        np.copyto(split(a), heads_out)
        linear(a, "o", h)
        np.add(h, x, out=h)
        layernorm(h, "ln2", n2)
        linear(n2, "fc1", f1)
        np.multiply(f1, inv_sqrt2, out=gelu)
        erf(gelu, out=gelu)
        np.add(gelu, 1, out=gelu)
        np.multiply(gelu, f1, out=gelu)
        np.multiply(gelu, 0.5, out=gelu)
        linear(gelu, "fc2", y)
        return np.add(y, h, out=y)

    return run


def torch_with_params(g):
    """(torch, torch.nn.functional, the graph's parameters as tensors by name), PyTorch's
    threads set to the cores we use; None without PyTorch."""
    from autotune.anchor import torch_for_anchors
    from schedule.targets.cpu import usable_cores

    torch = torch_for_anchors()
    if torch is None:
        return None
    torch.set_num_threads(usable_cores())
    return torch, torch.nn.functional, {v.name: torch.from_numpy(a) for v, a in g.params.items()}


def torch_transformer(g):
    """The encoder block in PyTorch (eager, inference mode, scaled_dot_product_attention), or
    None without PyTorch."""
    if (found := torch_with_params(g)) is None:
        return None
    torch, F, p = found

    def heads(t):
        return t.view(SEQ, HEADS, D_MODEL // HEADS).transpose(0, 1)

    def run(x):
        with torch.inference_mode():
            t = torch.from_numpy(x)
            n1 = F.layer_norm(t, (D_MODEL,), p["ln1.g"], p["ln1.b"], 1e-5)
            q, k, v = (heads(F.linear(n1, p[f"{n}.w"], p[f"{n}.b"])) for n in "qkv")
            a = F.scaled_dot_product_attention(q, k, v).transpose(0, 1).reshape(SEQ, D_MODEL)
            h = F.linear(a, p["o.w"], p["o.b"]) + t
            n2 = F.layer_norm(h, (D_MODEL,), p["ln2.g"], p["ln2.b"], 1e-5)
            return (F.linear(F.gelu(F.linear(n2, p["fc1.w"], p["fc1.b"])), p["fc2.w"], p["fc2.b"]) + h).numpy()

    return run


def numpy_resnet(g):
    """The block on NumPy: im2col convolutions, batch norm folded as the graph folds it."""
    from autotune.anchor import im2col_conv2d

    p = {v.name: a for v, a in g.params.items()}
    (s1, t1), (s2, t2) = [tuple(g.params[v].reshape(1, -1, 1, 1) for v in n.inputs[1:])
                          for n in g.nodes if n.kind.name == "channel_affine"]

    def run(x):
        h = im2col_conv2d(x, p["w1"], 1, 1)
        h *= s1
        h += t1
        np.maximum(h, 0, out=h)
        y = im2col_conv2d(h, p["w2"], 1, 1)
        y *= s2
        y += t2
        y += x
        return np.maximum(y, 0, out=y)

    return run


def torch_resnet(g):
    """The block in PyTorch (eager, inference mode), or None without PyTorch."""
    if (found := torch_with_params(g)) is None:
        return None
    torch, F, p = found

    def bn(h, name):
        return F.batch_norm(h, p[f"{name}_mean"], p[f"{name}_var"], p[f"{name}_gamma"], p[f"{name}_beta"],
                            training=False, eps=1e-5)

    def run(x):
        with torch.inference_mode():
            t = torch.from_numpy(x)
            h = F.relu(bn(F.conv2d(t, p["w1"], padding=1), "bn1"))
            return F.relu(bn(F.conv2d(h, p["w2"], padding=1), "bn2") + t).numpy()

    return run


def numpy_mlp(g):
    """The network on NumPy, step by step on preallocated buffers (the anchor)."""
    params = {v.name: a for v, a in g.params.items()}
    bufs = [np.empty((BATCH, n_out), np.float32) for _, n_out in LAYERS]

    def run(x):
        h = x
        for n, buf in enumerate(bufs):
            np.matmul(h, params[f"w{n}"].T, out=buf)
            buf += params[f"b{n}"]
            if n < len(LAYERS) - 1:
                np.maximum(buf, 0, out=buf)
            h = buf
        return h

    return run


#: Pause before each timing: OpenBLAS's threads spin about 0.1 s after NumPy's last call
#: (on the cores the network's kernels need), OpenMP's a few milliseconds after ours.
SETTLE_S = 0.3


#: name -> (the graph, NumPy composed, PyTorch or None, the input's shape)
NETS = {"mlp": (mlp, lambda g: numpy_mlp(g), lambda g: None, (BATCH, LAYERS[0][0])),
        "resnet": (resnet, lambda g: numpy_resnet(g), lambda g: torch_resnet(g), (1, CHANNELS, SIZE, SIZE)),
        "transformer": (transformer, lambda g: numpy_transformer(g), lambda g: torch_transformer(g),
                        (SEQ, D_MODEL))}


def retime(db: str, net_name: str) -> dict:
    """Rebuild from ``db`` and time alternately with NumPy composed, and PyTorch where it is
    installed and the network has a PyTorch version (runs in a fresh process)."""
    import tuning_db
    from autotune.graph import build_graph

    make, numpy_version, torch_version, shape = NETS[net_name]
    g = make()
    with tuning_db.Database(db, create=False) as opened:
        net = build_graph(g, db=opened)
    x = np.random.default_rng(1).uniform(-1, 1, shape).astype(np.float32)
    np.testing.assert_allclose(net(x=x)["y"], g.run_numpy(x=x)["y"], rtol=1e-3, atol=1e-4)
    anchors = {"numpy": numpy_version(g), "torch": torch_version(g)}
    anchors = {name: fn for name, fn in anchors.items() if fn is not None}
    for fn in anchors.values():
        np.testing.assert_allclose(fn(x), g.run_numpy(x=x)["y"], rtol=1e-3, atol=1e-4)
    times = {name: [] for name in ["ours", *anchors]}
    for round_ in range(5):
        order = [("ours", lambda: net(x=x))] + [(name, lambda fn=fn: fn(x)) for name, fn in anchors.items()]
        for name, fn in (order if round_ % 2 == 0 else order[::-1]):
            time.sleep(SETTLE_S)
            times[name].append(seconds_per_call(fn))
    return {**{f"{name}_ms": statistics.median(t) * 1e3 for name, t in times.items()}, "untuned": net.untuned()}


def tune(db: str, trials: int, scheduler: str, seed: int, net_name: str) -> tuple[object, list]:
    import tuning_db
    from autotune.graph import tune_graph

    curve: list[tuple[int, float]] = []
    with tuning_db.Database(db) as opened:
        t0 = time.perf_counter()
        result = tune_graph(NETS[net_name][0](), trials=trials, db=opened, scheduler=scheduler, seed=seed,
                            progress=lambda r, i: (curve.append((r.trials, r.latency)),
                                                   print(f"   {scheduler}: {r.trials:5d} trials, network "
                                                         f"{r.latency * 1e3:.3f} ms (task {i}), "
                                                         f"{time.perf_counter() - t0:.0f} s", flush=True)))
    return result, curve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--net", choices=sorted(NETS), default="mlp")
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-round-robin", action="store_true", help="tune with the gradient scheduler only")
    parser.add_argument("--retime", metavar="DB", help=argparse.SUPPRESS)  # the fresh process's part
    args = parser.parse_args()
    if args.retime:
        print(json.dumps(retime(args.retime, args.net)))
        return
    reexec_without_blas_overrides()
    what = {"mlp": f"4-layer MLP, batch {BATCH}", "resnet": f"ResNet basic block, {CHANNELS} channels, {SIZE}^2",
            "transformer": f"encoder block, seq {SEQ}, d {D_MODEL}, {HEADS} heads, feed-forward {FFN}"}[args.net]
    print(f"# {what}, {args.trials} trials, seed {args.seed}; NumPy: {blas_description()}")
    out = Path(tempfile.mkdtemp(prefix="model-bench-"))
    gradient, curve = tune(str(out / "gradient.db"), args.trials, "gradient", args.seed, args.net)
    print(f"gradient: {gradient.trials} trials in {gradient.seconds:.0f} s; network estimate "
          f"{gradient.latency * 1e3:.3f} ms; trials per task "
          f"{[(t.weight, s.trials) for t, s in zip(gradient.tasks, gradient.states)]}")
    if not args.no_round_robin:
        robin, _ = tune(str(out / "round_robin.db"), args.trials, "round_robin", args.seed, args.net)
        reached = next((t for t, latency in curve if latency <= robin.latency), None)
        print(f"round-robin: network estimate {robin.latency * 1e3:.3f} ms after {robin.trials} trials; the "
              f"gradient run reached it after {reached if reached is not None else 'never'} trials"
              + (f" ({reached / robin.trials:.0%})" if reached else ""))
    proc = subprocess.run([sys.executable, __file__, "--net", args.net, "--retime", str(out / "gradient.db")],
                          capture_output=True, text=True, check=True)
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    torch_part = (f", PyTorch {figures['torch_ms']:.3f} ms: {figures['torch_ms'] / figures['ours_ms']:.2f}x"
                  if "torch_ms" in figures else "")
    print(f"re-timed in a fresh process: tuned network {figures['ours_ms']:.3f} ms, NumPy composed "
          f"{figures['numpy_ms']:.3f} ms: {figures['numpy_ms'] / figures['ours_ms']:.2f}x{torch_part}"
          + (f"; untuned tasks: {figures['untuned']}" if figures["untuned"] else ""))
    print(f"databases: {out}")


if __name__ == "__main__":
    main()
