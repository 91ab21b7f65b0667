"""The C-family source printer shared by the CPU (C) and CUDA backends.

One walk over the loop IR; what differs between languages is data on a ``Dialect``
(type names, restrict keyword, loop pragmas, local/shared declarations, barrier,
thread indices), not a second walk.

Integer semantics follow the expression language: ``//`` and ``%`` are floor division
and modulo (plain ``/`` and ``%`` are emitted when the loop bounds prove both operands
non-negative, the usual case for indices), narrow integer results wrap (cast back to
their type after each operation), and signed overflow wraps (``-fwrapv`` on gcc).

Index width: loop variables and thread indices are ``int32_t`` (te's ``INDEX_DTYPE``),
unless a function's index arithmetic can leave the int32 range: a flat buffer index, a
loop extent or an index comparison (a tail guard) whose bounds, from the enclosing
loops, pass 2**31 - 1, or a buffer of more elements than that. Such a function is
printed again with ``int64_t`` loop variables and thread indices, so every index
expression built from them is computed in 64 bits (C's usual conversions), and the
index helpers (floor division, min, max) take ``int64_t``. Functions that fit print
with ``int32_t`` on GPUs. The CPU dialect always prints the wide form
(``Dialect.wide_index``): with ``-fwrapv``, a 32-bit index that may wrap is not an
affine address to gcc, so a contiguous vector access inside an index sum became a
gather or scatter; 64-bit indices address contiguously (and fold into x86 addressing).
``CSourcePrinter(dialect, wide_index=True)`` forces the wide form.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from te import dtypes
from te.expr import Binary, Call, Cast, Compare, Const, Expr, Logical, Not, Select, Var
from schedule import ir
from schedule.ir import Allocate, Barrier, Buffer, BufferLoad, BufferStore, For, IfThenElse, LoweredFunc, Stmt
from schedule.printer import NameTable
from schedule.simplify import Analyzer, interval, simplify

C_TYPES = {
    "float16": "_Float16", "float32": "float", "float64": "double",
    "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
    "uint8": "uint8_t", "bool": "bool",
}
C_KEYWORDS = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum",
    "extern", "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return",
    "short", "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void",
    "volatile", "while", "bool", "threadIdx", "blockIdx", "blockDim", "gridDim", "min", "max", "exp",
    "log", "sqrt", "tanh", "abs", "floor", "ceil", "erf", "sin", "cos", "pow",
}
_MATH_FLOAT32 = {
    "exp": "expf", "log": "logf", "sqrt": "sqrtf", "tanh": "tanhf", "erf": "erff", "floor": "floorf",
    "ceil": "ceilf", "sin": "sinf", "cos": "cosf", "abs": "fabsf",
}
_INFIX = {
    "add": "+", "sub": "-", "mul": "*", "div": "/",
    "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=", "and": "&&", "or": "||",
}
#: Identifiers the generated code uses for something else (types, macros of its headers, the
#: functions and helpers it calls): a tensor or loop named like one of them is renamed.
C_RESERVED = C_KEYWORDS | set(C_TYPES.values()) | set(_MATH_FLOAT32.values()) | {
    "fabs", "powf", "free", "aligned_alloc", "INFINITY", "NAN", "NULL", "HUGE_VAL", "M_PI", "M_E",
    "true", "false", "isnan", "isinf", "isfinite", "signbit", "size_t", "float_t", "double_t",
} | {f"at_{op}_{t}" for op in ("floordiv", "floormod", "min", "max") for t in C_TYPES}
#: Buffers up to this size live on the stack; larger ones are heap-allocated.
STACK_BYTES = 64 * 1024
#: The range of ``int32_t`` indices; index arithmetic beyond it is printed with ``int64_t``.
INT32_MIN, INT32_MAX = -(2 ** 31), 2 ** 31 - 1


@dataclass
class Dialect:
    """What a C-family language spells differently."""

    types: dict = field(default_factory=lambda: dict(C_TYPES))
    restrict: str = "__restrict__"
    function_prefix: str = ""
    float16_math_via_float: bool = True
    #: How the small helper functions (floor division, min, max) are declared.
    helper_prefix: str = "static inline"
    #: When set, the name of a function ``int32_t f(int32_t index, int32_t extent, const char*
    #: buffer, int32_t dim)`` the translation unit defines; every index of every access goes
    #: through it (the GPU emulator's bounds-checked accesses).
    index_check: str | None = None
    #: Index width of a function whose index arithmetic fits in 32 bits: False prints
    #: ``int32_t`` (GPUs compute 64-bit integers slowly), True ``int64_t``.
    wide_index: bool = False

    def loop_pragmas(self, loop: For) -> list[str]:
        return []

    def wrap_access(self, printer: "CSourcePrinter", buf: Buffer, flat: str, write: bool) -> str:
        """The flat index of one access to ``buf`` as printed (``write``: a store); a dialect
        may route it through a function of its own (the GPU emulator's race detector)."""
        return flat

    def reduction_pragma(self, op: str, accumulator: str) -> str | None:
        """The pragma that lets the compiler vectorize a loop folding ``op`` (add, mul, min,
        max) into the scalar ``accumulator``, or None to print the loop as it is."""
        return None

    def loop_header(self, loop: For, var: str, extent: str,
                    index_type: str = "int32_t") -> tuple[str, str | None] | None:
        """For a loop that is not a ``for`` (a thread index): the line declaring ``var`` (of C
        type ``index_type``) and a guard on the body (None when every index is in range), or
        None for a plain loop."""
        return None

    def allocate(self, printer: "CSourcePrinter", buf: Buffer, name: str, ctype: str) -> tuple[list[str], list[str]]:
        """Lines that declare ``buf`` and lines that release it after its scope (``printer``
        takes file-scope definitions through ``printer.helper``)."""
        nbytes = buf.size * dtypes.nbytes(buf.dtype)
        if nbytes <= STACK_BYTES:
            return [f"{ctype} {name}[{buf.size}] __attribute__((aligned(64)));"], []
        padded = -(-nbytes // 64) * 64
        return [f"{ctype}* {self.restrict} {name} = ({ctype}*)aligned_alloc(64, {padded});"], [f"free({name});"]

    def barrier(self) -> str:
        raise NotImplementedError("barriers exist only on GPU targets")

    def register_tile(self, alloc: Allocate) -> Stmt | None:
        """A statement to print in place of ``alloc``, the scope of a register tile
        (``Buffer.in_registers``), or None to print the tile as an array."""
        return None


class PrintedStmt(Stmt):
    """A statement a dialect rewrote for printing that prints itself: ``print_c(printer)``
    emits its lines through ``printer`` (a ``CSourcePrinter``)."""

    def print_c(self, printer: "CSourcePrinter") -> None:  # pragma: no cover - subclasses define it
        raise NotImplementedError


@dataclass(frozen=True, eq=False)
class _ScalarAssign(Stmt):
    """``var = value;`` for a C local the printer declared (a reduction's accumulator)."""

    var: Var
    value: Expr


def _literal(c: Const, types: dict) -> str:
    if c.dtype == "bool":
        return "1" if c.value else "0"
    if dtypes.is_float(c.dtype):
        v = c.value
        if math.isinf(v):
            text = "INFINITY" if v > 0 else "(-INFINITY)"
        elif math.isnan(v):
            text = "NAN"
        else:
            text = repr(float(v))
            if "e" not in text and "." not in text:
                text += ".0"
            if c.dtype != "float64":
                text += "f"
        return text if c.dtype in ("float32", "float64") else f"(({types[c.dtype]}){text})"
    if c.dtype == "int32":
        return str(c.value) if c.value >= 0 else f"({c.value})"
    if c.dtype == "int64":
        return f"({c.value}LL)"
    return f"(({types[c.dtype]}){c.value})"


class CSourcePrinter:
    """Prints one ``LoweredFunc`` as a C-family function.

    ``wide_index``: None (the default) takes the dialect's ``wide_index``: with False,
    ``int32_t`` or ``int64_t`` indices per function (see the module docstring); True
    forces ``int64_t``.
    """

    def __init__(self, dialect: Dialect, wide_index: bool | None = None):
        self.dialect = dialect
        self._reset(wide=dialect.wide_index if wide_index is None else bool(wide_index))

    def _reset(self, wide: bool) -> None:
        """Start printing afresh, with 64-bit indices if ``wide``."""
        self.wide = wide
        self.index_ctype = "int64_t" if wide else "int32_t"
        self.needs_wide = False  # set when int32 index arithmetic could overflow
        self.uses_math = False  # set when a math function or INFINITY/NAN is printed: the source needs math.h
        self.names = NameTable(reserved=C_RESERVED)
        self.buffer_names: dict[Buffer, str] = {}
        self.bounds: dict[Var, tuple[int, int]] = {}
        # Flat indices printed in the innermost loop being printed, by buffer and the
        # structure of the indices: a register tile's rows read the same elements of the
        # inputs they share, and the simplification is most of the printing's time.
        # Emptied whenever a loop starts or ends (the loop bounds the simplifier uses change).
        self._printed_indices: dict[tuple, str] = {}
        self._index_keys = Analyzer()  # structural keys of the indices printed
        self.helpers: dict[str, str] = {}
        self.lines: list[str] = []
        self.depth = 1

    def _note_range(self, e: Expr) -> None:
        """Mark the function as needing 64-bit indices if ``e`` can leave the int32 range."""
        if self.wide or self.needs_wide:
            return
        r = interval(e, self.bounds)
        if r is not None and (r[0] < INT32_MIN or r[1] > INT32_MAX):
            self.needs_wide = True

    def _note_buffer(self, buf: Buffer) -> None:
        if buf.size > INT32_MAX:
            self.needs_wide = True

    # ------------------------------------------------------------ names and helpers

    def buffer_name(self, buf: Buffer) -> str:
        name = self.buffer_names.get(buf)
        if name is None:
            name = self.names(Var(buf.name))
            self.buffer_names[buf] = name
        return name

    def ctype(self, dtype: str) -> str:
        return self.dialect.types[dtype]

    def helper(self, name: str, code: str) -> str:
        self.helpers.setdefault(name, code)
        return name

    # ------------------------------------------------------------ expressions

    def expr(self, e: Expr) -> str:
        method = getattr(self, "_" + type(e).__name__, None)
        if method is None:
            raise NotImplementedError(f"no C code for {type(e).__name__} nodes")
        return method(e)

    def _Var(self, e: Var) -> str:
        return self.names(e)

    def _Const(self, e: Const) -> str:
        text = _literal(e, self.dialect.types)
        if "INFINITY" in text or "NAN" in text:
            self.uses_math = True
        return text

    def _wrap_narrow(self, text: str, dtype: str) -> str:
        if dtypes.is_int(dtype) and dtypes.bits(dtype) < 32:
            return f"(({self.ctype(dtype)})({text}))"
        return text

    def _nonnegative(self, e: Expr) -> bool:
        r = interval(e, self.bounds)
        return r is not None and r[0] >= 0

    def _Binary(self, e: Binary) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        if e.op in _INFIX:
            return self._wrap_narrow(f"({a} {_INFIX[e.op]} {b})", e.dtype)
        hdtype = "int64" if self.wide and e.dtype == dtypes.INDEX_DTYPE else e.dtype  # helpers' type
        t = self.ctype(hdtype)
        if e.op in ("floordiv", "floormod"):
            if self._nonnegative(e.a) and self._nonnegative(e.b):
                return self._wrap_narrow(f"({a} {'/' if e.op == 'floordiv' else '%'} {b})", e.dtype)
            name = f"at_{e.op}_{hdtype}"
            body = (
                f"{t} q = a / b; {t} r = a % b; if (r != 0 && ((r < 0) != (b < 0))) {{ q -= 1; r += b; }} "
                f"return {'q' if e.op == 'floordiv' else 'r'};"
            )
            self.helper(name, f"{self.dialect.helper_prefix} {t} {name}({t} a, {t} b) {{ {body} }}")
            return f"{name}({a}, {b})"
        if e.op in ("min", "max"):
            name = f"at_{e.op}_{hdtype}"
            cmp = "<" if e.op == "min" else ">"
            self.helper(name, f"{self.dialect.helper_prefix} {t} {name}({t} a, {t} b) {{ return a {cmp} b ? a : b; }}")
            return f"{name}({a}, {b})"
        if e.op == "pow":
            return self._math_call("pow", [a, b], e.dtype)
        raise NotImplementedError(f"binary op {e.op}")

    def _Compare(self, e: Compare) -> str:
        if e.a.dtype == dtypes.INDEX_DTYPE:  # a guard on an index: its operands must not overflow
            self._note_range(e.a)
            self._note_range(e.b)
        return f"({self.expr(e.a)} {_INFIX[e.op]} {self.expr(e.b)})"

    def _Logical(self, e: Logical) -> str:
        return f"({self.expr(e.a)} {_INFIX[e.op]} {self.expr(e.b)})"

    def _Not(self, e: Not) -> str:
        return f"(!{self.expr(e.a)})"

    def _Select(self, e: Select) -> str:
        return f"({self.expr(e.cond)} ? {self.expr(e.true_value)} : {self.expr(e.false_value)})"

    def _Cast(self, e: Cast) -> str:
        return f"(({self.ctype(e.dtype)})({self.expr(e.value)}))"

    def _math_call(self, func: str, args: list[str], dtype: str) -> str:
        self.uses_math = True
        base = {"pow": "powf"}.get(func) or _MATH_FLOAT32[func]
        if dtype == "float64":
            base = {"fabsf": "fabs"}.get(base, base[:-1])
            return f"{base}({', '.join(args)})"
        if dtype == "float16":
            inner = ", ".join(f"(float)({a})" for a in args)
            return f"(({self.ctype('float16')}){base}({inner}))"
        return f"{base}({', '.join(args)})"

    def _Call(self, e: Call) -> str:
        x = self.expr(e.args[0])
        one = _literal(Const(1.0, e.dtype), self.dialect.types)
        if e.func == "sigmoid":
            return f"({one} / ({one} + {self._math_call('exp', [f'-({x})'], e.dtype)}))"
        if e.func == "rsqrt":
            return f"({one} / {self._math_call('sqrt', [x], e.dtype)})"
        return self._math_call(e.func, [x], e.dtype)

    def flat_index(self, buf: Buffer, indices, write: bool = False) -> str:
        """The flat index of ``buf[indices]`` as the dialect prints accesses (``wrap_access``)."""
        return self.dialect.wrap_access(self, buf, self._flat_index(buf, indices), write)

    def _flat_index(self, buf: Buffer, indices) -> str:
        self._note_buffer(buf)
        if self.dialect.index_check is not None:
            return self._checked_flat_index(buf, indices)
        key = (buf, tuple(self._index_keys.structural_key(i) for i in indices))
        printed = self._printed_indices.get(key)
        if printed is None:
            flat = simplify(ir.flat_index(buf, indices), self.bounds)
            self._note_range(flat)
            printed = self._printed_indices[key] = self.expr(flat)
        return printed

    def _checked_flat_index(self, buf: Buffer, indices) -> str:
        """The flat index with every dimension's index checked against its extent."""
        terms = []
        stride = 1
        for dim in range(len(indices) - 1, -1, -1):
            idx = self.expr(simplify(indices[dim], self.bounds))
            check = f'{self.dialect.index_check}({idx}, {buf.shape[dim]}, "{self.buffer_name(buf)}", {dim})'
            if self.wide:
                check = f"(int64_t){check}"
            terms.append(check if stride == 1 else f"{check} * {stride}")
            stride *= buf.shape[dim]
        return " + ".join(reversed(terms)) or "0"

    def _BufferLoad(self, e: BufferLoad) -> str:
        return f"{self.buffer_name(e.buffer)}[{self.flat_index(e.buffer, e.indices)}]"

    # ------------------------------------------------------------ statements

    def emit(self, line: str) -> None:
        self.lines.append("  " * self.depth + line)

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, For):
            folded = ir.folded_reduction(s)
            if folded is not None and self._accumulated_for(s, *folded):
                return
            self._for(s)
        elif isinstance(s, ir.Seq):
            for x in s.stmts:
                self.stmt(x)
        elif isinstance(s, BufferStore):
            target = f"{self.buffer_name(s.buffer)}[{self.flat_index(s.buffer, s.indices, write=True)}]"
            self.emit(f"{target} = {self.expr(s.value)};")
        elif isinstance(s, Allocate):
            self._allocate(s)
        elif isinstance(s, IfThenElse):
            self.emit(f"if {self._cond(s.condition)} {{")
            self._indented(s.then_case)
            if s.else_case is not None:
                self.emit("} else {")
                self._indented(s.else_case)
            self.emit("}")
        elif isinstance(s, Barrier):
            self.emit(self.dialect.barrier())
        elif isinstance(s, _ScalarAssign):
            self.emit(f"{self.names(s.var)} = {self.expr(s.value)};")
        elif isinstance(s, PrintedStmt):
            s.print_c(self)
        else:
            raise NotImplementedError(f"no C code for {type(s).__name__}")

    def _cond(self, e: Expr) -> str:
        text = self.expr(e)
        return text if text.startswith("(") and text.endswith(")") else f"({text})"

    def _indented(self, s: Stmt) -> None:
        self.depth += 1
        self.stmt(s)
        self.depth -= 1

    def _for(self, loop: For) -> None:
        var = self.names(loop.var)
        extent = self.expr(loop.extent)
        r = interval(loop.extent, self.bounds)
        self._note_range(loop.extent)
        saved = self.bounds.get(loop.var)
        self._printed_indices = {}
        if r is not None:
            self.bounds[loop.var] = (0, r[1] - 1)
        else:
            self.bounds.pop(loop.var, None)
        header = self.dialect.loop_header(loop, var, extent, self.index_ctype)
        if header is not None:
            declaration, guard = header
            self.emit("{")
            self.emit(f"  {declaration}")
            if guard is None:
                self._indented(loop.body)
            else:
                self.emit(f"  if ({guard}) {{")
                self.depth += 1
                self._indented(loop.body)
                self.depth -= 1
                self.emit("  }")
            self.emit("}")
        else:
            for pragma in self.dialect.loop_pragmas(loop):
                self.emit(pragma)
            self.emit(f"for ({self.index_ctype} {var} = 0; {var} < {extent}; ++{var}) {{")
            self._indented(loop.body)
            self.emit("}")
        self._printed_indices = {}
        if saved is None:
            self.bounds.pop(loop.var, None)
        else:
            self.bounds[loop.var] = saved

    def _accumulated_for(self, loop: For, store: BufferStore, combine: Binary, other: Expr) -> bool:
        """Print a loop folding ``other`` into one element as a scalar accumulator loop the
        compiler may vectorize (False, printing nothing, when the dialect has no pragma)."""
        acc = Var(f"{store.buffer.name}_acc", store.buffer.dtype)
        pragma = self.dialect.reduction_pragma(combine.op, self.names(acc))
        if pragma is None:
            return False
        target = f"{self.buffer_name(store.buffer)}[{self.flat_index(store.buffer, store.indices, write=True)}]"
        self.emit("{")
        self.depth += 1
        self.emit(f"{self.ctype(store.buffer.dtype)} {self.names(acc)} = {target};")
        folded = For(loop.var, loop.extent, ir.SERIAL, _ScalarAssign(acc, Binary(combine.op, acc, other, combine.dtype)))
        self.emit(pragma)
        self._for(folded)
        self.emit(f"{target} = {self.names(acc)};")
        self.depth -= 1
        self.emit("}")
        return True

    def _allocate(self, s: Allocate) -> None:
        if s.buffer.in_registers:
            replacement = self.dialect.register_tile(s)
            if replacement is not None:
                self.stmt(replacement)
                return
        name = self.buffer_name(s.buffer)
        declare, release = self.dialect.allocate(self, s.buffer, name, self.ctype(s.buffer.dtype))
        self.emit("{")
        self.depth += 1
        for line in declare:
            self.emit(line)
        self.stmt(s.body)
        for line in release:
            self.emit(line)
        self.depth -= 1
        self.emit("}")

    # ------------------------------------------------------------ function

    def function(self, func: LoweredFunc, qualifiers: str = "") -> tuple[str, str]:
        """(helper definitions, function definition) of ``func``; printed a second time with
        64-bit indices when the first print finds int32 index arithmetic could overflow."""
        printed = self._function(func, qualifiers)
        if self.needs_wide and not self.wide:
            self._reset(wide=True)
            printed = self._function(func, qualifiers)
        return printed

    def _function(self, func: LoweredFunc, qualifiers: str) -> tuple[str, str]:
        name = self.names(Var(func.name))  # first, so a buffer of the same name cannot take it
        self.function_name = name
        params = [f"{self.ctype(b.dtype)}* {self.dialect.restrict} {self.buffer_name(b)}" for b in func.params]
        self.stmt(func.body)
        header = f"{qualifiers}void {name}({', '.join(params)}) {{"
        body = "\n".join([header] + self.lines + ["}"])
        helpers = "\n".join(self.helpers[k] for k in sorted(self.helpers))
        return helpers, body
