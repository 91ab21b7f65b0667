"""A register tile printed as vector variables (GCC's vector extensions), not as an array.

``promote_accumulators`` gives a micro-kernel its accumulators as a small array, ``acc``,
that the C compiler is meant to keep in registers: copied in from the cache tile, updated
at every step of the reduction loop, copied out. Whether gcc 12 does depends on how its
vectorizer and its scalar replacement of the array happen to meet: for some tiles (a 6x16
tile in a cache block of 22 tiles, a 3x16 tile in one of 1024^3's configs) it vectorized
the update across the tile's rows, or not at all, and left the array in memory, with a
scalar FMA, a load and a store per element (a quarter of the speed of the same tile in a
block of 16; ``bench/RESULTS.md``). The cause is inside gcc's pass order and not
something a schedule can avoid.

So the tile is printed the way a hand-written micro-kernel is: one variable of a vector
type per vector of the tile (``typedef float at_f32x8 __attribute__((vector_size(32)))``),
the loops over its rows unrolled here, the loop across a row printed as one statement per
vector, inputs read with unaligned vector loads (the ones a row shares are broadcast from
a scalar, which the vector extension does for a scalar operand). Vector variables are
values, so gcc keeps them in registers whatever it would have done with the array (and
spills them, like any value, only when there are more than registers).

It applies only where the tile is shaped for it, and otherwise the tile stays an array
(``NotVectorizable``): every access to the tile in a vector loop of constant extent,
whole vectors wide and running along the tile's last axis; every loop that indexes the
tile of constant extent, to be unrolled; its values floats combined by ``+ - * /``. A
tile with a variable number of rows (the tail of rows that do not divide the extent) is
one that stays an array.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from te import dtypes
from te.expr import Binary, Const, Expr, Var, free_vars, post_order, substitute
from schedule import ir
from schedule.ir import Allocate, Buffer, BufferLoad, BufferStore, For, IfThenElse, Seq, Stmt
from schedule.passes.ir_tools import subst_stmt
from schedule.passes.promote_accumulators import MIN_VECTOR_BYTES  # the narrowest vector worth a variable
from schedule.simplify import Analyzer
from .c_family import PrintedStmt

#: The element types a tile of vector variables may hold (C's vector extension has no
#: half-precision arithmetic on these targets, and integer tiles do not occur).
VECTOR_DTYPES = ("float32", "float64")
#: The most vector variables a tile may become; a tile this large spills either way.
MAX_VECTORS = 64
#: The most times a loop over the tile's rows is unrolled here.
MAX_UNROLL = 64
#: Operators the vector extension applies element-wise (``min``/``max`` it does not).
VECTOR_OPS = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


class NotVectorizable(Exception):
    """The tile is not shaped for vector variables; it is printed as an array."""


@dataclass(frozen=True)
class VectorType:
    """A vector of ``lanes`` elements of ``dtype``, by its two C names: ``name`` for the
    tile's variables and ``unaligned`` for loads and stores through a pointer to any element
    (aligned to one element, allowed to alias it, as the intrinsics' ``__m256_u`` is)."""

    dtype: str
    lanes: int

    @property
    def name(self) -> str:
        return f"at_{'f32' if self.dtype == 'float32' else 'f64'}x{self.lanes}"

    @property
    def unaligned(self) -> str:
        return self.name + "_u"

    def typedefs(self, ctype: str) -> str:
        nbytes = self.lanes * dtypes.nbytes(self.dtype)
        return (f"typedef {ctype} {self.name} __attribute__((vector_size({nbytes})));\n"
                f"typedef {ctype} {self.unaligned} __attribute__((vector_size({nbytes}), "
                f"aligned({dtypes.nbytes(self.dtype)}), may_alias));")


# A vector expression, checked when the tile is rewritten and printed later, once the
# printer knows the names and ranges of the loops around it. It is written in terms of the
# vector loop's variable, and each ``VectorAssign`` prints it at one value of it (the first
# lane of its vector):
#   ("tile", offset)            the tile's elements from ``offset`` + the variable on
#   ("load", buffer, indices)   a vector read from ``buffer[indices]`` onwards
#   ("scalar", expr)            a value the vector's lanes share, broadcast
#   ("bin", op, a, b)           a C operator applied lane by lane


@dataclass(frozen=True, eq=False)
class LoopName(PrintedStmt):
    """Where a loop the rewrite unrolled was: its variable takes its name here, as when the
    loop is printed, so that every later loop keeps the name ``str(func)`` gives it."""

    var: Var

    def print_c(self, printer) -> None:
        printer.names(self.var)


@dataclass(frozen=True, eq=False)
class VectorAssign(PrintedStmt):
    """One vector of a tile's statement: ``target`` (("tile", offset) or ("store", buffer,
    indices)) takes ``value`` (a vector expression), both at ``lane = first``."""

    vtype: VectorType
    tile: "TileVariables"
    target: tuple
    value: tuple
    lane: Var
    first: int

    def print_c(self, printer) -> None:
        value = self._expr(printer, self.value)
        if self.value[0] == "scalar":
            value = f"({value} - ({self.vtype.name}){{}})"  # broadcast: x - 0 is x, -0.0 too
        if self.target[0] == "tile":
            printer.emit(f"{self._tile(printer, self.target[1])} = {value};")
        else:
            _, buf, indices = self.target
            printer.emit(f"*({self.vtype.unaligned}*){self._address(printer, buf, indices, write=True)} = {value};")

    @property
    def target_vector(self) -> int | None:
        """Which of the tile's vector variables the statement sets (None: it stores to memory)."""
        return self._vector(self.target[1]) if self.target[0] == "tile" else None

    def _vector(self, offset: int) -> int:
        return (offset + self.first) // self.vtype.lanes

    def _tile(self, printer, offset: int) -> str:
        return self.tile.variable(printer, self._vector(offset))

    def _address(self, printer, buf: Buffer, indices, write: bool = False) -> str:
        at = tuple(substitute(i, {self.lane: self.first}) for i in indices)
        return f"&{printer.buffer_name(buf)}[{printer.flat_index(buf, at, write)}]"

    def _expr(self, printer, v: tuple) -> str:
        kind = v[0]
        if kind == "tile":
            return self._tile(printer, v[1])
        if kind == "load":
            return f"(*(const {self.vtype.unaligned}*){self._address(printer, v[1], v[2])})"
        if kind == "scalar":
            return printer.expr(v[1])
        _, op, a, b = v
        return f"({self._expr(printer, a)} {VECTOR_OPS[op]} {self._expr(printer, b)})"


class TileVariables:
    """The vector variables that hold a tile ``buffer``: ``count`` of them, named after it."""

    def __init__(self, buffer: Buffer, count: int):
        self.vars = [Var(f"{buffer.name}_v{k}", buffer.dtype) for k in range(count)]

    def variable(self, printer, k: int) -> str:
        return printer.names(self.vars[k])


@dataclass(frozen=True, eq=False)
class VectorTile(PrintedStmt):
    """The scope of a register tile held in vector variables: their declaration, then
    ``body`` (the tile's statements, rewritten)."""

    vtype: VectorType
    tile: TileVariables
    body: Stmt

    def print_c(self, printer) -> None:
        printer.helper(self.vtype.name, self.vtype.typedefs(printer.ctype(self.vtype.dtype)))
        names = ", ".join(self.tile.variable(printer, k) for k in range(len(self.tile.vars)))
        printer.emit("{")
        printer.depth += 1
        printer.emit(f"{self.vtype.name} {names};")
        printer.stmt(self.body)
        printer.depth -= 1
        printer.emit("}")


def vector_tile(alloc: Allocate, vector_bits: int) -> VectorTile:
    """``alloc`` (the scope of a register tile) as a ``VectorTile`` for vectors of up to
    ``vector_bits``; raises ``NotVectorizable`` where the tile is not shaped for it."""
    return _Rewriter(alloc.buffer, vector_bits).rewrite(alloc)


def vectorizable(alloc: Allocate, vector_bits: int) -> bool:
    """Whether ``vector_tile(alloc, vector_bits)`` succeeds, decided without writing out the
    unrolled statements: each loop over the tile's rows is checked once with its variable
    left symbolic rather than once per row, a small fraction of the rewrite's cost (the
    cost model asks this of every candidate it ranks). Where the symbolic form leaves the
    answer open (a tile index not linear in the unrolled loops), the rewrite decides."""
    try:
        _Checker(alloc.buffer, vector_bits).check(alloc)
    except NotVectorizable:
        return False
    except _Undecided:
        try:
            vector_tile(alloc, vector_bits)
        except NotVectorizable:
            return False
    return True


class _Rewriter:
    def __init__(self, buffer: Buffer, vector_bits: int):
        if buffer.dtype not in VECTOR_DTYPES:
            raise NotVectorizable(f"{buffer.dtype} tile")
        self.buffer = buffer
        self.vector_bits = vector_bits
        self.analyzer = Analyzer()  # one for the tile: its accesses share their index subtrees

    def rewrite(self, alloc: Allocate) -> VectorTile:
        count = self._shape(alloc)
        self.tile = TileVariables(self.buffer, count)
        return VectorTile(self.vtype, self.tile, self._stmt(alloc.body))

    def _shape(self, alloc: Allocate) -> int:
        """Check the tile's scope as a whole and choose its vector type (``self.vtype``);
        returns how many vectors the tile is."""
        for node in ir.walk(alloc.body):
            bound = node.extent if isinstance(node, For) else node.condition if isinstance(node, IfThenElse) else None
            if bound is not None and any(isinstance(e, BufferLoad) and e.buffer is self.buffer
                                         for e in post_order(bound)):
                raise NotVectorizable("the tile read in a loop bound or condition")
        lanes = self._lanes(alloc.body)
        count = self.buffer.size // lanes
        if count > MAX_VECTORS:
            raise NotVectorizable(f"{count} vectors")
        self.vtype = VectorType(self.buffer.dtype, lanes)
        return count

    def _lanes(self, body: Stmt) -> int:
        """The widest vector, up to the target's, that every vector loop over the tile is a
        whole number of, and that divides the tile."""
        extents = [ir.const_int(loop.extent) for loop in ir.walk(body)
                   if isinstance(loop, For) and loop.kind == ir.VECTORIZED and ir.indexes_register_tile(loop, self.buffer)]
        if not extents or None in extents:
            raise NotVectorizable("a vector loop over the tile of variable extent, or none")
        nbytes = dtypes.nbytes(self.buffer.dtype)
        lanes = self.vector_bits // (8 * nbytes)
        while lanes * nbytes >= MIN_VECTOR_BYTES:
            if all(e % lanes == 0 for e in extents) and self.buffer.size % lanes == 0:
                return lanes
            lanes //= 2
        raise NotVectorizable(f"vector loops of {extents} elements")

    # ---------------------------------------------------------------- statements

    def _stmt(self, s: Stmt) -> Stmt:
        if isinstance(s, Seq):
            return Seq(tuple(self._stmt(x) for x in s.stmts))
        if isinstance(s, IfThenElse):
            return IfThenElse(s.condition, self._stmt(s.then_case),
                              None if s.else_case is None else self._stmt(s.else_case))
        if isinstance(s, Allocate):
            return Allocate(s.buffer, self._stmt(s.body))
        if isinstance(s, BufferStore):
            if ir.register_tile_accesses(s, self.buffer):
                raise NotVectorizable("the tile accessed outside a vector loop")
            return s
        if not isinstance(s, For):
            return s
        accesses = ir.register_tile_accesses(s.body, self.buffer)
        if not accesses:
            return s
        if any(s.var in free_vars(i) for a in accesses for i in a.indices):
            return self._vector_loop(s) if s.kind == ir.VECTORIZED else self._unrolled(s)
        if s.kind != ir.SERIAL and s.kind != ir.UNROLLED:
            raise NotVectorizable(f"a {s.kind} loop around the tile's statements")
        return replace(s, body=self._stmt(s.body))

    def _unrolled(self, loop: For) -> Stmt:
        n = ir.const_int(loop.extent)
        if n is None or n > MAX_UNROLL:
            raise NotVectorizable(f"loop {loop.var.name} over the tile cannot be unrolled")
        return ir.seq(LoopName(loop.var), *[self._stmt(subst_stmt(loop.body, {loop.var: Const(i)})) for i in range(n)])

    def _vector_loop(self, loop: For) -> Stmt:
        """One statement per vector and store, each store's accesses analysed once, in
        terms of the loop's variable."""
        lane = loop.var
        plans = [(self._target(store, lane), self._value(store.value, lane)) for store in _stores(loop)]
        return ir.seq(LoopName(lane), *[VectorAssign(self.vtype, self.tile, target, value, lane, first)
                                        for first in range(0, ir.const_int(loop.extent), self.vtype.lanes)
                                        for target, value in plans])

    # ---------------------------------------------------------------- accesses

    def _linear_index(self, buf: Buffer, indices):
        return self.analyzer.linearize(self.analyzer.simplify(ir.flat_index(buf, indices)))

    def _vector_access(self, buf: Buffer, indices, lane: Var) -> tuple:
        """("tile", offset at lane 0) or (kind, buf, indices) for an access contiguous across
        ``lane``; raises for any other."""
        form = self._linear_index(buf, indices)
        step = 0
        others = []  # (term, coefficient) of the index's terms without the lane
        for term, coefficient in form.terms.values():
            if term is lane:
                step = coefficient
            elif lane in free_vars(term):
                raise NotVectorizable(f"{buf.name} indexed non-linearly across the lanes")
            else:
                others.append((term, coefficient))
        if step != 1:
            raise NotVectorizable(f"{buf.name} read or written at a stride of {step} across the lanes")
        if buf is not self.buffer:
            return ("memory", buf, tuple(indices))
        self._check_tile_offset(others, form.const)
        return ("tile", form.const)

    def _check_tile_offset(self, others: list, const: int) -> None:
        """A tile access starts on a whole vector, at a constant once the rows are unrolled."""
        if others or const % self.vtype.lanes:
            raise NotVectorizable("the tile indexed by a loop that was not unrolled, or across vectors")

    def _target(self, store: BufferStore, lane: Var) -> tuple:
        if store.buffer.dtype != self.buffer.dtype:
            raise NotVectorizable(f"a store of {store.buffer.dtype}")
        access = self._vector_access(store.buffer, store.indices, lane)
        return access if access[0] == "tile" else ("store", *access[1:])

    def _value(self, e: Expr, lane: Var) -> tuple:
        if e.dtype != self.buffer.dtype:
            raise NotVectorizable(f"a {e.dtype} value")
        if lane not in free_vars(e):
            if any(isinstance(n, BufferLoad) and n.buffer is self.buffer for n in post_order(e)):
                raise NotVectorizable("one element of the tile read across the lanes")
            return ("scalar", e)
        if isinstance(e, BufferLoad):
            access = self._vector_access(e.buffer, e.indices, lane)
            return access if access[0] == "tile" else ("load", *access[1:])
        if isinstance(e, Binary) and e.op in VECTOR_OPS:
            return ("bin", e.op, self._value(e.a, lane), self._value(e.b, lane))
        raise NotVectorizable(f"{type(e).__name__} across the lanes")


def _stores(loop: For) -> list:
    """The stores a vector loop over the tile holds (raises if it holds anything else)."""
    stores = list(loop.body.stmts) if isinstance(loop.body, Seq) else [loop.body]
    if not all(isinstance(s, BufferStore) for s in stores):
        raise NotVectorizable("a vector loop over the tile holds more than stores")
    return stores


class _Undecided(Exception):
    """The symbolic check cannot tell; the rewrite itself must."""


class _Checker(_Rewriter):
    """The rewrite's checks with the unrolled loops' variables kept symbolic: a loop over the
    tile's rows is walked once, and a tile access must be whole vectors apart for every
    value of those variables (each a multiple of the vector's lanes apart)."""

    def __init__(self, buffer: Buffer, vector_bits: int):
        super().__init__(buffer, vector_bits)
        self.unrolled: dict = {}  # an unrolled loop's variable -> its extent

    def check(self, alloc: Allocate) -> None:
        """Raise as ``rewrite`` would (``_Undecided`` where only the rewrite can tell)."""
        self._shape(alloc)
        self._stmt(alloc.body)

    def _unrolled(self, loop: For) -> Stmt:
        n = ir.const_int(loop.extent)
        if n is None or n > MAX_UNROLL:
            raise NotVectorizable(f"loop {loop.var.name} over the tile cannot be unrolled")
        if n > 0:
            self.unrolled[loop.var] = n
            self._stmt(loop.body)
        return loop

    def _vector_loop(self, loop: For) -> Stmt:
        for store in _stores(loop):
            self._target(store, loop.var)
            self._value(store.value, loop.var)
        return loop

    def _check_tile_offset(self, others: list, const: int) -> None:
        """The offset is whole vectors for every value of the unrolled variables."""
        for term, coefficient in others:
            if not (isinstance(term, Var) and term in self.unrolled):
                if free_vars(term) <= self.unrolled.keys():
                    raise _Undecided(f"the tile indexed by {term}")
                raise NotVectorizable("the tile indexed by a loop that was not unrolled, or across vectors")
            if self.unrolled[term] > 1 and coefficient % self.vtype.lanes:
                raise NotVectorizable("the tile indexed across vectors")
        if const % self.vtype.lanes:
            raise NotVectorizable("the tile indexed across vectors")
