"""Per-kernel structural facts: the things a regex alone cannot see.

Each fact is a list of evidence offsets (into the original file); an empty list means the fact does
not hold. The declarative rules (``rules.yaml``) combine these facts with pattern facts; nothing here
decides a feature by itself.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from .cstructure import Guard, Loop, comparisons, find_guards, find_loops, stmt_end
from .scanner import Function, Source, split_top_level

Facts = dict[str, list[int]]

_IDENT = re.compile(r"[A-Za-z_]\w*")
_SUBSCRIPT = re.compile(r"([A-Za-z_]\w*)\s*((?:\[[^\[\]]*(?:\[[^\[\]]*\][^\[\]]*)*\]\s*)+)")
_FLOAT_LIT = re.compile(r"\b\d+\.\d*(?:[eE][-+]?\d+)?f?\b|\b\d+f\b|\.\d+f?\b|INFINITY|FLT_MAX|HUGE_VALF")
_ROLE_NAMES = {"s", "offset", "stride", "active", "num_warps", "nwarps", "warps", "n_warps", "warp_count",
               "half", "step", "d", "delta", "mask", "width"}
_CONV_NAMES = re.compile(
    r"\b(kh|kw|kd|kx|ky|ih|iw|in_h|in_w|h_in|w_in|oh|ow|od|out_h|out_w|h_out|w_out|pad|pad_h|pad_w|padding|"
    r"stride_h|stride_w|dilation\w*|kernel_size|KH|KW|KD|KS|kernel_h|kernel_w|ksize|K_h|K_w|out_height|out_width|"
    r"in_height|in_width|radius|RADIUS|halo|HALO|ky|kx|fy|fx|dy|dx)\b")
_CHANNEL = re.compile(r"\b(C|C_in|Cin|IC|CI|in_channels|in_ch|channels|c_in|cin|num_channels|ic|ci|c|ch|C_IN|CIN)\b")
_INDEX_SEED = re.compile(r"\b(threadIdx|blockIdx|blockDim|gridDim)\b")
_THREAD_ONLY_SEED = re.compile(r"\bthreadIdx\b")
_ELEM_TYPES = r"(?:const\s+)?(?:unsigned\s+)?(?:float|double|half|__half|__nv_bfloat16|nv_bfloat16|scalar_t|T|acc_t|int|long|int64_t|int32_t|float2|float4|int4|uint4|half2|__half2|double2|char|uint8_t|bool)"


@dataclass
class Piece:
    """A ';'-separated piece of a function body with its assignment split."""

    start: int
    text: str
    lhs: str
    op: str
    rhs: str


@dataclass
class FunctionContext:
    src: Source
    fn: Function
    view: str
    start: int
    end: int
    loops: list[Loop] = field(default_factory=list)
    guards: list[Guard] = field(default_factory=list)
    pieces: list[Piece] = field(default_factory=list)
    pointers: set[str] = field(default_factory=set)
    int_pointers: set[str] = field(default_factory=set)
    int_params: set[str] = field(default_factory=set)
    shared: set[str] = field(default_factory=set)
    local_arrays: set[str] = field(default_factory=set)
    float_vars: set[str] = field(default_factory=set)
    index_vars: set[str] = field(default_factory=set)
    thread_vars: set[str] = field(default_factory=set)
    loaded_vars: set[str] = field(default_factory=set)
    int_loaded_vars: set[str] = field(default_factory=set)
    extent_vars: set[str] = field(default_factory=set)
    tree_vars: set[str] = field(default_factory=set)
    constants: set[str] = field(default_factory=set)


_ASSIGN_OP = re.compile(r"(\+=|-=|\*=|/=|(?<![=!<>+\-*/%&|^])=(?![=]))")


def _pieces(view: str, start: int, end: int) -> list[Piece]:
    out = []
    pos = start
    for chunk in re.split(r"(;|\{|\})", view[start:end]):
        if chunk in (";", "{", "}"):
            pos += len(chunk)
            continue
        text = chunk
        depth = 0
        for i, ch in enumerate(chunk):
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth < 0:  # the rest of a for/if/while header: the statement starts after it
                    pos += i + 1
                    text = chunk[i + 1 :]
                    chunk = text
                    depth = 0
        base = pos + len(text) - len(text.lstrip())
        for sub_off, sub in _split_declarators(text):
            m = _ASSIGN_OP.search(sub)
            if m:
                lhs, op, rhs = sub[: m.start()], m.group(1), sub[m.end() :]
            else:
                lhs, op, rhs = "", "", sub
            if sub.strip():
                out.append(Piece(start=base + sub_off, text=sub, lhs=lhs, op=op, rhs=rhs))
        pos += len(chunk)
    return out


_DECL_HEAD = re.compile(r"^\s*((?:const\s+|unsigned\s+|static\s+)*(?:int|long|size_t|int64_t|int32_t|unsigned|float|double|auto|half|__half|scalar_t|bool|char|short)\b[\s*&]*)")


def _split_declarators(text: str) -> list[tuple[int, str]]:
    """``int a = x, b = y`` -> [(0, 'int a = x'), (k, 'int b = y')] (offsets relative to the stripped text)."""
    stripped = text.lstrip()
    head = _DECL_HEAD.match(stripped)
    if not head or "," not in stripped:
        return [(0, stripped)]
    parts: list[tuple[int, str]] = []
    depth, start = 0, 0
    for i, ch in enumerate(stripped):
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append((start, stripped[start:i]))
            start = i + 1
    parts.append((start, stripped[start:]))
    if len(parts) == 1:
        return parts
    out = [parts[0]]
    for off, part in parts[1:]:
        if not re.match(r"\s*\**\s*[A-Za-z_]\w*\s*(=|\[|$)", part):
            return [(0, stripped)]  # not a declarator list (a call, a template, ...)
        out.append((off, head.group(1) + " " + part.strip()))
    return out


@functools.lru_cache(maxsize=8192)
def _declared_name(lhs: str) -> str | None:
    lhs = lhs.strip()
    m = re.search(r"([A-Za-z_]\w*)\s*$", lhs)
    if not m:
        return None
    if "[" in lhs[m.start():] or lhs.endswith("]"):
        return None
    return m.group(1)


def _idents(text: str) -> set[str]:
    return set(_idents_cached(text))


@functools.lru_cache(maxsize=8192)
def _idents_cached(text: str) -> frozenset[str]:
    return frozenset(_IDENT.findall(re.sub(r"\.\s*[xyzw]\b", "", text)))


def clear_caches() -> None:
    """Forget memoised text analyses (benchmarks use it to time cold extractions)."""
    for fn in (_all_subscripts, _declared_name, _idents_cached):
        fn.cache_clear()


@functools.lru_cache(maxsize=8192)
def _all_subscripts(text: str) -> tuple[tuple[str, str, int], ...]:
    if "[" not in text:
        return ()
    return tuple((m.group(1), re.sub(r"\s+", "", m.group(2)), m.start()) for m in _SUBSCRIPT.finditer(text))


def _reads(ctx: FunctionContext | None, text: str, names: set[str]) -> list[tuple[str, str, int]]:
    """(array, subscript text, offset in text) for accesses of ``names`` in ``text``."""
    return [r for r in _all_subscripts(text) if r[0] in names]


def build_context(src: Source, fn: Function) -> FunctionContext:
    view = src.cuda
    ctx = FunctionContext(src=src, fn=fn, view=view, start=fn.body_start, end=fn.end)
    body = view[fn.body_start : fn.end]
    ctx.loops = find_loops(view, fn.body_start, fn.end)
    ctx.guards = find_guards(view, fn.body_start, fn.end)
    ctx.pieces = _pieces(view, fn.body_start, fn.end)
    for p in fn.params:
        if p.is_pointer:
            ctx.pointers.add(p.name)
            if re.search(r"\b(int|long|int64_t|int32_t|unsigned|uint8_t|bool|uint32_t|short|char|index_t)\b", p.type):
                ctx.int_pointers.add(p.name)
        elif p.is_int:
            ctx.int_params.add(p.name)
    ctx.constants = set(re.findall(r"#define\s+([A-Za-z_]\w*)", view)) | set(
        re.findall(r"\bconstexpr\s+\w+\s+([A-Za-z_]\w*)", view)) | set(
        re.findall(r"template\s*<[^>]*\bint\s+([A-Za-z_]\w*)", view))
    const_arrays = set(re.findall(r"__constant__\s+[\w\s]+?\s([A-Za-z_]\w*)\s*\[", view))
    ctx.shared = set()
    for decl in re.finditer(r"__shared__([^;]*);", body):
        text = re.sub(r"\[[^\]]*\]", "[]", decl.group(1))
        ctx.shared |= set(re.findall(r"([A-Za-z_]\w*)\s*\[\]", text))
        if re.search(r"TempStorage\b", text):  # cub scratch: a shared staging buffer of a block primitive
            ctx.shared |= set(re.findall(r"([A-Za-z_]\w*)\s*$", text.strip()))
    ctx.local_arrays = set()
    for m in re.finditer(r"(?<![\w.])" + _ELEM_TYPES + r"\s+([A-Za-z_]\w*\s*\[[^;]*);", body):
        if re.search(r"__shared__[^;]*$", body[: m.start()].rsplit(";", 1)[-1]):
            continue
        text = re.sub(r"\[[^\]]*\]", "[]", re.sub(r"=\s*\{[^}]*\}", "", m.group(1)))
        ctx.local_arrays |= set(re.findall(r"(?:^|,)\s*([A-Za-z_]\w*)\s*\[\]", text))
    ctx.local_arrays -= ctx.shared
    ctx.float_vars = set(re.findall(
        r"\b(?:const\s+)?(?:float|double|half|__half|__nv_bfloat16|scalar_t|acc_t|float2|float4)\s+([A-Za-z_]\w*)", body))
    ctx.pointers |= const_arrays
    # pointers derived from pointer params (row = x + offset) and shared aliases
    for p in ctx.pieces:
        name = _declared_name(p.lhs) if p.op == "=" else None
        if not name:
            continue
        ids = _idents(p.rhs)
        if re.search(r"\*\s*$", p.lhs.strip()[: -len(name)].strip()) or "*" in p.lhs.split(name)[0]:
            if ids & ctx.shared:
                ctx.shared.add(name)
            elif ids & ctx.pointers:
                ctx.pointers.add(name)
                if ids & ctx.int_pointers:
                    ctx.int_pointers.add(name)
    # index / thread / loaded / extent variables (two propagation passes)
    loop_vars = {lp.var for lp in ctx.loops if lp.var}
    ctx.tree_vars = {lp.var for lp in ctx.loops if lp.var and re.search(r">>=|/=|<<=|\*=\s*2|=\s*\w+\s*[/*]\s*2\b", lp.incr)}
    for _ in range(2):
        for p in ctx.pieces:
            name = _declared_name(p.lhs) if p.op == "=" else None
            if not name or name in ctx.pointers:
                continue
            ids = _idents(p.rhs)
            rhs = p.rhs
            if _INDEX_SEED.search(rhs) or ids & (ctx.index_vars | loop_vars):
                ctx.index_vars.add(name)
            if (_THREAD_ONLY_SEED.search(rhs) and not re.search(r"blockIdx|gridDim", rhs)
                    and not (ids & (ctx.index_vars - ctx.thread_vars))) or (ids and ids <= (ctx.thread_vars | ctx.constants | {"WARP_SIZE", "warpSize"}) and ids & ctx.thread_vars):
                ctx.thread_vars.add(name)
            arrays = {a for a, _, _ in _reads(ctx, rhs, ctx.pointers)} | ({"__ldg"} if "__ldg" in rhs else set())
            if arrays or ids & ctx.loaded_vars:
                ctx.loaded_vars.add(name)
            if arrays & ctx.int_pointers or (ids & ctx.int_loaded_vars and not (ids & ctx.float_vars)):
                ctx.int_loaded_vars.add(name)
            if not (_INDEX_SEED.search(rhs)) and ids and ids & ctx.int_params and not ids & ctx.index_vars:
                ctx.extent_vars.add(name)
    ctx.index_vars |= loop_vars
    ctx.index_vars -= ctx.extent_vars
    return ctx


def _innermost_loop(ctx: FunctionContext, pos: int) -> Loop | None:
    inner = None
    for lp in ctx.loops:
        if lp.contains(pos) and (inner is None or lp.body_start > inner.body_start):
            inner = lp
    return inner


def _enclosing_loops(ctx: FunctionContext, pos: int) -> list[Loop]:
    return sorted((lp for lp in ctx.loops if lp.contains(pos)), key=lambda lp: -lp.body_start)


def _is_tree_loop(lp: Loop) -> bool:
    return bool(re.search(r">>=|/=|<<=|\*=", lp.incr)) or bool(re.search(r"\w+\s*=\s*\w+\s*[/*]\s*2\b|>>\s*1", lp.incr))


def _terms(expr: str) -> list[str]:
    """Top-level additive terms of an expression."""
    out, cur, depth = [], "", 0
    for ch in expr:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch in "+-" and depth == 0 and cur.strip() and not re.search(r"(?:[*/(]|\b\d+\.?\d*[eE])\s*$", cur):
            out.append(cur)
            cur = ""
            continue
        cur += ch
    if cur.strip():
        out.append(cur)
    return [t.strip() for t in out]


def _factors(term: str) -> list[str]:
    return [f for f in split_top_level(term, "*") if f]


def _is_memory_operand(ctx: FunctionContext, factor: str) -> bool:
    names = ctx.pointers | ctx.shared | ctx.local_arrays
    if _reads(ctx, factor, names) or "__ldg" in factor:
        return True
    ids = _idents(factor)
    return bool(ids & ctx.loaded_vars) or bool(ids & _array_loaded_locals(ctx))


def _array_loaded_locals(ctx: FunctionContext) -> set[str]:
    """Scalar locals loaded from shared or register arrays (``float a = As[ty][k]``)."""
    out = set()
    for p in ctx.pieces:
        name = _declared_name(p.lhs) if p.op == "=" else None
        if name and _reads(ctx, p.rhs, ctx.shared | ctx.local_arrays):
            out.add(name)
    return out


def _norm(text: str) -> str:
    return re.sub(r"\s+|\(|\)", "", text)


def _mac_pieces(ctx: FunctionContext) -> list[tuple[Piece, list[str]]]:
    """Pieces that multiply two memory operands and accumulate."""
    out = []
    for p in ctx.pieces:
        factors_found: list[str] = []
        if p.op == "+=" or p.op == "-=":
            sources = [p.rhs]
        elif p.op == "=" and _declared_name(p.lhs) and re.search(r"\b" + re.escape(_declared_name(p.lhs) or "") + r"\b", p.rhs):
            sources = [p.rhs]
        else:
            sources = []
        fma = re.findall(r"\b(?:fmaf|fma|__fmaf_rn|__fmaf_rz|__fma_rn|__hfma|__hfma2|fmaf_rn)\s*\(([^;]*)\)", p.text)
        for args in fma:
            parts = _split_args(args)
            if len(parts) >= 2:
                factors_found = [parts[0], parts[1]]
                break
        if not factors_found:
            for rhs in sources:
                for term in _terms(rhs):
                    fs = _factors(term)
                    mem = [f for f in fs if _is_memory_operand(ctx, f)]
                    if len(mem) >= 2:
                        factors_found = mem[:2]
                        break
        if len(factors_found) >= 2:
            a, b = factors_found[0], factors_found[1]
            if not (_is_memory_operand(ctx, a) and _is_memory_operand(ctx, b)):
                continue
            if _norm(a) == _norm(b):
                continue  # a square (sum of squares), not a contraction
            lp = _innermost_loop(ctx, p.start)
            skip = {lp.var} if lp and lp.var else set()
            if _operand_ids(ctx, a, skip) == _operand_ids(ctx, b, skip):
                continue  # both operands walk the same coordinates: a dot-product reduction, not a contraction
            out.append((p, factors_found))
    return out


def _operand_ids(ctx: FunctionContext, factor: str, skip: set[str], depth: int = 0) -> frozenset[str]:
    """Coordinates an operand is indexed by: subscripts, and the offsets of derived pointers/loaded scalars."""
    ids: set[str] = set()
    for arr, sub, _ in _reads(ctx, factor, ctx.pointers | ctx.shared | ctx.local_arrays):
        ids |= _idents(re.sub(r"\b(threadIdx|blockIdx)\.([xyz])\b", r"\1_\2", sub))
        ids |= _pointer_offset_ids(ctx, arr)
    if depth < 2:
        for name in _idents(factor) & (ctx.loaded_vars | _array_loaded_locals(ctx)):
            for p in ctx.pieces:
                if p.op == "=" and _declared_name(p.lhs) == name:
                    ids |= _operand_ids(ctx, p.rhs, skip, depth + 1)
    noise = skip | ctx.int_params | ctx.constants | ctx.extent_vars | {"threadIdx", "blockIdx", "blockDim", "gridDim", "long", "int", "size_t"}
    return frozenset(ids - noise)


def _pointer_offset_ids(ctx: FunctionContext, name: str) -> set[str]:
    for p in ctx.pieces:
        if p.op == "=" and _declared_name(p.lhs) == name and "*" in p.lhs:
            return _idents(p.rhs) - {name}
    return set()


def _split_args(args: str) -> list[str]:
    return split_top_level(args, ",")


def _window_var(ctx: FunctionContext, text: str, var: str) -> bool:
    """``var`` is a standalone additive term next to another plain coordinate in a subscript."""
    v = re.escape(var)
    for _, sub, _ in _reads(ctx, text, ctx.pointers | ctx.shared):
        for part in re.findall(r"\[([^\[\]]*(?:\[[^\[\]]*\][^\[\]]*)*)\]", sub):
            terms = [t.lstrip("+-").strip() for t in _terms(part)]
            if var in terms and any(t != var and (t in ctx.index_vars or re.fullmatch(r"threadIdx\.[xyz]", t))
                                    for t in terms):
                return True
            if re.search(r"\([^()]*[+-]\s*" + v + r"\s*\)\s*\*|\(\s*" + v + r"\s*[+-][^()]*\)\s*\*", part):
                return True
    return False


def _window_vars(ctx: FunctionContext, loop_vars: set[str]) -> set[str]:
    """Variables like ``ih = oh * stride + kh - pad`` that add a loop variable to a coordinate."""
    out = set()
    for p in ctx.pieces:
        name = _declared_name(p.lhs) if p.op == "=" else None
        if not name:
            continue
        terms = [t.lstrip("+-").strip() for t in _terms(p.rhs)]
        ids = _idents(p.rhs)
        if any(t in loop_vars for t in terms) and len(terms) >= 2 and ids & (ctx.index_vars - loop_vars):
            out.add(name)
    return out


def cuda_facts(src: Source, fn: Function) -> Facts:
    ctx = build_context(src, fn)
    facts: Facts = {}
    view = ctx.view
    body = view[ctx.start : ctx.end]

    def add(name: str, pos: int) -> None:
        facts.setdefault(name, []).append(pos)

    # --- shared memory --------------------------------------------------------------------------
    for name in sorted(ctx.shared):
        uses = [m.start() for m in re.finditer(r"\b" + re.escape(name) + r"\b", body)]
        if len(uses) > 1:
            add("shared_array_used", ctx.start + uses[0])

    # --- global pointer reads, staged arrays and reuse ------------------------------------------
    tree_loops = [lp for lp in ctx.loops if _is_tree_loop(lp)]
    staged: dict[str, int] = {}
    for p in ctx.pieces:
        lhs_arrays = {a for a, _, _ in _reads(ctx, p.lhs, ctx.shared | ctx.local_arrays)}
        if not lhs_arrays and re.search(r"memcpy_async|cp_async|cp\.async|__pipeline_memcpy_async", p.text):
            lhs_arrays = {a for a in ctx.shared if re.search(r"\b" + a + r"\b", p.text)}
            src_global = True
        else:
            src_global = bool(_reads(ctx, p.rhs, ctx.pointers)) or "__ldg" in p.rhs
        from_shared = bool(_reads(ctx, p.rhs, ctx.shared))
        for a in lhs_arrays:
            if src_global or (a in ctx.local_arrays and from_shared):  # register fragments of a tile
                staged.setdefault(a, p.start)
    for arr, first in staged.items():
        read_sites = set()
        loop_reuse = False
        for p in ctx.pieces:
            if _reads(ctx, p.lhs, {arr}) and p.op in ("+=", "-=", "*=") :
                continue
            if _reads(ctx, p.lhs, {arr}) and _reads(ctx, p.rhs, {arr}):
                continue  # in-place tree step: communication, not reuse
            reads = _reads(ctx, p.rhs if p.op else p.text, {arr})
            if not reads or re.search(r"__shared__|" + _ELEM_TYPES + r"\s+" + re.escape(arr) + r"\s*\[", p.text):
                continue
            if p.op == "=" and _reads(ctx, p.lhs, ctx.pointers) and re.fullmatch(
                    r"\s*" + re.escape(arr) + r"\s*(?:\[[^\[\]]*\]\s*)+", p.rhs):
                continue  # a plain copy-out to global memory reorders, it does not reuse
            if any(lp.contains(p.start) for lp in tree_loops):
                continue
            for _, sub, _ in reads:
                read_sites.add((p.start, sub))
                lp = _innermost_loop(ctx, p.start)
                if lp and lp.var:
                    in_sub = re.search(r"\b" + re.escape(lp.var) + r"\b", sub)
                    accum = p.op in ("+=", "-=") or bool(re.search(r"\b(fmaf|fmaxf|fminf|max|min|fma)\s*\(", p.text))
                    if not in_sub and arr in ctx.shared and not _reads(ctx, p.lhs, ctx.pointers):
                        loop_reuse = True
                    if not in_sub and arr in ctx.local_arrays:
                        loop_reuse = True
                    if in_sub and accum and arr in ctx.shared:
                        loop_reuse = True
        if loop_reuse or len(read_sites) >= 2 and (arr in ctx.shared or len({s for s, _ in read_sites}) >= 2):
            add("shared_reuse" if arr in ctx.shared else "register_reuse", first)

    # --- multiply-accumulate loops ----------------------------------------------------------------
    loop_vars = {lp.var for lp in ctx.loops if lp.var}
    win_vars = _window_vars(ctx, loop_vars)
    conv_names = set(_CONV_NAMES.findall(body))
    conv_kernel = len(conv_names) >= 2
    macs = _mac_pieces(ctx)
    for p, factors in macs:
        lp = _innermost_loop(ctx, p.start)
        if lp is None:
            continue
        add("mac_loop", p.start)
        enclosing = _enclosing_loops(ctx, p.start)
        operand_text = " ".join(factors)
        windowed = any(lp2.var and _window_var(ctx, operand_text, lp2.var) for lp2 in enclosing) or bool(
            _idents(operand_text) & win_vars) or any(
            _idents(q.rhs) & win_vars for q in ctx.pieces if _declared_name(q.lhs) in _idents(operand_text))
        if conv_kernel or windowed:
            add("mac_loop_conv", p.start)
            enclosing_vars = {lp2.var for lp2 in enclosing if lp2.var}
            derived = set(enclosing_vars)
            for _ in range(3):  # variables decoded from the loop variables (implicit GEMM: c = k / (KH*KW))
                for v in list(derived):
                    derived |= _derived_from(ctx, v)
            if any(lp2.var and _CHANNEL.fullmatch(lp2.var) or _CHANNEL.search(lp2.cond) for lp2 in enclosing) or any(
                    _CHANNEL.fullmatch(v) for v in derived):
                add("conv_channel_contraction", p.start)
        else:
            add("mac_loop_gemm", p.start)
            globals_only = all(
                _reads(ctx, f, ctx.pointers) or "__ldg" in f or (_idents(f) & ctx.loaded_vars)
                for f in factors) and not any(_reads(ctx, f, ctx.shared | ctx.local_arrays) for f in factors)
            if globals_only and not ctx.shared:
                add("naive_gemm_loop", p.start)
    # window loops without a MAC (pooling, box filters) in a conv-like kernel
    for lp in ctx.loops:
        if lp.var and (conv_kernel or re.match(r"\s*-", lp.init.split("=", 1)[-1] if "=" in lp.init else "")):
            if _window_var(ctx, view[lp.body_start : lp.body_end], lp.var) or _idents(
                    view[lp.body_start : lp.body_end]) & win_vars:
                add("window_loop", lp.start)
    # neighbour offsets: the same array read at +c and -c (stencils)
    for arr in ctx.pointers | ctx.shared:
        signs: dict[tuple[str, str], set[str]] = {}
        for p in ctx.pieces:
            if _reads(ctx, p.lhs, {arr}) and p.op in ("+=", "-="):
                continue
            for _, sub, _off in _reads(ctx, p.rhs if p.op else p.text, {arr}):
                for base, sign, delta in re.findall(r"([A-Za-z_]\w*|\))\s*([+-])\s*(\d+|[A-Za-z_]\w*)(?!\s*[\*\[(])", sub):
                    if delta in ctx.tree_vars or delta in _ROLE_NAMES - {"width"}:
                        continue
                    signs.setdefault((base, delta), set()).add(sign)
                    if signs[(base, delta)] == {"+", "-"}:
                        add("neighbour_offsets", p.start)
    # --- loops ------------------------------------------------------------------------------------
    for lp in ctx.loops:
        if re.search(r"gridDim", lp.incr) or (re.search(r"\+=\s*([A-Za-z_]\w*)", lp.incr) and _grid_stride_var(
                ctx, re.search(r"\+=\s*([A-Za-z_]\w*)", lp.incr).group(1))):
            add("grid_stride_loop", lp.start)
    for p in ctx.pieces:
        lp = _innermost_loop(ctx, p.start)
        if lp is None or _is_tree_loop(lp):
            continue
        name = _declared_name(p.lhs)
        scalar = name is not None and "[" not in p.lhs
        if not scalar:
            continue
        if p.op in ("+=", "-=", "*=") and (_reads(ctx, p.rhs, ctx.pointers | ctx.shared) or _idents(p.rhs) & ctx.loaded_vars):
            add("accumulation_loop", p.start)
        elif p.op == "=" and re.search(r"\b(fmaxf|fminf|max|min|fmax|fmin)\s*\(\s*" + re.escape(name) + r"\b", p.rhs):
            add("accumulation_loop", p.start)
        elif p.op == "=" and re.search(r"\b" + re.escape(name) + r"\s*[+*]", p.rhs) and _reads(ctx, p.rhs, ctx.pointers):
            add("accumulation_loop", p.start)

    # --- guards -----------------------------------------------------------------------------------
    mac_starts = {p.start for p, _ in macs}
    for g in ctx.guards:
        if not _is_bounds_guard(ctx, g):
            continue
        add("bounds_guard", g.start)
        if _is_tail_overhead(ctx, g, mac_starts):
            add("tail_guard", g.start)
    _vector_component_guards(ctx, add)

    # --- irregular access -------------------------------------------------------------------------
    for p in ctx.pieces:
        for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\[[^\]]*\b([A-Za-z_]\w*)\s*\[", p.text):
            if m.group(1) in ctx.pointers and m.group(2) in ctx.pointers:
                add("index_gather", p.start + m.start())
        for _arr, sub, off in _reads(ctx, p.text, ctx.pointers):
            if _idents(sub) & ctx.int_loaded_vars:
                add("index_gather", p.start + off)
    for g in ctx.guards:
        if g.kind == "ternary":
            continue
        if _reads(ctx, g.cond, ctx.int_pointers) or (_idents(g.cond) & ctx.int_loaded_vars):
            add("data_branch", g.start)
    for m in re.finditer(r"\bswitch\s*\(", body):
        add("data_branch", ctx.start + m.start())
    # --- atomics by key (histograms, scatter-add) --------------------------------------------------
    for m in re.finditer(r"\batomic\w+\s*\(\s*(?:&\s*)?([A-Za-z_]\w*)\s*(\[[^;]*?\]|\+\s*[^,]+)", body):
        sub = m.group(2)
        ids = _idents(sub)
        if _reads(ctx, sub, ctx.pointers) or ids & ctx.loaded_vars or ids & ctx.int_loaded_vars:
            add("atomic_by_key", ctx.start + m.start())
    # --- transpose --------------------------------------------------------------------------------
    _transpose(ctx, add)
    # --- vector alignment -------------------------------------------------------------------------
    for m in re.finditer(r"reinterpret_cast\s*<\s*(?:const\s+)?(float4|float2|int4|int2|uint4|uint2|double2|half2|__half2)\s*\*\s*>\s*\(\s*([^;]*?)\)\s*[\[;)]|\(\s*(?:const\s+)?(float4|float2|int4|int2|uint4|uint2|double2|half2|__half2)\s*\*\s*\)\s*\(?\s*&?\s*([^;\]]*)", body):
        arg = m.group(2) or m.group(4) or ""
        lit = re.search(r"[+]\s*(\d+)\s*\)?\s*$|\[\s*(\d+)\s*\]", arg)
        if lit:
            n = int(lit.group(1) or lit.group(2))
            width = 4 if "4" in (m.group(1) or m.group(3) or "") else 2
            if n % width:
                add("misaligned_vector_cast", ctx.start + m.start())
    return facts


def _grid_stride_var(ctx: FunctionContext, name: str) -> bool:
    return any(_declared_name(p.lhs) == name and "gridDim" in p.rhs for p in ctx.pieces)


def _is_bounds_guard(ctx: FunctionContext, g: Guard) -> bool:
    for lhs, op, rhs in comparisons(g.cond):
        if op in ("==", "!="):
            continue
        for idx_side, ext_side in ((lhs, rhs), (rhs, lhs)):
            if _is_data(ctx, idx_side) or _is_data(ctx, ext_side):
                break
            idx_ids = _idents(idx_side)
            ext_ids = _idents(ext_side)
            if not (idx_ids & ctx.index_vars or _INDEX_SEED.search(idx_side)):
                continue
            if re.search(r"\b(threadIdx|blockIdx)\b", ext_side) or (ext_ids & ctx.index_vars and not ext_ids & (ctx.int_params | ctx.extent_vars)):
                continue
            if not ext_ids and not re.search(r"\d", ext_side):
                continue
            thread_only = (idx_ids <= (ctx.thread_vars | ctx.constants | {"threadIdx", "warpSize"})
                           and not re.search(r"blockIdx", idx_side)) or (
                idx_ids & ctx.tree_vars)
            role_bound = (not ext_ids) or bool(ext_ids & (ctx.tree_vars | _ROLE_NAMES | {"blockDim", "warpSize"})) or (
                ext_ids <= (ctx.constants | {"WARP_SIZE"}) and not ext_ids & ctx.int_params)
            if thread_only and role_bound:
                continue
            if re.fullmatch(r"\s*0\s*", ext_side):
                continue
            return True
    return False


def _is_data(ctx: FunctionContext, side: str) -> bool:
    if _FLOAT_LIT.search(side):
        return True
    ids = _idents(side)
    if ids & ctx.float_vars:
        return True
    float_ptrs = ctx.pointers - ctx.int_pointers
    return bool(_reads(ctx, side, float_ptrs | ctx.shared))


def _is_tail_overhead(ctx: FunctionContext, g: Guard, mac_starts: set[int]) -> bool:
    guarded = ctx.view[g.body_start : g.body_end]
    if g.kind == "ternary":
        stmt = next((p for p in ctx.pieces if p.start <= g.start < p.start + len(p.text)), None)
        if stmt and _reads(ctx, stmt.lhs, ctx.shared):
            return False
    if _reads(ctx, guarded.split("=", 1)[0] if "=" in guarded else "", ctx.shared):
        return False
    if re.search(r">=\s*0\b|\b0\s*<=|<\s*0\b|\b0\s*>", g.cond):
        return False  # a padding / border check of a window, not a per-element tail guard
    else_spans = _else_spans(ctx)
    for lp in _enclosing_loops(ctx, g.start):
        if any(lp.contains(s) for s in mac_starts):
            continue
        if any(a <= lp.start < b for a, b in else_spans):
            continue  # the loop is the separate tail branch of a vector/fast path
        if not lp.var or not re.search(r"\b" + re.escape(lp.var) + r"\b", g.cond) and not (
                _idents(g.cond) & _derived_from(ctx, lp.var)):
            continue
        bound = re.split(r"<=?", lp.cond)[-1] if "<" in lp.cond else ""
        bound_ids = _idents(bound)
        const_bound = bool(bound.strip()) and not (bound_ids & (ctx.int_params | ctx.extent_vars)) and (
            bool(re.fullmatch(r"\s*\d+\s*", bound)) or bool(bound_ids) and all(
                i in ctx.constants or re.fullmatch(r"[A-Z_][A-Z0-9_]+|k[A-Z]\w*", i) for i in bound_ids))
        if (lp.unroll or const_bound) and not re.search(r"blockDim|gridDim", lp.incr):
            if const_bound:
                return True
    return False


def _else_spans(ctx: FunctionContext) -> list[tuple[int, int]]:
    spans = []
    for m in re.finditer(r"\belse\b(?!\s+if\b)", ctx.view[ctx.start : ctx.end]):
        begin = ctx.start + m.end()
        spans.append((begin, stmt_end(ctx.view, begin, ctx.end)))
    return spans


def _derived_from(ctx: FunctionContext, var: str) -> set[str]:
    out = set()
    for p in ctx.pieces:
        name = _declared_name(p.lhs) if p.op == "=" else None
        if name and re.search(r"\b" + re.escape(var) + r"\b", p.rhs):
            out.add(name)
    return out


def _vector_component_guards(ctx: FunctionContext, add) -> None:
    deltas = {}
    for g in ctx.guards:
        m = re.search(r"\+\s*([123])\s*<", g.cond)
        if m and _is_bounds_guard(ctx, g):
            lp = _innermost_loop(ctx, g.start)
            deltas.setdefault(lp.start if lp else -1, {})[m.group(1)] = g.start
    for _, found in deltas.items():
        if len(found) >= 2:
            add("tail_guard", min(found.values()))


def _transpose(ctx: FunctionContext, add) -> None:
    for arr in ctx.shared:
        writes, reads = set(), set()
        for p in ctx.pieces:
            for _, sub, _ in _reads(ctx, p.lhs, {arr}):
                dims = re.findall(r"\[([^\[\]]*)\]", sub)
                if len(dims) == 2:
                    writes.add(tuple(_first_ident(d) for d in dims))
            for _, sub, _ in _reads(ctx, p.rhs, {arr}):
                dims = re.findall(r"\[([^\[\]]*)\]", sub)
                if len(dims) == 2:
                    reads.add(tuple(_first_ident(d) for d in dims))
        for w in writes:
            if w[0] != w[1] and (w[1], w[0]) in reads:
                add("transpose_pattern", ctx.start)
                return
    for p in ctx.pieces:
        if p.op != "=":
            continue
        lhs_reads = _reads(ctx, p.lhs, ctx.pointers)
        rhs = re.sub(r"\(\s*(float|double|scalar_t|half|T)\s*\)|__ldg\s*\(|&", "", p.rhs).strip()
        rhs_reads = _reads(ctx, rhs, ctx.pointers)
        if len(lhs_reads) != 1 or len(rhs_reads) != 1:
            continue
        if not re.fullmatch(r"[A-Za-z_]\w*\s*\[.*\]\s*\)?", rhs):
            continue
        e1, e2 = lhs_reads[0][1][1:-1], rhs_reads[0][1][1:-1]
        m1, a1 = _mul_add_sets(e1)
        m2, a2 = _mul_add_sets(e2)
        if (m1 & a2 & ctx.index_vars) and (a1 & m2 & ctx.index_vars):
            add("transpose_pattern", p.start)
            return


def _first_ident(text: str) -> str:
    m = re.search(r"[A-Za-z_]\w*(?:\.[xyz]\b)?", text)
    return m.group(0) if m else text


def _mul_add_sets(expr: str) -> tuple[set[str], set[str]]:
    mul, addv = set(), set()
    for term in _terms(expr):
        term = term.lstrip("+-").strip()
        fs = _factors(term)
        if len(fs) >= 2:
            for f in fs:
                mul |= _idents(f)
        elif re.fullmatch(r"[A-Za-z_]\w*", term):
            addv.add(term)
    return mul, addv


# ---------------------------------------------------------------------------------------- Triton
_TL_REDUCE = re.compile(r"\btl\.(sum|max|min|reduce|cumsum|cumprod|associative_scan|argmax|argmin|xor_sum)\s*\(")


def triton_facts(src: Source, fn: Function) -> Facts:
    view = src.python
    body = view[fn.body_start : fn.end]
    facts: Facts = {}

    def add(name: str, rel: int) -> None:
        facts.setdefault(name, []).append(fn.body_start + rel)

    loaded = set()
    for m in re.finditer(r"^\s*([A-Za-z_]\w*)\s*=\s*tl\.load\(", body, re.M):
        loaded.add(m.group(1))
    loops = [m for m in re.finditer(r"^(\s*)for\s+\w+\s+in\s+(?:tl\.)?(?:range|static_range)\(", body, re.M)]
    for m in re.finditer(r"\btl\.dot\s*\(", body):
        add("tl_dot", m.start())
        if any(_py_block_contains(body, lp, m.start()) for lp in loops):
            add("tl_dot_loop", m.start())
    for m in _TL_REDUCE.finditer(body):
        add("tl_reduce", m.start())
    for m in re.finditer(r"\btl\.atomic_\w+\s*\(", body):
        add("tl_atomic", m.start())
    for m in re.finditer(r"\bmask\s*=|tl\.where\s*\([^,]*<", body):
        add("tl_mask", m.start())
    for m in re.finditer(r"\bif\s+[^:\n]*(<|>=)[^:\n]*:", body):
        add("tl_mask", m.start())
    for m in re.finditer(r"\btl\.(?:load|store)\s*\(([^\n]*)", body):
        ids = set(_IDENT.findall(_split_args(m.group(1))[0]))
        if ids & loaded:
            add("tl_gather", m.start())
    for name in loaded:
        first = re.search(r"^\s*" + re.escape(name) + r"\s*=\s*tl\.load\(", body, re.M)
        if first and any(_py_block_contains(body, lp, first.start() + 1) for lp in loops):
            continue  # a chunk loaded inside a loop is streamed, not a row kept in registers
        uses = [u.start() for u in re.finditer(r"\b" + re.escape(name) + r"\b", body)]
        reduced = any(re.search(_TL_REDUCE.pattern[:-4] + r"\s*\([^\n]*\b" + re.escape(name) + r"\b", body[u - 20 : u + 1] + body[u:u+len(name)]) for u in uses)
        reduced = reduced or bool(re.search(r"\btl\.(sum|max|min)\s*\(\s*[^\n]*\b" + re.escape(name) + r"\b", body))
        use_lines = {body.count("\n", 0, u) for u in uses[1:]}
        if reduced and len(use_lines) >= 2:
            add("tl_row_reuse", uses[0])
    for lp in loops:
        seg = _py_block(body, lp)
        if re.search(r"\+=\s*[^\n]*\*", seg) and loaded and re.search(r"tl\.load", seg):
            add("tl_mac_loop", lp.start())
    if re.search(r"\btl\.trans\s*\(|\.T\b", body):
        add("tl_transpose", 0)
    return facts


def _py_block(body: str, loop_match: re.Match) -> str:
    indent = len(loop_match.group(1).replace("\n", ""))
    lines = body[loop_match.end() :].split("\n")
    out = [lines[0]]
    for line in lines[1:]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        out.append(line)
    return "\n".join(out)


def _py_block_contains(body: str, loop_match: re.Match, pos: int) -> bool:
    seg = _py_block(body, loop_match)
    return loop_match.end() <= pos < loop_match.end() + len(seg)
