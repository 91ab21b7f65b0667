"""From one lowered function to CUDA kernels: the GPU passes over the loop IR.

    program = lower_gpu(schedule.lower(s, [A, B, C]))
    for k in program.kernels:
        k.name, k.grid, k.block, k.body          # one __global__ function each

The pipeline, one line per pass (each returns a new tree):

1. ``split_kernels``          each top-level statement (a root stage's loop nest) becomes one
                              kernel, launched in order; global temporaries between them become
                              workspace parameters, because a kernel cannot allocate global memory;
2. ``constant_trip_loops``    a tail loop ``for v in range(min(c, rest))`` becomes ``for v in
                              range(c): if v < rest`` and loops of extent 1 disappear, so every
                              unrolled loop has a constant trip count (NVVM otherwise unrolls
                              runtime-bounded loops into remainder code and takes minutes);
3. ``inject_virtual_threads`` a ``vthread`` loop moves down to the statements that use it (as small
                              unrolled loops), local buffers under it get a vthread dimension, and
                              what does not use it (the shared-memory fetch) runs once for all;
4. ``insert_barriers``        a block-wide barrier where shared memory that threads wrote is read
                              (read after write), and at the top of a loop whose body reads what
                              its next iteration overwrites (write after read across iterations);
5. ``launch_dims``            gridDim / blockDim per tag: the largest extent bound to that tag;
6. ``verify_kernel``          nested thread loops fit their enclosing ones, barriers sit only in
                              control flow that is the same for every thread of a block.

What a thread-bound loop means inside a kernel: ``for t in range(n) (threadIdx.x)`` is "t is this
thread's ``threadIdx.x``; the body runs if t < n". A loop nested in it and bound to the same tag
is the same hardware index (the cooperative fetch inside the owner's thread loop). Code outside
every thread loop runs in every thread, redundantly. Stages computed inside a kernel with
``global`` or ``local`` scope live in per-thread arrays; ``shared`` ones in block-wide memory.

Every pass here is pure IR: no device, no compiler. ``backends.cuda`` prints the kernels and
``backends.emulator`` runs them on the CPU.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from te.errors import TEError
from te.expr import Expr, Var, post_order, substitute

from . import ir
from .ir import Allocate, Barrier, Buffer, BufferLoad, BufferStore, For, IfThenElse, LoweredFunc, Stmt

BLOCK_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
VTHREAD = "vthread"


class GPUError(TEError):
    """A schedule that cannot run as CUDA kernels (the message says what to change)."""


@dataclass(frozen=True)
class GPULimits:
    """Resource limits a GPU config must respect (defaults: any CUDA GPU since Volta).

    ``max_shared_bytes`` is the static shared memory one block may declare; the local
    limit counts accumulator elements per thread (beyond it registers spill).
    """

    max_threads_per_block: int = 1024
    max_shared_bytes: int = 48 * 1024
    max_registers_per_block: int = 65536
    max_registers_per_thread: int = 255
    max_local_elements: int = 256
    max_vthreads: int = 8


# ---------------------------------------------------------------- program


@dataclass(frozen=True)
class GPUKernel:
    """One ``__global__`` function: its body and its launch shape per tag."""

    name: str
    body: Stmt
    launch: dict  # tag -> extent, for the blockIdx.* and threadIdx.* tags used

    @property
    def grid(self) -> tuple[int, int, int]:
        return tuple(self.launch.get(t, 1) for t in BLOCK_TAGS)  # type: ignore[return-value]

    @property
    def block(self) -> tuple[int, int, int]:
        return tuple(self.launch.get(t, 1) for t in THREAD_TAGS)  # type: ignore[return-value]

    @property
    def threads(self) -> int:
        x, y, z = self.block
        return x * y * z

    @property
    def shared_bytes(self) -> int:
        """Static shared memory the kernel declares (every allocation, as CUDA reserves them)."""
        return sum(_nbytes(s.buffer) for s in ir.walk(self.body)
                   if isinstance(s, Allocate) and s.buffer.scope == "shared")


@dataclass(frozen=True)
class GPUProgram:
    """Kernels launched in order; each takes ``params`` then ``workspace`` as arguments."""

    name: str
    params: tuple[Buffer, ...]
    workspace: tuple[Buffer, ...]
    kernels: tuple[GPUKernel, ...]

    @property
    def kernel_params(self) -> tuple[Buffer, ...]:
        return self.params + self.workspace

    def kernel_func(self, kernel: GPUKernel) -> LoweredFunc:
        """``kernel`` as a LoweredFunc over every kernel parameter (what the printer takes)."""
        return LoweredFunc(kernel.name, self.kernel_params, kernel.body)

    def __str__(self):
        parts = []
        for k in self.kernels:
            launch = f"grid={k.grid} block={k.block}"
            parts.append(f"# {launch}\n{self.kernel_func(k)}")
        return "\n".join(parts)


def lower_gpu(func: LoweredFunc) -> GPUProgram:
    """Run the GPU passes on ``func`` (the output of ``schedule.lower``)."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", func.name):
        raise GPUError(f"kernel name {func.name!r} is not a C identifier")
    workspace, bodies = split_kernels(func)
    kernels = []
    for n, body in enumerate(bodies):
        name = func.name if len(bodies) == 1 else f"{func.name}_{n}"
        body = constant_trip_loops(body)
        body = inject_virtual_threads(body)
        body = insert_barriers(body)
        kernel = GPUKernel(name, body, launch_dims(body))
        verify_kernel(kernel)
        kernels.append(kernel)
    return GPUProgram(func.name, func.params, tuple(workspace), tuple(kernels))


def _nbytes(buf: Buffer) -> int:
    from te import dtypes

    return buf.size * max(1, dtypes.bits(buf.dtype) // 8)


# ---------------------------------------------------------------- small IR queries


def _exprs(s: Stmt):
    """Every expression of ``s`` (extents, conditions, indices, values), outermost first."""
    for node in ir.walk(s):
        if isinstance(node, For):
            yield node.extent
        elif isinstance(node, IfThenElse):
            yield node.condition
        elif isinstance(node, BufferStore):
            yield from node.indices
            yield node.value


def _expr_uses(e: Expr, names: set) -> bool:
    return any(isinstance(n, Var) and n in names for n in post_order(e))


def _uses(s: Stmt, names: set) -> bool:
    return any(_expr_uses(e, names) for e in _exprs(s))


def _has(s: Stmt, kind) -> bool:
    return any(isinstance(n, kind) for n in ir.walk(s))


def _has_shared_alloc(s: Stmt) -> bool:
    return any(isinstance(n, Allocate) and n.buffer.scope == "shared" for n in ir.walk(s))


def subst_stmt(s: Stmt, mapping: dict, simplify: bool = False) -> Stmt:
    """``s`` with variables replaced in every expression (and the changed ones simplified)."""
    if not simplify:
        return ir.map_stmt(s, fexpr=lambda e: substitute(e, mapping))

    def fexpr(e: Expr) -> Expr:
        new = substitute(e, mapping)
        return new if new is e else _simplify(new)

    return ir.map_stmt(s, fexpr=fexpr)


def retarget(s: Stmt, old: Buffer, new: Buffer, lead: tuple[Expr, ...]) -> Stmt:
    """``s`` with every access ``old[idx]`` turned into ``new[*lead, *idx]``."""

    def fexpr(e: Expr) -> Expr:
        from te.expr import transform

        def load(n):
            if isinstance(n, BufferLoad) and n.buffer is old:
                return BufferLoad(new, lead + n.indices, n.dtype)
            return None

        return transform(e, load)

    def fstmt(n: Stmt):
        if isinstance(n, BufferStore) and n.buffer is old:
            return BufferStore(new, lead + n.indices, n.value)
        return None

    return ir.map_stmt(s, fstmt, fexpr)


def expand(buf: Buffer, n: int, name_suffix: str = "") -> Buffer:
    """``buf`` with a new leading dimension of ``n``."""
    return Buffer(buf.name + name_suffix, (n,) + tuple(buf.shape), buf.dtype, buf.scope, buf.is_arg)


# ---------------------------------------------------------------- 1. kernels


def split_kernels(func: LoweredFunc) -> tuple[list[Buffer], list[Stmt]]:
    """(workspace buffers, kernel bodies): one kernel per top-level statement."""
    body = func.body
    workspace: list[Buffer] = []
    while isinstance(body, Allocate):
        if body.buffer.scope != "global":
            raise GPUError(
                f"stage {body.buffer.name!r} has scope {body.buffer.scope!r} but is computed at the root; "
                f"compute_at it inside the loops of the stage that reads it"
            )
        workspace.append(body.buffer)
        body = body.body
    return workspace, list(body.stmts) if isinstance(body, ir.Seq) else [body]


# ---------------------------------------------------------------- 2. constant trip counts


def constant_trip_loops(s: Stmt) -> Stmt:
    """Tail bounds back into guards, unit loops removed (thread-bound loops untouched)."""
    from te.expr import Binary

    def fstmt(node: Stmt):
        if not isinstance(node, For) or node.kind == ir.THREAD_BINDING:
            return None
        n = ir.const_int(node.extent)
        if n is None and isinstance(node.extent, Binary) and node.extent.op == "min":
            a, b = node.extent.a, node.extent.b
            c, rest = (a, b) if ir.const_int(a) is not None else (b, a)
            n = ir.const_int(c)
            if n is not None:
                body = IfThenElse(_simplify(node.var < rest), node.body)
                node = For(node.var, c, node.kind, body, node.thread_tag)
        if n == 1:
            return _drop_unit_guard(subst_stmt(node.body, {node.var: 0}, simplify=True))
        return node

    return ir.map_stmt(s, fstmt)


def _simplify(e: Expr) -> Expr:
    from .simplify import simplify

    return simplify(e)


def _drop_unit_guard(s: Stmt) -> Stmt:
    """A guard that became a constant after substitution goes away (or takes its branch)."""
    if isinstance(s, IfThenElse):
        cond = _simplify(s.condition)
        c = cond.value if isinstance(cond, ir.Const) else None
        if c is True:
            return s.then_case
        if c is False:
            return s.else_case if s.else_case is not None else ir.seq()
        return IfThenElse(cond, s.then_case, s.else_case)
    return s


# ---------------------------------------------------------------- 3. virtual threads


class _CannotInject(Exception):
    """The vthread loop stays a serial loop (correct, only without the reuse)."""


def inject_virtual_threads(s: Stmt) -> Stmt:
    """Replace every vthread loop (innermost first); see the module docstring."""

    def fstmt(node: Stmt):
        if isinstance(node, For) and node.thread_tag == VTHREAD:
            return _inject(node)
        return None

    return ir.map_stmt(s, fstmt)


def _inject(loop: For) -> Stmt:
    n = ir.const_int(loop.extent)
    if n is None:
        raise GPUError(f"vthread loop {loop.var.name!r} needs a constant extent")
    if n == 1:
        return subst_stmt(loop.body, {loop.var: 0}, simplify=True)
    try:
        return _VThread(loop.var, n).push(loop.body)
    except _CannotInject:
        return For(loop.var, loop.extent, ir.SERIAL, loop.body)


@dataclass
class _VThread:
    """``for v in range(n): body`` with the iterations independent (virtual threads)."""

    var: Var
    n: int

    def uses(self, s: Stmt) -> bool:
        return _uses(s, {self.var})

    def wrap(self, s: Stmt) -> Stmt:
        if _has(s, Barrier) or any(isinstance(x, BufferStore) and x.buffer.scope == "shared" for x in ir.walk(s)):
            raise _CannotInject
        return For(self.var, ir.Const(self.n), ir.UNROLLED, s)

    def push(self, s: Stmt) -> Stmt:
        if not self.uses(s):
            return s  # the same for every virtual thread: run it once
        if isinstance(s, ir.Seq):
            return ir.seq(*[self.push(x) for x in s.stmts])
        if isinstance(s, Allocate):
            if s.buffer.scope == "shared":
                return Allocate(s.buffer, self.push(s.body))
            new = expand(s.buffer, self.n)
            return Allocate(new, self.push(retarget(s.body, s.buffer, new, (self.var,))))
        if isinstance(s, For):
            if _expr_uses(s.extent, {self.var}):
                return self.wrap(s)
            return For(s.var, s.extent, s.kind, self.push(s.body), s.thread_tag)
        if isinstance(s, IfThenElse):
            if _expr_uses(s.condition, {self.var}):
                return self.wrap(s)
            return IfThenElse(s.condition, self.push(s.then_case),
                              None if s.else_case is None else self.push(s.else_case))
        if isinstance(s, BufferStore):
            if not any(_expr_uses(i, {self.var}) for i in s.indices):
                raise _CannotInject  # every virtual thread would write the same element
            return self.wrap(s)
        return s


# ---------------------------------------------------------------- 4. barriers

# A sync state: shared buffers written and read since the last barrier.
_State = tuple[frozenset, frozenset]
_EMPTY: _State = (frozenset(), frozenset())


def _shared_loads(e: Expr) -> set:
    return {n.buffer for n in post_order(e) if isinstance(n, BufferLoad) and n.buffer.scope == "shared"}


def _own_access(s: Stmt) -> tuple[set, set]:
    """(reads, writes) of shared buffers by ``s`` itself, not its children."""
    reads: set = set()
    writes: set = set()
    if isinstance(s, BufferStore):
        for e in (*s.indices, s.value):
            reads |= _shared_loads(e)
        if s.buffer.scope == "shared":
            writes.add(s.buffer)
    elif isinstance(s, IfThenElse):
        reads |= _shared_loads(s.condition)
    elif isinstance(s, For):
        reads |= _shared_loads(s.extent)
    return reads, writes


def _exposed(s: Stmt) -> tuple[set, set, bool]:
    """Shared (reads, writes) ``s`` may do before it passes a barrier, and whether it always does."""
    if isinstance(s, Barrier):
        return set(), set(), True
    reads, writes = _own_access(s)
    if isinstance(s, ir.Seq):
        for x in s.stmts:
            r, w, passed = _exposed(x)
            reads |= r
            writes |= w
            if passed:
                return reads, writes, True
        return reads, writes, False
    if isinstance(s, (For, Allocate)):
        r, w, passed = _exposed(s.body)
        return reads | r, writes | w, passed
    if isinstance(s, IfThenElse):
        r1, w1, p1 = _exposed(s.then_case)
        r2, w2, p2 = _exposed(s.else_case) if s.else_case is not None else (set(), set(), False)
        return reads | r1 | r2, writes | w1 | w2, p1 and p2
    return reads, writes, False


def _conflict(state: _State, reads: set, writes: set) -> bool:
    written, read = state
    return bool(reads & written or writes & read)


def insert_barriers(s: Stmt) -> Stmt:
    """Barriers for shared memory (see the module docstring); conservative per buffer."""
    return _sync(s, _EMPTY)[0]


def _sync(s: Stmt, state: _State) -> tuple[Stmt, _State]:
    """``s`` with barriers inserted, given the accesses pending before it; and those after it."""
    if isinstance(s, Barrier):
        return s, _EMPTY
    if isinstance(s, ir.Seq):
        out: list[Stmt] = []
        for x in s.stmts:
            reads, writes, _ = _exposed(x)
            if _conflict(state, reads, writes):
                out.append(Barrier())
                state = _EMPTY
            x, state = _sync(x, state)
            out.append(x)
        return ir.seq(*out), state
    if isinstance(s, BufferStore):
        reads, writes = _own_access(s)
        return s, (state[0] | writes, state[1] | reads)
    if isinstance(s, Allocate):
        body, state = _sync(s.body, state)
        return Allocate(s.buffer, body), state
    if isinstance(s, IfThenElse):
        reads, _ = _own_access(s)
        state = (state[0], state[1] | reads)
        then, st1 = _sync(s.then_case, state)
        other, st2 = (None, state) if s.else_case is None else _sync(s.else_case, state)
        return IfThenElse(s.condition, then, other), (st1[0] | st2[0], st1[1] | st2[1])
    if isinstance(s, For):
        reads, _ = _own_access(s)
        state = (state[0], state[1] | reads)
        body, end = _sync(s.body, state)
        if s.kind != ir.THREAD_BINDING and ir.const_int(s.extent) != 1:
            head_reads, head_writes, _ = _exposed(body)
            if _conflict(end, head_reads, head_writes):  # the next iteration against this one
                body, end = _sync(ir.seq(Barrier(), s.body), _EMPTY)
        return dataclasses.replace(s, body=body), end
    return s, state


def missing_barriers(body: Stmt) -> int:
    """How many barriers ``insert_barriers`` would add to ``body``: 0 for a kernel whose shared
    memory is synchronised (the pass is idempotent), more for one that lost a barrier."""

    def count(s: Stmt) -> int:
        return sum(isinstance(n, Barrier) for n in ir.walk(s))

    return count(insert_barriers(body)) - count(body)


# ---------------------------------------------------------------- 5. launch


def launch_dims(s: Stmt) -> dict:
    """Tag -> the largest extent of the loops bound to it (gridDim / blockDim)."""
    launch: dict = {}
    for node in ir.walk(s):
        if isinstance(node, For) and node.kind == ir.THREAD_BINDING:
            if node.thread_tag == VTHREAD:
                continue
            n = ir.const_int(node.extent)
            if n is None:
                raise GPUError(f"loop {node.var.name!r} bound to {node.thread_tag} needs a constant extent")
            launch[node.thread_tag] = max(launch.get(node.thread_tag, 1), n)
    return launch


# ---------------------------------------------------------------- 6. checks


def verify_kernel(kernel: GPUKernel) -> None:
    """Raise GPUError unless thread loops fit and every barrier is reached by all threads."""
    _verify(kernel, kernel.body, {}, thread_vars=set(), divergent=None)


def _verify(kernel: GPUKernel, s: Stmt, enclosing: dict, thread_vars: set, divergent: str | None) -> None:
    if isinstance(s, Barrier):
        if divergent is not None:
            raise GPUError(
                f"kernel {kernel.name!r}: a barrier (__syncthreads) sits under {divergent}, which not every "
                f"thread of the block takes; bind fewer threads there or make the loop extents match"
            )
        return
    if isinstance(s, For):
        tag = s.thread_tag if s.kind == ir.THREAD_BINDING else None
        if tag == VTHREAD:
            raise GPUError(f"kernel {kernel.name!r}: vthread loop {s.var.name!r} survived injection")
        if s.kind == ir.PARALLEL:
            raise GPUError(
                f"kernel {kernel.name!r}: loop {s.var.name!r} is marked parallel; on cuda bind it to "
                f"blockIdx/threadIdx instead"
            )
        inner_div = divergent
        if tag is None:
            if _expr_uses(s.extent, thread_vars) and inner_div is None:
                inner_div = f"loop {s.var.name!r} whose extent depends on the thread index"
            _verify(kernel, s.body, enclosing, thread_vars, inner_div)
            return
        n = ir.const_int(s.extent)
        outer = enclosing.get(tag)
        if outer is not None and n > outer:
            raise GPUError(
                f"kernel {kernel.name!r}: loop {s.var.name!r} binds {n} values of {tag} inside a loop that "
                f"binds only {outer}; the extra iterations would never run"
            )
        if tag in THREAD_TAGS and n < kernel.launch[tag] and inner_div is None:
            inner_div = f"loop {s.var.name!r} ({tag} < {n} of {kernel.launch[tag]})"
        new_vars = thread_vars | {s.var} if tag in THREAD_TAGS else thread_vars
        _verify(kernel, s.body, {**enclosing, tag: n}, new_vars, inner_div)
        return
    if isinstance(s, IfThenElse):
        inner_div = divergent
        if inner_div is None and _expr_uses(s.condition, thread_vars):
            inner_div = "a condition that depends on the thread index"
        _verify(kernel, s.then_case, enclosing, thread_vars, inner_div)
        if s.else_case is not None:
            _verify(kernel, s.else_case, enclosing, thread_vars, inner_div)
        return
    for child in ir.child_stmts(s):
        _verify(kernel, child, enclosing, thread_vars, divergent)
