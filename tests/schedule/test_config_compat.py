"""Stored configs stay readable: records written by the first version of the schedule space
parse, hash, decode into typed decisions, re-encode byte for byte, replay and lower.

The fixtures under tests/fixtures were written by that first version (see
tests/fixtures/make_records_v1.py); nothing here regenerates them.
"""
from __future__ import annotations

import dataclasses
import io
import json
import random
from pathlib import Path

import pytest

import schedule
import te
import tuning_db
from schedule.config import Config, ConfigError
from schedule.decisions import (AT_OUTER, CPU_MULTI_LEVEL, GPUMultiLevelDecisions, GPUSimpleDecisions,
                                MultiLevelDecisions, ReduceTileDecision, ScheduleDecisions, SimpleDecisions,
                                StageDecisions, TileDecision)
from schedule.space import ConfigSpace
from tuning_db.records import config_hash

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RECORDS = FIXTURES / "records_v1.jsonl"
GPU_CONFIGS = FIXTURES / "gpu_configs_v1.json"
DESCRIBE = json.loads((FIXTURES / "describe_v1.json").read_text())

# The role classes each target decodes its tiled and simple stages into.
ROLE_CLASSES = {"cpu": {"multi_level": MultiLevelDecisions, "simple": SimpleDecisions},
                "cuda": {"multi_level": GPUMultiLevelDecisions, "simple": GPUSimpleDecisions}}


def _records() -> list[dict]:
    return [json.loads(line) for line in RECORDS.read_text().splitlines() if line.strip()]


def _gpu_entries() -> list[dict]:
    return json.loads(GPU_CONFIGS.read_text())


def _space(name: str, params: dict, target: str) -> ConfigSpace:
    return ConfigSpace.from_workload(te.create_workload(name, **params), target)


def _stored_points() -> list[tuple[str, str, dict, dict, str]]:
    """(target, workload name, params, stored config dict, stored hash) of every fixture entry."""
    points = [("cpu", r["workload"]["name"], r["workload"]["params"], r["config"], r["config_hash"])
              for r in _records()]
    points += [("cuda", e["workload"]["name"], e["workload"]["params"], e["config"], e["config_hash"])
               for e in _gpu_entries()]
    return points


def test_fixture_covers_both_targets_and_every_role():
    points = _stored_points()
    assert {p[0] for p in points} == {"cpu", "cuda"}
    assert {p[1] for p in points} >= {"matmul", "dense", "softmax"}
    roles = {(target, plan.role) for target, name, params, _, _ in points
             for plan in _space(name, params, target).sketch.plans}
    for target in ("cpu", "cuda"):
        assert {(target, r) for r in ("multi_level", "fused", "simple")} <= roles


@pytest.mark.parametrize("index", range(len(_stored_points())))
def test_stored_config_parses_hashes_decodes_and_replays(index):
    target, name, params, stored, stored_hash = _stored_points()[index]
    # The stored configs were measured on AVX-512 machines; the register file of an AVX2-only
    # one (16 vector registers against 32) rejects some of their register tiles.
    space = _space(name, params, "cpu:avx512" if target == "cpu" else target)
    config = Config.from_json(stored)
    # Byte-identical JSON and hash: the database identifies measured points by them.
    assert config.to_json() == json.dumps(stored, sort_keys=True, separators=(",", ":"))
    assert config.hash == stored_hash == config_hash(stored)
    assert space.check(config) is None
    decisions = space.decisions(config)
    assert isinstance(decisions, ScheduleDecisions) and decisions.sketch == config.sketch
    expected = {space.names[p.op]: ROLE_CLASSES[target][p.role] for p in space.sketch.plans
                if p.role in ("multi_level", "simple")}
    assert {d.stage: type(d) for d in decisions} == expected
    again = decisions.to_config()
    assert again.to_json() == config.to_json() and again.hash == stored_hash and again == config
    assert config.decisions(space) == decisions
    assert space.describe_config(config) == DESCRIBE[f"{target}/{name}/{stored_hash}"]
    s, args = space.apply(config)
    func = schedule.lower(s, args)
    assert func.body is not None


def test_stored_cpu_tiles_decode_to_their_sizes():
    record = next(r for r in _records() if r["workload"]["name"] == "matmul")
    space = _space("matmul", record["workload"]["params"], "cpu")
    d = space.decisions(Config.from_json(record["config"]))["C"]
    values = record["config"]["values"]
    assert d.tile("i") == TileDecision("i", tuple(values["C.tile.i"]))
    assert d.reduce_tile("k") == ReduceTileDecision("k", (values["C.rtile.k"],))
    assert (d.at, d.parallel, d.unroll, d.pack) == tuple(values[f"C.{k}"] for k in ("at", "parallel", "unroll", "pack"))


def test_database_round_trip_keeps_configs_and_hashes():
    """Importing the stored export and exporting it again gives the same configs and hashes."""
    db = tuning_db.Database("sqlite:///:memory:")
    assert db.import_jsonl(str(RECORDS)) == len(_records())
    out = io.StringIO()
    db.export_jsonl(out)
    again = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(r["config"], r["config_hash"]) for r in again] == [(r["config"], r["config_hash"]) for r in _records()]


# ---------------------------------------------------------------- round trips of sampled configs

OPS = {
    "matmul": dict(M=13, N=17, K=11),
    "dense": dict(M=13, N=17, K=11, bias=True, relu=True),
    "conv2d": dict(N=1, C=3, H=9, W=7, K=5, R=3, S=3, padding=1, stride=1),
    "softmax": dict(shape=[7, 13]),
    "batch_matmul": dict(B=3, M=7, N=9, K=5),
}


@pytest.mark.parametrize("target", ["cpu", "cuda"])
@pytest.mark.parametrize("op", sorted(OPS))
def test_decode_then_encode_is_the_identity(op, target):
    space = _space(op, OPS[op], target)
    rng = random.Random(17)
    # Knob combinations whether valid or not, and the children the tuners make.
    configs = [space.knobs.sample(rng) for _ in range(150)]
    valid = [space.sample(rng) for _ in range(10)]
    configs += valid + [space.mutate(c, rng, local=0.5) for c in valid]
    configs += [space.crossover(a, b, rng) for a, b in zip(valid, valid[1:])]
    for config in configs:
        decisions = space.decisions(config)
        again = space.encode(decisions)
        assert again.values == config.values and again.to_json() == config.to_json(), config
        assert all(isinstance(d, StageDecisions) for d in decisions)
        for d in decisions:  # each stage alone encodes to exactly its own knobs
            assert set(d.encode()) == {k for k in config.values if k.startswith(d.stage + ".")}


def test_decisions_drive_validity_like_the_knob_values():
    """Editing typed decisions and encoding them is the same as editing the knob values."""
    space = _space("matmul", dict(M=1024, N=1024, K=1024), "cpu")
    decisions = space.decisions(space.sample(random.Random(0)))
    c = decisions["C"]
    big = decisions.replace(dataclasses.replace(c.with_tiles(i=(64, 1, 16), j=(16, 1, 64)), at=AT_OUTER))
    config = big.to_config()
    assert config.values["C.tile.i"] == (64, 1, 16) and config.values["C.at"] == "a"
    assert "local tile" in space.check(config)
    assert space.decisions(config) == big


def test_knob_names_and_value_formats_are_the_stored_ones():
    cpu = _space("matmul", dict(M=32, N=32, K=32), "cpu")
    assert [k.name for k in cpu.knobs.knobs] == ["C.tile.i", "C.tile.j", "C.rtile.k", "C.at", "C.parallel",
                                                 "C.unroll", "C.pack"]
    soft = _space("softmax", dict(shape=[8, 48]), "cpu")
    # attach came later: stored configs without it fit (its default, 0: computed on its own)
    assert [k.name for k in soft.knobs.knobs if k.name.startswith("softmax_max.")] == [
        "softmax_max.tile.i0", "softmax_max.parallel", "softmax_max.order", "softmax_max.attach"]
    assert [k.name for k in soft.knobs.knobs if k.name.startswith("softmax_exp.")] == [
        "softmax_exp.tile.i0", "softmax_exp.tile.i1", "softmax_exp.parallel", "softmax_exp.attach"]
    assert [k.default for k in soft.knobs.knobs if k.name.endswith(".attach")] == [0, 0, 0]
    assert all(k.required for k in soft.knobs.knobs if not k.name.endswith(".attach"))
    gpu = _space("softmax", dict(shape=[8, 48]), "cuda")
    assert all(k.name.endswith(".threads") for k in gpu.knobs.knobs)
    # CPU reduce tiles and simple tiles are plain numbers; multi-level tiles are lists.
    values = json.loads(cpu.sample(random.Random(1)).to_json())["values"]
    assert isinstance(values["C.rtile.k"], int) and isinstance(values["C.tile.i"], list)
    cuda = _space("matmul", dict(M=32, N=32, K=32), "cuda")
    values = json.loads(cuda.sample(random.Random(1)).to_json())["values"]
    assert isinstance(values["C.rtile.k"], list) and len(values["C.tile.i"]) == 4


def test_decoding_refuses_missing_knobs_and_wrong_shapes():
    space = _space("matmul", dict(M=32, N=32, K=32), "cpu")
    with pytest.raises(ConfigError, match="C.tile.i"):
        space.decisions(Config(space.knobs.sketch, {"C.at": "a"}))
    d = space.decisions(space.sample(random.Random(2)))["C"]
    with pytest.raises(ConfigError, match="one level"):
        CPU_MULTI_LEVEL.encode(d.with_reduce_tiles(k=(4, 2)))
    with pytest.raises(KeyError):
        d.with_tiles(q=(1, 1, 1))
    with pytest.raises(KeyError):
        space.decisions(space.sample(random.Random(2)))["nope"]


def test_gpu_shared_bytes_reads_decisions_or_values():
    space = _space("matmul", dict(M=64, N=64, K=64), "cuda")
    plan = next(p for p in space.sketch.plans if p.role == "multi_level")
    for config in (space.sample(random.Random(n)) for n in range(10)):
        d = space.decisions(config)["C"]
        assert space.shared_bytes(plan, d) == space.shared_bytes(plan, config.values) > 0
