"""One backend per target kind: code generation, compiler, loader, behind one interface.

    backend = backend_for("cpu")                 # or a Target, or "cuda:sm_80"
    source = backend.generate_source(func)       # C / CUDA C text of a LoweredFunc
    artifact = backend.compile_source(source, timeout=60)  # a path in the compile cache
    module = backend.load(artifact, func)        # callable with arrays (cuda: needs a GPU)
    module = backend.build(func)                 # all three at once
    backend.describe()                           # BackendInfo(device, compiler, flags)

``compile_source`` raises ``BuildError``, ``BuildTimeout`` or ``ResourceLimitError``
(``backends.errors``), so a builder maps failures to statuses by type. A kind registers a
factory ``target -> Backend`` with ``register_backend``; the built-in ``cpu`` and ``cuda``
are registered by ``backends/__init__.py``, each imported only when first asked for.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from schedule.ir import LoweredFunc
from schedule.targets import KindTable, Target, parse_target


@dataclass(frozen=True)
class BackendInfo:
    """What a build depends on, as stored with every measurement."""

    device: str     # CPU model or GPU name
    compiler: str   # e.g. "gcc (Debian 12.2.0-14) 12.2.0" or "nvrtc 13.0"
    flags: str      # the flags that change the code
    #: What earlier versions called this device in the records they stored (for
    #: ``tuning_db.lookup_best`` to find them, with a warning): less precise names.
    former_devices: tuple[str, ...] = ()


class Backend:
    """The interface of a target's backend (see the module docstring); one object per Target."""

    def __init__(self, target: Target):
        self.target = target

    def generate_source(self, func: LoweredFunc) -> str:
        raise NotImplementedError

    def compile_source(self, source: str, timeout: float | None = 60.0):
        """Compile ``source`` (or reuse the compile cache) and return the artifact's path."""
        raise NotImplementedError

    def load(self, artifact, func: LoweredFunc, source: str | None = None):
        """The callable module of a compiled ``artifact`` of ``func``."""
        raise NotImplementedError

    def build(self, func: LoweredFunc):
        source = self.generate_source(func)
        return self.load(self.compile_source(source), func, source)

    def describe(self) -> BackendInfo:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.target})"


#: target kind -> ``factory(target) -> Backend``.
_FACTORIES = KindTable("backend")


def register_backend(kind: str, factory: Callable[[Target], Backend], *, override: bool = False) -> None:
    """Make ``factory(target)`` the backend of targets of ``kind``."""
    _FACTORIES.register(kind, factory, override=override)


def backend_kinds() -> tuple[str, ...]:
    return _FACTORIES.kinds()


def backend_for(target: "str | Target") -> Backend:
    """The backend of ``target`` (a spec or a Target)."""
    target = parse_target(target)
    return _FACTORIES.part_of(target)(target)
