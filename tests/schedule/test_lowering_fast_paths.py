"""The lowering's fast paths change nothing: each gives what the plain computation gives.

Lowering spends most of its time simplifying index expressions, and a model-guided search
lowers every candidate it scores. Two shortcuts keep that affordable:
``Analyzer.substitute`` re-simplifies only the nodes above a substituted variable (instead
of substituting, then simplifying the whole expression), and ``Analyzer.simplify`` without
bounds remembers each node's result for the lowering. Both rely on the expressions they are
given being simplified already. These tests check each against the plain computation, on
random index expressions and on whole lowerings of sampled configs.
"""
from __future__ import annotations

import random

import pytest

import backends
from autotune.task import Task
from schedule import simplify as simplify_module
from schedule.simplify import Analyzer, structural_key
from te.dtypes import INDEX_DTYPE
from te.expr import Binary, Const, Expr, Var, rewrite_bottom_up, substitute

VARS = [Var(name) for name in ("i", "j", "k", "r")]


def random_index(rng: random.Random, depth: int = 4) -> Expr:
    """An integer index expression of loop variables, constants and the ops splits and fuses make."""
    if depth == 0 or rng.random() < 0.25:
        return rng.choice(VARS) if rng.random() < 0.7 else Const(rng.randrange(0, 9))
    op = rng.choice(["add", "add", "sub", "mul", "floordiv", "floormod", "min", "max"])
    a = random_index(rng, depth - 1)
    if op in ("mul", "floordiv", "floormod"):
        b = Const(rng.choice([1, 2, 3, 4, 8, 16]))
    else:
        b = random_index(rng, depth - 1)
    return Binary(op, a, b, INDEX_DTYPE)


def plain_simplify(e: Expr, an: Analyzer | None = None, bounds: dict | None = None) -> Expr:
    """Simplify every node of ``e`` bottom-up, without the analyzer's memo of results."""
    an = an or Analyzer()
    return rewrite_bottom_up(e, lambda n: simplify_module._simplify_node(an, n, bounds or {}))


def plain_substitute(e: Expr, mapping: dict) -> Expr:
    """Substitute, then simplify the whole result (no memo, no shortcut)."""
    new = substitute(e, mapping)
    return new if new is e else plain_simplify(new)


@pytest.mark.parametrize("seed", range(300))
def test_substitute_simplifies_like_substituting_then_simplifying_all(seed):
    rng = random.Random(seed)
    an = Analyzer()
    e = an.simplify(random_index(rng))  # the passes substitute into simplified expressions
    mapping = {v: Const(rng.randrange(0, 5)) for v in rng.sample(VARS, rng.randint(1, 2))}
    fast = an.substitute(e, mapping)
    assert structural_key(fast) == structural_key(plain_substitute(e, mapping))


def test_substitute_keeps_subtrees_without_a_replaced_variable():
    an = Analyzer()
    i, j, k = VARS[:3]
    untouched = an.simplify(j * 16 + k)
    e = Binary("floordiv", untouched, Const(4), INDEX_DTYPE) + i * 8
    out = an.substitute(e, {i: Const(0)})
    assert out is e.a  # i * 8 became 0, the sum its other term: the very same node


@pytest.mark.parametrize("seed", range(100))
def test_remembered_simplification_equals_a_fresh_one(seed):
    rng = random.Random(seed)
    shared = Analyzer()
    exprs = [random_index(rng) for _ in range(5)]
    # Later expressions reuse subtrees of earlier ones, as a lowering's indices do.
    exprs += [Binary("add", exprs[n], exprs[n + 1], INDEX_DTYPE) for n in range(4)]
    for e in exprs:
        remembered = shared.simplify(e)
        assert shared.simplify(e) is remembered
        fresh = plain_simplify(e)
        assert structural_key(remembered) == structural_key(fresh)


def plain_analyzer(monkeypatch) -> None:
    """Make every analyzer compute without its shortcuts: substitute-then-simplify-all, no memo."""
    monkeypatch.setattr(Analyzer, "substitute", lambda self, e, mapping: plain_substitute(e, mapping))
    monkeypatch.setattr(Analyzer, "simplify", lambda self, e, bounds=None: plain_simplify(e, self, bounds))


WORKLOADS = [
    ("matmul", dict(M=127, N=1023, K=511)),
    ("conv2d", dict(N=1, C=16, H=14, W=14, K=16, R=3, S=3, padding=1)),
    ("conv2d_winograd", dict(N=1, C=8, H=14, W=14, K=8)),
    ("attention", dict(heads=2, seq=64, dim=32)),
    ("layernorm", dict(M=64, N=96)),
]


@pytest.mark.parametrize("name,params", WORKLOADS, ids=[w[0] for w in WORKLOADS])
def test_lowering_generates_the_same_code_as_without_the_shortcuts(name, params, monkeypatch):
    task = Task(name, params, target="cpu")
    backend = backends.backend_for(task.target)
    rng = random.Random(3)
    configs = task.space.starting_points(rng)[:3] + [task.space.sample(rng) for _ in range(5)]
    fast = [backend.generate_source(task.lower(c)) for c in configs]
    plain_analyzer(monkeypatch)
    plain = [backend.generate_source(task.lower(c)) for c in configs]
    assert fast == plain
