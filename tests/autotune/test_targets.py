"""Targets as data: parsing specs, facts from injected machine descriptions, the status
enum through the database, and a third target kind added by one module that then tunes."""
from __future__ import annotations

import random
import subprocess
import sys

import pytest

import backends
from autotune import Task, targets, tune
from autotune.builder import LocalBuilder
from autotune.measure import MeasureInput, MeasureResult
from schedule.space import ConfigSpace
from schedule.space_gpu import GPUConfigSpace
from schedule.targets import CpuFacts, CudaFacts, Target, TargetError, detect_cpu_facts, parse_target, target_kinds
from tuning_db import Database, MeasureRecord, Status, TargetInfo

CPUINFO_AVX512 = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse sse2 ssse3 fma sse4_1 avx avx2 avx512f avx512dq avx512bw avx512vl
"""
CPUINFO_AVX2 = "model name\t: AMD Ryzen 7 5800X\nflags\t\t: fpu sse sse2 avx avx2 fma\n"
CPUINFO_ARM = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes crc32\n"
CACHES = {"l1d": 48 * 1024, "l2": 2 << 20, "l3": 105 << 20}


@pytest.mark.parametrize("spec, kind, preset", [
    ("cpu", "cpu", None), ("cpu:avx2", "cpu", "avx2"), ("cpu:avx512", "cpu", "avx512"),
    ("cuda", "cuda", None), ("cuda:sm_80", "cuda", "sm_80"), ("cuda:sm_90", "cuda", "sm_90"),
    ("cuda:h200", "cuda", "h200"), ("cuda:a100", "cuda", "a100"), ("CUDA:H100", "cuda", "h100"),
])
def test_every_spec_parses_to_a_target_whose_str_is_the_canonical_spec(spec, kind, preset):
    target = parse_target(spec)
    assert (target.kind, target.preset) == (kind, preset)
    assert str(target) == spec.lower()
    assert parse_target(str(target)) == target and hash(parse_target(spec)) == hash(target)
    assert parse_target(target) is target
    assert isinstance(target.facts, CpuFacts if kind == "cpu" else CudaFacts)


def test_presets_set_their_facts():
    assert parse_target("cuda:sm_80").facts.arch == "sm_80" and parse_target("cuda:a100").facts.sm_count == 108
    h200 = parse_target("cuda:h200").facts
    assert h200.arch == "sm_90" and "H200" in h200.name
    avx2 = parse_target("cpu:avx2").facts
    assert (avx2.isa, avx2.vector_bits, avx2.isa_flags) == ("avx2", 256, ("-mavx2", "-mfma"))
    assert parse_target("cpu:avx512").facts.vector_bits == 512
    host = parse_target("cpu").facts  # plain cpu: this machine's ISA at the detected width
    assert host.isa_flags[0] == "-march=native"
    if host.isa == "generic":
        assert host.isa_flags == ("-march=native",)
    else:  # the width, then any exclusion this CPU's flags call for
        from schedule.targets.cpu import NATIVE_EXCLUSIONS

        assert host.isa_flags[1] == f"-mprefer-vector-width={host.vector_bits}"
        assert set(host.isa_flags[2:]) <= {f for flags in NATIVE_EXCLUSIONS.values() for f in flags}
    assert "-march=native" in backends.backend_for("cpu").describe().flags
    assert "-mavx2 -mfma" in backends.backend_for("cpu:avx2").describe().flags
    assert "-march=native" not in backends.backend_for("cpu:avx2").describe().flags


@pytest.mark.parametrize("spec", ["tpu", "cpu:neon", "cuda:sm_1", "cpu:", ""])
def test_an_unknown_target_names_every_known_kind_and_preset(spec):
    with pytest.raises(TargetError) as info:
        parse_target(spec)
    message = str(info.value)
    assert "known targets: cpu[:avx2|avx512], cuda[:" in message and "h200" in message
    assert isinstance(info.value, ValueError)
    with pytest.raises(ValueError, match="known targets"):
        Task("matmul", dict(M=8, N=8, K=8), target=spec)


def test_cpu_facts_from_an_injected_cpuinfo():
    facts = detect_cpu_facts(CPUINFO_AVX512, caches=CACHES, cores=56)
    assert (facts.isa, facts.vector_bits, facts.cores) == ("avx512", 512, 56)
    assert (facts.l1d_bytes, facts.l2_bytes, facts.l3_bytes) == (48 * 1024, 2 << 20, 105 << 20)
    assert facts.model == "Intel(R) Xeon(R) Platinum 8480+"
    # gcc tunes such a CPU to 256-bit vectors; the space's tiles assume 512
    assert facts.isa_flags == ("-march=native", "-mprefer-vector-width=512")
    fp16 = detect_cpu_facts(CPUINFO_AVX512.replace("avx512f ", "avx512f avx512_fp16 "), caches={}, cores=2)
    assert fp16.isa_flags == ("-march=native", "-mprefer-vector-width=512", "-mno-avx512fp16")
    avx2 = detect_cpu_facts(CPUINFO_AVX2, caches={}, cores=8)
    assert avx2.isa == "avx2" and avx2.isa_flags == ("-march=native", "-mprefer-vector-width=256")
    arm = detect_cpu_facts(CPUINFO_ARM, caches={}, cores=4)
    assert (arm.isa, arm.vector_bits, arm.isa_flags) == ("generic", 128, ("-march=native",))  # not an x86 flag
    assert arm.l3_bytes == 32 << 20  # no sysfs figure: the fallback


def test_a_preset_overrides_the_detected_isa_and_keeps_the_machine():
    from schedule.targets.cpu import preset

    detected = detect_cpu_facts(CPUINFO_AVX512, caches=CACHES, cores=56)
    avx2 = preset(detected, "avx2")
    assert (avx2.isa, avx2.vector_bits, avx2.isa_flags) == ("avx2", 256, ("-mavx2", "-mfma"))
    assert (avx2.cores, avx2.l3_bytes, avx2.model) == (56, 105 << 20, detected.model)


def test_the_kind_chooses_the_space_and_the_gpu_limits_come_from_the_facts():
    import te

    wl = te.create_workload("matmul", M=64, N=64, K=64)
    assert type(ConfigSpace.from_workload(wl, "cpu")) is ConfigSpace
    space = ConfigSpace.from_workload(wl, "cuda:sm_80")
    assert isinstance(space, GPUConfigSpace) and space.target == parse_target("cuda:sm_80")
    small = parse_target("cuda").with_facts(shared_bytes_per_block=4096, max_threads_per_block=256)
    limited = ConfigSpace.from_workload(wl, small)
    assert (limited.limits.max_shared_bytes, limited.limits.max_threads_per_block) == (4096, 256)
    rng = random.Random(0)
    refused = [limited.check(c) for c in (space.sample(rng) for _ in range(40))]
    assert any(r is not None for r in refused)  # configs the default limits allow, the small GPU does not


def test_tasks_hold_targets_and_describe_them_through_the_registry():
    task = Task("matmul", dict(M=8, N=8, K=8), target="cpu:avx2")
    assert isinstance(task.target, Target) and task.target_kind == "cpu" and str(task.target) == "cpu:avx2"
    info = targets.describe(task.target)
    assert info.kind == "cpu" and "-mavx2" in info.flags
    assert targets.resolve("cpu") == (parse_target("cpu"), None)


def test_cuda_cannot_be_measured_here_and_says_why():
    from backends.cuda import gpu_available

    if gpu_available():
        pytest.skip("a GPU is visible")
    assert "no CUDA GPU found" in targets.measure_problem("cuda")
    chosen, note = targets.resolve("auto")
    assert chosen.kind == "cpu" and "not cuda: no CUDA GPU found" in note
    runner = targets.make_runner("cuda")
    task = Task("matmul", dict(M=8, N=8, K=8), target="cuda")
    with pytest.raises(targets.MeasureUnavailable, match="no CUDA GPU found"):
        runner.run(task, [])
    from autotune.runner import LocalRunner

    with pytest.raises(targets.MeasureUnavailable, match="no CUDA GPU found"):
        LocalRunner().run(task, [])  # the CPU measuring process refuses a cuda task too


def test_choosing_the_target_without_a_gpu_driver_does_not_import_cupy():
    """Without the driver's library no GPU can be used: ``auto`` picks the CPU without
    importing CuPy (over a second on every command)."""
    from schedule.targets.cuda import driver_present

    if driver_present():
        pytest.skip("the NVIDIA driver's library is installed here")
    probe = ("import sys; from autotune import targets; chosen, note = targets.resolve('auto'); "
             "print(chosen.kind, 'cupy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["cpu", "False"]


def test_a_preset_of_wider_vectors_than_the_cpu_has_is_refused_before_any_kernel_runs(monkeypatch):
    from schedule.targets import cpu

    avx2_host = detect_cpu_facts(CPUINFO_AVX2, CACHES, cores=2)
    avx512_host = detect_cpu_facts(CPUINFO_AVX512, CACHES, cores=2)
    arm_host = detect_cpu_facts(CPUINFO_ARM, CACHES, cores=2)
    avx512, avx2 = parse_target("cpu:avx512").facts, parse_target("cpu:avx2").facts
    problem = cpu.missing_instructions(avx512, avx2_host)
    assert "lacks avx512 (it has avx2)" in problem and "AMD Ryzen 7 5800X" in problem
    assert problem.endswith("use the target cpu (this CPU's own instructions) or cpu:avx2")
    assert cpu.missing_instructions(avx2, avx2_host) is None
    assert cpu.missing_instructions(avx512, avx512_host) is None and cpu.missing_instructions(avx2, avx512_host) is None
    assert cpu.missing_instructions(avx2, arm_host).endswith("own instructions)")  # no x86 preset runs there
    assert cpu.missing_instructions(avx2_host, avx512_host) is None  # -march=native: the compiling CPU's own
    assert cpu.compiled_isa(avx512) == "avx512" and cpu.compiled_isa(avx2_host) is None

    monkeypatch.setattr(cpu, "host_cpu_facts", lambda: avx2_host)
    assert "lacks avx512" in targets.measure_problem("cpu:avx512")
    assert targets.measure_problem("cpu:avx2") is None and targets.measure_problem("cpu") is None
    from autotune.runner import LocalRunner

    task = Task("matmul", dict(M=8, N=8, K=8), target="cpu:avx512")
    with pytest.raises(targets.MeasureUnavailable, match="lacks avx512"):
        LocalRunner().run(task, [])


def test_status_enum_round_trips_through_the_database(tmp_path):
    assert Status("ok") == "ok" and str(Status.TIMEOUT) == "timeout" and f"{Status.INVALID}" == "invalid"
    assert MeasureResult("wrong_answer").status is Status.WRONG_ANSWER
    with pytest.raises(ValueError, match="unknown record status"):
        MeasureRecord(workload_key="k", workload_name="matmul", params={}, target=TargetInfo("cpu"),
                      config={}, status="exploded")
    target = TargetInfo("cpu_flavour", "some cpu")  # any identifier is a kind to the database
    with Database(tmp_path / "t.db") as db:
        run = db.start_run("k", "matmul", {}, target, "random", 0, 6, "test")
        written = [MeasureRecord(workload_key="k", workload_name="matmul", params={}, target=target,
                                 config={"n": n}, status=status, trial=n, error=None if n == 0 else "why",
                                 median_s=1e-3 if status is Status.OK else None, costs=[1e-3] if n == 0 else [])
                   for n, status in enumerate(Status)]
        db.add_records(run, written)
        back = db.history(run)
    assert [r.status for r in back] == list(Status) and all(isinstance(r.status, Status) for r in back)
    assert back == written


# ---------------------------------------------------------------- a third target in one module


def test_a_third_target_added_by_one_module_tunes_end_to_end(tmp_path):
    import cpu_noomp_target  # registers the kind, its backend and its tuning parts

    kind = cpu_noomp_target.KIND
    assert kind in target_kinds() and kind in backends.backend_kinds()
    task = Task("matmul", dict(M=32, N=32, K=32), target=kind)
    assert isinstance(task.space, cpu_noomp_target.SerialSpace)
    config = task.space.sample(random.Random(0))
    source = LocalBuilder().source(MeasureInput(task, config))
    assert "#pragma omp" not in source
    assert "-fopenmp" not in targets.describe(task.target).flags
    with Database(tmp_path / "t.db") as db:
        result = tune(task, trials=8, tuner="random", db=db, batch_size=8)
        stored = db.history(result.run_id)
    assert len(result.history) == 8 and all(t.result.ok for t in result.history), \
        [t.result.error for t in result.history]
    assert all(v == 1 for t in result.history for k, v in t.config.values.items() if k.endswith(".parallel"))
    assert {r.target.kind for r in stored} == {kind} and len(stored) == 8


def test_a_kind_may_register_its_own_feature_extractor():
    import dataclasses

    import numpy as np

    import cpu_noomp_target
    from autotune.features import FEATURE_DIM, FeatureCache

    parts = targets.parts_for(cpu_noomp_target.KIND)
    seen = []

    def features(func):
        seen.append(func.name)
        return np.full(FEATURE_DIM, 7.0, dtype=np.float32)

    targets.register_autotune_parts(dataclasses.replace(parts, features=features), override=True)
    try:
        task = Task("matmul", dict(M=16, N=16, K=16), target=cpu_noomp_target.KIND)
        x = FeatureCache().get(task, task.space.sample(random.Random(0)))
        assert seen == ["kernel"] and np.all(x == 7.0)
    finally:
        targets.register_autotune_parts(parts, override=True)
    cpu = Task("matmul", dict(M=16, N=16, K=16))
    assert not np.all(FeatureCache().get(cpu, cpu.space.sample(random.Random(0))) == 7.0)


def test_each_package_keeps_one_part_per_kind_and_names_what_is_missing():
    from schedule.targets import TargetKind, register_target_kind

    assert {"cpu", "cuda"} <= set(backends.backend_kinds())
    with pytest.raises(TargetError, match="backend of target kind 'cpu' is already registered"):
        backends.register_backend("cpu", lambda target: None)

    class Bare(TargetKind):  # a kind with schedule facts only: no backend, no tuning parts
        name = "bare_test_kind"

        def detect(self):
            return CpuFacts("sse", 128, 1, 1, 1, 1, (), "bare")

    from schedule.targets import base

    register_target_kind(Bare())
    try:
        with pytest.raises(TargetError, match="'bare_test_kind' has no backend registered"):
            backends.backend_for("bare_test_kind")
        with pytest.raises(TargetError, match="'bare_test_kind' has no tuning parts registered"):
            targets.parts_for("bare_test_kind")
    finally:
        base._KINDS.pop("bare_test_kind")


def test_l1_ways_come_from_sysfs_and_set_where_rows_collide(tmp_path):
    from schedule.targets.cpu import FALLBACK_L1D_WAYS, read_l1d_ways

    for name, (level, kind, ways) in {"index0": ("1", "Data", "12"), "index1": ("1", "Instruction", "8"),
                                      "index2": ("2", "Unified", "16")}.items():
        entry = tmp_path / name
        entry.mkdir()
        for field, value in (("level", level), ("type", kind), ("ways_of_associativity", ways)):
            (entry / field).write_text(value + "\n")
    assert read_l1d_ways(str(tmp_path)) == 12
    assert read_l1d_ways(str(tmp_path / "absent")) == FALLBACK_L1D_WAYS
    facts = detect_cpu_facts(CPUINFO_AVX512, caches=CACHES, cores=2, l1d_ways=12)
    assert (facts.l1d_ways, facts.l1d_set_span) == (12, 4096)  # 48 KiB in 12 ways
    assert detect_cpu_facts(CPUINFO_AVX2, caches={}, cores=2).l1d_ways == FALLBACK_L1D_WAYS
