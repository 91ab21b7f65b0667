"""How to launch a compiled CUDA program without its IR: the launch manifest and a launcher.

    manifest = LaunchManifest.from_program(program)   # kernels, grids, blocks, arguments
    source = manifest.header() + cuda_source            # the source carries it (first line)
    LaunchManifest.from_source(source).write_beside(cubin_path)
    launcher = CubinLauncher.load(cubin_path)           # in the measuring process (needs CuPy)
    launcher.launch(device_arrays)                      # every kernel, in order, one stream

Why. The tuner lowers a config and compiles its source in one process; the measuring
process that owns the GPU gets only the path of the CUBIN (the ``BuildResult``'s
artifact), as the CPU's measuring process gets a shared object. A shared object is
self-describing (one C function); a CUBIN is not: its kernels need their grid and block
shapes, and the program may need workspace buffers between kernels. The manifest is
that description, written by the code generator into the source's first line, so that a
source and its manifest can never disagree, and copied beside the cached CUBIN by the
compiler (``cuda.CudaBackend.compile_source``).
"""
from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

#: The first line of every generated CUDA source starts with this, then the manifest's JSON.
HEADER = "// autotune-launch: "
SUFFIX = ".launch.json"


@dataclass(frozen=True)
class KernelLaunch:
    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]

    @property
    def threads(self) -> int:
        x, y, z = self.block
        return x * y * z


@dataclass(frozen=True)
class ArrayShape:
    """One kernel argument: its name, shape and ``te`` dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class LaunchManifest:
    """The kernels of one program in launch order, the user's arrays (``params``, in call
    order) and the workspace buffers the launcher allocates (passed after the params)."""

    kernels: tuple[KernelLaunch, ...]
    params: tuple[ArrayShape, ...]
    workspace: tuple[ArrayShape, ...]

    @classmethod
    def from_program(cls, program) -> "LaunchManifest":
        """The manifest of a ``schedule.passes.GPUProgram``."""
        def arrays(buffers):
            return tuple(ArrayShape(b.name, tuple(int(d) for d in b.shape), b.dtype) for b in buffers)

        return cls(tuple(KernelLaunch(k.name, tuple(k.grid), tuple(k.block)) for k in program.kernels),
                   arrays(program.params), arrays(program.workspace))

    def to_json(self) -> str:
        return json.dumps({
            "kernels": [[k.name, list(k.grid), list(k.block)] for k in self.kernels],
            "params": [[a.name, list(a.shape), a.dtype] for a in self.params],
            "workspace": [[a.name, list(a.shape), a.dtype] for a in self.workspace],
        }, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "LaunchManifest":
        data = json.loads(text)
        arrays = lambda rows: tuple(ArrayShape(n, tuple(s), d) for n, s, d in rows)  # noqa: E731
        return cls(tuple(KernelLaunch(n, tuple(g), tuple(b)) for n, g, b in data["kernels"]),
                   arrays(data["params"]), arrays(data["workspace"]))

    def header(self) -> str:
        """The source line that carries this manifest."""
        return HEADER + self.to_json() + "\n"

    @classmethod
    def from_source(cls, source: str) -> "LaunchManifest | None":
        """The manifest a generated source carries on its first line (None: a source not
        made by the code generator)."""
        first = source.split("\n", 1)[0]
        return cls.from_json(first[len(HEADER):]) if first.startswith(HEADER) else None

    def write_beside(self, artifact: "str | Path") -> Path:
        path = manifest_path(artifact)
        partial = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        partial.write_text(self.to_json())
        partial.replace(path)
        return path

    @classmethod
    def read_beside(cls, artifact: "str | Path") -> "LaunchManifest":
        return cls.from_json(manifest_path(artifact).read_text())


def manifest_path(artifact: "str | Path") -> Path:
    artifact = Path(artifact)
    return artifact.with_name(artifact.name + SUFFIX)


class CubinLauncher:
    """A CUBIN loaded through CuPy with its manifest: ``launch(arrays)`` queues every
    kernel on the current stream with the user's device arrays and the workspace. What
    both ``cuda.CUDAModule`` and the GPU's measuring process launch with. Needs CuPy and
    a GPU."""

    def __init__(self, manifest: LaunchManifest, module):
        import cupy

        from te import dtypes

        from .errors import BuildError

        self.manifest = manifest
        self._module = module  # keeps the CUBIN loaded as long as the functions are used
        self.functions = [module.get_function(k.name) for k in manifest.kernels]
        self._workspace = tuple(cupy.empty(a.shape, dtype=dtypes.numpy_dtype(a.dtype)) for a in manifest.workspace)
        for k, fn in zip(manifest.kernels, self.functions):
            if fn.max_threads_per_block < k.threads:
                raise BuildError(f"{k.name}: needs {k.threads} threads per block, the device allows "
                                 f"{fn.max_threads_per_block} with {fn.num_regs} registers per thread")

    @classmethod
    def load(cls, artifact: "str | Path") -> "CubinLauncher":
        import cupy

        return cls(LaunchManifest.read_beside(artifact), cupy.RawModule(path=str(artifact)))

    def launch(self, arrays) -> None:
        args = tuple(arrays) + self._workspace
        for k, fn in zip(self.manifest.kernels, self.functions):
            fn(k.grid, k.block, args)
