"""Readable, deterministic text of the loop IR.

Variables get their names at print time (``i``, ``i_1``, ...) so that two variables
that share a name never print alike and the text is the same in every process.
"""
from __future__ import annotations

from te.expr import Var
from te.printer import expr_to_str

from .ir import Allocate, Barrier, BufferStore, For, IfThenElse, LoweredFunc, Seq, Stmt


class NameTable:
    """Hands out unique, identifier-safe names for Var objects in order of first use."""

    def __init__(self, reserved=()):
        self._names: dict[Var, str] = {}
        self._used: set[str] = set(reserved)

    def __call__(self, v: Var) -> str:
        name = self._names.get(v)
        if name is None:
            base = "".join(c if c.isalnum() or c == "_" else "_" for c in v.name) or "v"
            if base[0].isdigit():
                base = "v" + base
            name, n = base, 1
            while name in self._used:
                name = f"{base}_{n}"
                n += 1
            self._used.add(name)
            self._names[v] = name
        return name


def _lines(s: Stmt, names: NameTable, depth: int, out: list[str]) -> None:
    pad = "  " * depth
    e = lambda x: expr_to_str(x, names)  # noqa: E731
    if isinstance(s, For):
        tag = f" {s.thread_tag}" if s.thread_tag else ""
        kind = "" if s.kind == "serial" else f" ({s.kind}{tag})"
        out.append(f"{pad}for {names(s.var)} in range({e(s.extent)}){kind}:")
        _lines(s.body, names, depth + 1, out)
    elif isinstance(s, Seq):
        for x in s.stmts:
            _lines(x, names, depth, out)
    elif isinstance(s, BufferStore):
        idx = ", ".join(e(i) for i in s.indices)
        out.append(f"{pad}{s.buffer.name}[{idx}] = {e(s.value)}")
    elif isinstance(s, Allocate):
        b = s.buffer
        out.append(f"{pad}allocate {b.name}[{', '.join(map(str, b.shape))}] {b.dtype} in {b.scope}")
        _lines(s.body, names, depth, out)
    elif isinstance(s, IfThenElse):
        out.append(f"{pad}if {e(s.condition)}:")
        _lines(s.then_case, names, depth + 1, out)
        if s.else_case is not None:
            out.append(f"{pad}else:")
            _lines(s.else_case, names, depth + 1, out)
    elif isinstance(s, Barrier):
        out.append(f"{pad}barrier({s.scope})")
    else:
        out.append(f"{pad}<{type(s).__name__}>")


def stmt_to_str(s: Stmt, names: NameTable | None = None) -> str:
    out: list[str] = []
    _lines(s, names or NameTable(), 0, out)
    return "\n".join(out)


def func_to_str(f: LoweredFunc) -> str:
    params = ", ".join(f"{b.name}: {b.dtype}[{', '.join(map(str, b.shape))}]" for b in f.params)
    return f"def {f.name}({params}):\n" + stmt_to_str(f.body, NameTable()).replace("\n", "\n  ").join(["  ", ""])
