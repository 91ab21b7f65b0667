"""What tuning needs per target kind: the runner, the anchor, the stored description,
and whether the tuning loop can measure on it here.

    parts = parts_for("cpu")                  # or a Target; AutotuneParts of its kind
    runner = make_runner(task.target, timeout=10.0)
    info = describe(task.target)              # tuning_db.TargetInfo stored with each record
    target, note = resolve("auto")            # the kind measured here, and why not the others
    require_measurable(task.target)           # MeasureUnavailable with the reason, if not

The schedule side of a kind (facts, presets, space class) is ``schedule.targets``; the
code generator and compiler are ``backends.backend_for``; this module holds the rest, so
a new kind is one more ``register_autotune_parts`` call, not a branch in the tuner or the
command line. Built in:

    cpu   LocalRunner (a measuring process), NumPy anchor (PyTorch's for conv2d where
          installed), always measurable, its fp32 peak measured (``autotune.peak``)
    cuda      CudaRunner (a measuring process that owns the GPU), cuBLAS anchor; measurable
              where CuPy sees a GPU
    cuda_sim  SimulatedCudaRunner (the emulator checks, a model times), no anchor, always
              measurable; its figures are simulated (``AutotuneParts.simulated``)
"""
from __future__ import annotations

import platform
from dataclasses import dataclass
from typing import Callable

from schedule.targets import KindTable, Target, parse_target

#: The pseudo-target of the command line: the best kind measurable here.
AUTO = "auto"


class MeasureUnavailable(RuntimeError):
    """The tuning loop cannot measure on this target here (the message says why)."""


@dataclass(frozen=True)
class AutotuneParts:
    """One kind's tuning parts.

    ``make_runner(timeout=, options=, seed=)`` makes its ``measure.Runner``; ``anchor``
    measures the reference library (``anchor.NumpyAnchor``-like: ``name``,
    ``measure(task) -> dict``, ``wants_clean_blas(task)``); ``measure_problem(target)``
    says why the tuning loop cannot measure on it here (None: it can); ``describe``
    gives the ``tuning_db.TargetInfo`` stored with records; ``auto_rank`` orders the
    kinds ``auto`` tries (highest first; None: never picked by ``auto``); ``features``
    maps a lowered function to the cost model's feature vector (None: the loop-IR
    features of ``autotune.features.extract``, which read CPU loops and GPU thread
    bindings alike, so one model serves every kind that lowers to the loop IR).
    """

    kind: str
    make_runner: Callable
    anchor: object
    measure_problem: Callable[[Target], str | None]
    describe: Callable[[Target], object] = None  # type: ignore[assignment]  (None: describe_with_backend)
    auto_rank: int | None = None
    features: Callable | None = None
    #: Its times come from a model, not a device: never reported as speed (GFLOP/s, ratios).
    simulated: bool = False
    #: ``peak(task)``: the device's measured peak for the task's dtype (an ``autotune.peak.Peak``),
    #: or None where the kind has no such figure; reports give the best as a share of it.
    peak: Callable | None = None


def describe_with_backend(target: Target):
    """TargetInfo from the backend's description (device, compiler, flags) and this host."""
    from backends import backend_for
    from tuning_db import TargetInfo

    info = backend_for(target).describe()
    return TargetInfo(target.kind, info.device, info.compiler, info.flags, platform.node())


def former_devices(target: "str | Target") -> tuple[str, ...]:
    """What earlier versions called ``target``'s device in stored records (the backend's
    ``BackendInfo.former_devices``), for ``autotune.build`` to still find them."""
    from backends import backend_for

    return backend_for(parse_target(target)).describe().former_devices


_PARTS = KindTable("tuning parts")


def register_autotune_parts(parts: AutotuneParts, *, override: bool = False) -> AutotuneParts:
    return _PARTS.register(parts.kind, parts, override=override)


def parts_for(target: "str | Target") -> AutotuneParts:
    return _PARTS.part_of(target)


def describe(target: "str | Target"):
    """The ``tuning_db.TargetInfo`` of ``target`` on this machine."""
    target = parse_target(target)
    parts = parts_for(target)
    return (parts.describe or describe_with_backend)(target)


def make_runner(target: "str | Target", timeout: float = 10.0, options=None, seed: int = 0):
    """The runner that measures ``target``'s kind."""
    return parts_for(target).make_runner(timeout=timeout, options=options, seed=seed)


def measure_problem(target: "str | Target") -> str | None:
    """Why the tuning loop cannot measure on ``target`` here, or None."""
    target = parse_target(target)
    return parts_for(target).measure_problem(target)


def require_measurable(target: "str | Target") -> None:
    problem = measure_problem(target)
    if problem is not None:
        raise MeasureUnavailable(f"cannot measure on {target}: {problem}")


def resolve(spec: "str | Target") -> tuple[Target, str | None]:
    """(target, note): ``spec`` parsed, or for ``auto`` the highest-ranked measurable kind and
    a note saying which was picked and why the better-ranked ones were not."""
    if not (isinstance(spec, str) and spec.strip().lower() == AUTO):
        return parse_target(spec), None
    skipped = []
    for parts in sorted((p for p in _PARTS.values() if p.auto_rank is not None), key=lambda p: -p.auto_rank):
        target = parse_target(parts.kind)
        problem = parts.measure_problem(target)
        if problem is None:
            why = f" ({'; '.join(skipped)})" if skipped else ""
            return target, f"target auto: {target}{why}"
        skipped.append(f"not {parts.kind}: {problem}")
    raise MeasureUnavailable(f"target auto: no target can be measured here ({'; '.join(skipped)})")


# ---------------------------------------------------------------- the built-in kinds


def _local_runner(timeout: float = 10.0, options=None, seed: int = 0):
    from .runner import LocalRunner

    return LocalRunner(timeout=timeout, options=options, seed=seed)


def _cuda_runner(timeout: float = 10.0, options=None, seed: int = 0):
    from .runner_cuda import CudaRunner

    return CudaRunner(timeout=timeout, options=options, seed=seed)


def _simulated_cuda_runner(timeout: float = 10.0, options=None, seed: int = 0):
    from .runner_cuda import SimulatedCudaRunner

    return SimulatedCudaRunner(timeout=timeout, options=options, seed=seed)


def is_simulated(target: "str | Target") -> bool:
    """Whether ``target``'s times come from a model (never to be reported as speed)."""
    return parts_for(target).simulated


def simulated_counterpart(target: "str | Target") -> Target:
    """The simulated kind standing in for ``target`` (``--simulate``): ``cuda:h100`` ->
    ``cuda_sim:h100``; ValueError for a kind without one."""
    target = parse_target(target)
    if target.kind == "cuda_sim":
        return target
    if target.kind != "cuda":
        raise ValueError(f"--simulate stands in for a GPU; target {target} has no simulated counterpart "
                         f"(use --target cuda or cuda:<preset>)")
    return parse_target("cuda_sim" if target.preset is None else f"cuda_sim:{target.preset}")


def _always(target: Target) -> None:
    return None


def _cpu_problem(target: Target) -> str | None:
    """Why kernels for ``target`` cannot run on this CPU (a preset of wider vectors than it
    has), or None."""
    from schedule.targets.cpu import host_cpu_facts, missing_instructions

    return missing_instructions(target.facts, host_cpu_facts())


def _cuda_problem(target: Target) -> str | None:
    from backends.cuda import gpu_available

    if not gpu_available():
        return "no CUDA GPU found (needs CuPy and an NVIDIA driver: pip install -e '.[cuda]')"
    return None


def _cpu_peak(task):
    """The CPU's measured fp32 peak for float32 work that can approach it: a reduction with
    data reuse (a multi-level stage: matmul, conv2d, dense, attention). None for other dtypes,
    and for element-wise or pooling work, which memory bandwidth bounds far below it."""
    from schedule.sketch import MULTI_LEVEL

    if any(t.dtype != "float32" for t in task.workload.outputs):
        return None
    if not any(p.role == MULTI_LEVEL for p in task.space.sketch.plans):
        return None
    from .peak import measure_cpu_peak

    readings = [measure_cpu_peak(task.target.facts) for _ in range(2)]  # load only lowers a reading
    return max(readings, key=lambda peak: peak.gflops)


def machine_peak(task):
    """The measured peak of the device ``task`` runs on, for its dtype (None: no figure)."""
    peak = parts_for(task.target).peak
    return peak(task) if peak is not None else None


def _register_builtins() -> None:
    from .anchor import CublasAnchor, NoAnchor, NumpyAnchor

    register_autotune_parts(AutotuneParts("cpu", _local_runner, NumpyAnchor(), _cpu_problem, auto_rank=0,
                                          peak=_cpu_peak))
    register_autotune_parts(AutotuneParts("cuda", _cuda_runner, CublasAnchor(), _cuda_problem, auto_rank=10))
    register_autotune_parts(AutotuneParts("cuda_sim", _simulated_cuda_runner,
                                          NoAnchor("simulated times have no anchor"), _always, simulated=True))


_register_builtins()
