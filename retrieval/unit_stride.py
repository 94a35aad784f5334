"""``access_unit_stride``: whether a kernel's threadIdx.x-dependent global accesses use it with unit stride.

A small, deliberately partial reader of CUDA index arithmetic (the regexes and warp constants are data in
``op_hints.yaml``, section ``unit_stride``). Every scalar a kernel body assigns gets a class:

- ``U`` uniform: does not depend on threadIdx.x (block, grid and y/z indices, loop counters, sizes);
- ``L`` lane: threadIdx.x with coefficient +-1 plus uniform terms (``blockIdx.x * blockDim.x + threadIdx.x``);
- ``S`` strided: threadIdx.x multiplied by something (``tid * stride``, ``row * k`` with row from tid);
- ``X`` unknown: anything else that depends on threadIdx.x (a division, a value loaded through it, a call).

A global access is a subscript of a pointer parameter (or of a pointer the body derives from one by a cast
or an offset), and its class is the class of its subscript plus the alias's offset. The fact is False when
one access is S, True when at least one is L and none is S or X, and missing otherwise; a kernel that
cannot be followed (a template, a parameter pointer used in another way, a thread index the body does
not compute itself) makes every non-strided answer missing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kernelskill.feature_rules.scanner import Function, Source, match_close

U, L, S, X = "U", "L", "S", "X"
_TOKEN = re.compile(r"\s*(?:(\d[\w.]*)|(\w+(?:\s*(?:\.|->)\s*\w+)*)|(<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^<>!~?:()\[\],]))")
_PREC = {"||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6, "<": 7, ">": 7, "<=": 7, ">=": 7,
         "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10}


@dataclass
class Config:
    thread_x: re.Pattern[str]
    warp_divisors: set[str]
    warp_shifts: set[str]
    lane_masks: set[str]
    template_header: re.Pattern[str]
    element_type: re.Pattern[str]
    hidden_thread_index: re.Pattern[str]
    assignment: re.Pattern[str]
    pointer_decl: re.Pattern[str]
    pointer_cast: re.Pattern[str]
    cast_index: re.Pattern[str]
    scalar_cast: re.Pattern[str]

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Config:
        def rx(name: str) -> re.Pattern[str]:
            return re.compile(data[name], re.MULTILINE)

        def norm(values: list[Any]) -> set[str]:
            return {re.sub(r"\s+", "", str(v)) for v in values}

        return cls(thread_x=rx("thread_x"), warp_divisors=norm(data["warp_divisors"]),
                   warp_shifts=norm(data["warp_shifts"]), lane_masks=norm(data["lane_masks"]),
                   template_header=rx("template_header"), element_type=rx("element_type"), hidden_thread_index=rx("hidden_thread_index"),
                   assignment=rx("assignment"), pointer_decl=rx("pointer_decl"), pointer_cast=rx("pointer_cast"),
                   cast_index=rx("cast_index"), scalar_cast=rx("scalar_cast"))


class _Unknown(Exception):
    """The expression is not one this reader follows."""


@dataclass
class _Expr:
    """Class of an index expression; ``text`` is the literal it came from when it is a single token."""

    cls: str
    text: str = ""


def _add(a: str, b: str) -> str:
    if U in (a, b):
        return b if a == U else a
    return X  # two threadIdx.x terms may add to a stride of 2 or cancel: not followed


class _Parser:
    """Precedence climbing over C's binary operators; each node evaluates to a class."""

    def __init__(self, text: str, env: dict[str, str], cfg: Config) -> None:
        self.toks = _tokens(text)
        self.i = 0
        self.env = env
        self.cfg = cfg

    def parse(self) -> str:
        e = self.ternary()
        if self.i != len(self.toks):
            raise _Unknown
        return e.cls

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, want: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (want is not None and tok != want):
            raise _Unknown
        self.i += 1
        return tok

    def ternary(self) -> _Expr:
        cond = self.binary(1)
        if self.peek() != "?":
            return cond
        self.take("?")
        a = self.ternary()
        self.take(":")
        b = self.ternary()
        return _Expr(U if {cond.cls, a.cls, b.cls} == {U} else X)

    def binary(self, min_prec: int) -> _Expr:
        start = self.i
        left = self.unary()
        while (op := self.peek()) in _PREC and _PREC[op] >= min_prec:
            self.take()
            right = self.binary(_PREC[op] + 1)
            left = _Expr(self.combine(op, left, right), "".join(self.toks[start:self.i]))
        return left

    def combine(self, op: str, a: _Expr, b: _Expr) -> str:
        if a.cls == U and b.cls == U:
            return U
        if op == "+":
            return _add(a.cls, b.cls)
        if op == "-":
            return _add(a.cls, b.cls)  # n - 1 - idx runs backwards, still one element per lane
        if op == "*":
            if X in (a.cls, b.cls) or U not in (a.cls, b.cls):
                return X
            other = a if a.cls == U else b
            return (a.cls if a.cls != U else b.cls) if other.text == "1" else S
        if b.cls != U or a.cls == X:
            return X
        if op == "/":
            return U if b.text in self.cfg.warp_divisors else X
        if op == ">>":
            return U if b.text in self.cfg.warp_shifts else X
        if op == "%":
            return a.cls if a.cls == L else X
        if op == "&":
            return L if a.cls == L and b.text in self.cfg.lane_masks else X
        if op == "<<":
            return S
        return X

    def unary(self) -> _Expr:
        tok = self.peek()
        if tok in ("-", "+"):
            self.take()
            return _Expr(self.unary().cls)
        if tok in ("!", "~", "*", "&"):
            self.take()
            inner = self.unary()
            return _Expr(U if inner.cls == U else X)
        return self.postfix()

    def postfix(self) -> _Expr:
        tok = self.take()
        if tok == "(":
            inner = self.ternary()
            self.take(")")
            e = _Expr(inner.cls, inner.text)
        elif tok[0].isdigit():
            e = _Expr(U, tok.rstrip("uUlLfF") or tok)
        elif re.match(r"\w", tok):
            name = re.sub(r"\s+", "", tok)
            if self.cfg.thread_x.fullmatch(name):
                e = _Expr(L, name)
            else:
                e = _Expr(self.env.get(name, U), name)
        else:
            raise _Unknown
        while self.peek() in ("(", "["):
            close = ")" if self.take() == "(" else "]"
            classes = [e.cls]
            if self.peek() != close:
                classes.append(self.ternary().cls)
                while self.peek() == ",":
                    self.take()
                    classes.append(self.ternary().cls)
            self.take(close)
            # a call or a load through a threadIdx.x-dependent argument is data, not an index formula
            e = _Expr(U if set(classes) == {U} else X)
        return e


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise _Unknown
        out.append(m.group(1) or m.group(2) or m.group(3))
        pos = m.end()
    return out


def classify(expr: str, env: dict[str, str], cfg: Config) -> str:
    """The class (U, L, S, X) of a C index expression under the variable classes ``env``."""
    text = cfg.scalar_cast.sub(" ", expr)
    if not cfg.thread_x.search(text) and not any(re.search(rf"\b{re.escape(v)}\b", text)
                                                 for v, c in env.items() if c != U):
        return U
    try:
        return _Parser(text, env, cfg).parse()
    except (_Unknown, RecursionError):
        return X


def _expression_end(text: str, pos: int) -> int:
    """End of the expression that starts at ``pos``: the first ``;`` or ``,`` at depth 0, or an unmatched
    closing bracket (the end of a for header)."""
    depth = 0
    for i in range(pos, len(text)):
        ch = text[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                return i
            depth -= 1
        elif ch in ";," and depth == 0:
            return i
    return len(text)


@dataclass
class Access:
    cls: str
    offset: int  # in the kernel body
    array: str


@dataclass
class KernelResult:
    kernel: str
    accesses: list[Access] = field(default_factory=list)
    unknown: str = ""  # why the kernel cannot be followed ('' when it can)


def analyse_kernel(fn: Function, src: Source, cfg: Config) -> KernelResult:
    res = KernelResult(kernel=fn.name)
    body = fn.body(src.cuda)
    if cfg.template_header.search(src.cuda[max(0, fn.start - 400):fn.body_start]):
        res.unknown = "a template kernel"
        return res
    if cfg.hidden_thread_index.search(body):
        res.unknown = "a thread index the body does not compute itself"
        return res
    params = [p.name for p in fn.params if p.is_pointer]
    for p in fn.params:
        element = re.sub(r"\b(?:const|volatile|__restrict__|__restrict)\b|\*", " ", p.type)
        if p.is_pointer and not cfg.element_type.match(" ".join(element.split())):
            res.unknown = f"parameter {p.name} points to {' '.join(element.split())} (not a scalar or vector type)"
            return res
    # pointer aliases of the parameters: name -> the expression of its offset ('' for none)
    aliases: dict[str, list[str]] = {p: [""] for p in params}
    alias_spans: list[tuple[int, int]] = []
    for m in cfg.pointer_decl.finditer(body):
        end = _expression_end(body, m.end())
        rhs = body[m.end():end].strip()
        base, offset = _pointer_base(rhs, cfg)
        if base in aliases:
            aliases.setdefault(m.group(1), []).extend(f"({o}) + ({offset})" if o else offset
                                                      for o in aliases[base])
            alias_spans.append((m.start(), end))
        elif any(re.search(rf"\b{re.escape(p)}\b", rhs) for p in aliases):
            res.unknown = f"pointer arithmetic not followed: {' '.join(rhs.split())[:60]}"
            return res
    env: dict[str, str] = {}
    assigns = [(m.group(1), m.group(2), body[m.end():_expression_end(body, m.end())])
               for m in cfg.assignment.finditer(body)]
    for name, op, rhs in assigns:  # a pointer bumped by an offset (p += stride) moves its accesses
        if name in aliases and op in ("+=", "-="):
            aliases[name] = [f"({o}) + ({rhs})" if o else rhs for o in aliases[name]]
    for _ in range(8):  # to a fixed point: a variable's class is the worst of its threadIdx.x-dependent values
        before = dict(env)
        for name, op, rhs in assigns:
            if name in aliases:
                continue
            cls = classify(rhs, env, cfg)
            if op in ("+=", "-="):
                cls = _add(env.get(name, U), cls)
            elif op == "*=" and env.get(name, U) != U:
                cls = X if cls != U else S
            elif op != "=" and (env.get(name, U) != U or cls != U):
                cls = X
            if cls != U:
                env[name] = _worst(env.get(name, U), cls)
        if env == before:
            break
    spans: list[tuple[int, int]] = list(alias_spans)
    for m in cfg.cast_index.finditer(body):
        base = m.group(1) or m.group(2)
        if base not in aliases:
            continue
        close = match_close(body, m.end() - 1, "[", "]")
        _record(res, body[m.end():close - 1], aliases[base], m.start(), base, env, cfg)
        spans.append((m.start(), close))
    for name in aliases:
        for m in re.finditer(rf"(?<![\w.>])({re.escape(name)})\b", body):
            if any(a <= m.start() < b for a, b in spans):
                continue
            rest = body[m.end():]
            if rest.lstrip().startswith("["):
                open_at = m.end() + (len(rest) - len(rest.lstrip()))
                close = match_close(body, open_at, "[", "]")
                if body[close:].lstrip().startswith("["):
                    res.unknown = f"a multi-dimensional subscript of {name}"
                    return res
                _record(res, body[open_at + 1:close - 1], aliases[name], m.start(), name, env, cfg)
            elif re.match(r"\s*(?:[!=]=|\?|\+=|-=)", rest):
                continue  # a null test, or a pointer bump (read above)
            else:
                res.unknown = f"{name} used other than by a subscript"
                return res
    return res


def _pointer_base(rhs: str, cfg: Config) -> tuple[str, str]:
    """``reinterpret_cast<const float4*>(x + off)`` -> ("x", "off"); ("", "") when not of that shape."""
    text = rhs
    while True:
        stripped = cfg.pointer_cast.sub("", text, count=1).strip()
        if stripped == text:
            break
        text = stripped
    while text.startswith("(") and match_close(text, 0, "(", ")") == len(text):
        text = text[1:-1].strip()
    m = re.fullmatch(r"&\s*(\w+)\s*\[(.*)\]", text, re.S)
    if m and match_close(text, text.index("["), "[", "]") == len(text):
        return m.group(1), m.group(2)
    m = re.fullmatch(r"(\w+)\s*(?:\+\s*(.+))?", text, re.S)
    if m:
        return m.group(1), m.group(2) or ""
    return "", ""


def _record(res: KernelResult, subscript: str, offsets: list[str], at: int, name: str, env: dict[str, str],
            cfg: Config) -> None:
    for off in offsets:
        expr = f"({off}) + ({subscript})" if off else subscript
        res.accesses.append(Access(cls=classify(expr, env, cfg), offset=at, array=name))


def _worst(a: str, b: str) -> str:
    order = {U: 0, L: 1, X: 2, S: 3}
    return a if order[a] >= order[b] else b


def unit_stride(src: Source, cfg: Config) -> tuple[bool | None, str]:
    """The fact over every ``__global__`` kernel of ``src``, with its evidence."""
    kernels = [fn for fn in src.kernels if fn.kind == "global"]
    if not kernels:
        return None, "no __global__ kernel"
    for fn in src.device_functions:
        if cfg.thread_x.search(fn.body(src.cuda)):
            return None, f"line {src.line_of(fn.start)}: device function {fn.name} reads threadIdx.x (not followed)"
    results = [analyse_kernel(fn, src, cfg) for fn in kernels]

    def where(fn_name: str, acc: Access) -> str:
        fn = next(f for f in kernels if f.name == fn_name)
        line = src.line_of(fn.body_start + acc.offset)
        return f"line {line} ({fn_name}): {' '.join(src.line_text(line).split())[:160]}"

    for r in results:
        r.accesses.sort(key=lambda a: a.offset)
    for r in results:
        for acc in r.accesses:
            if acc.cls == S:
                return False, f"{where(r.kernel, acc)} [strided: {acc.array}]"
    for r in results:
        if r.unknown:
            return None, f"{r.kernel}: {r.unknown}"
        for acc in r.accesses:
            if acc.cls == X:
                return None, f"{where(r.kernel, acc)} [index not followed: {acc.array}]"
    lanes = [(r.kernel, acc) for r in results for acc in r.accesses if acc.cls == L]
    if not lanes:
        return None, "no global access depends on threadIdx.x"
    kernel, acc = lanes[0]
    return True, f"{where(kernel, acc)} [unit stride: {len(lanes)} threadIdx.x-dependent access(es)]"
