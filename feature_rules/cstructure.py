"""Statement structure of a CUDA function body: loops and guards (if, ternary, early return).

Works on a masked view (comments and literals blanked), so every offset is an offset in the original
file. This is not a C++ parser: it finds the few shapes the feature rules reason about.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .scanner import match_close, split_top_level

_LOOP = re.compile(r"\b(for|while)\s*\(")
_IF = re.compile(r"\bif\s*\(")
_WS = re.compile(r"\s*")
_KEYWORD_STMT = re.compile(r"(for|while|if|switch)\s*\(")


def skip_ws(text: str, pos: int) -> int:
    return _WS.match(text, pos).end()


def stmt_end(text: str, pos: int, limit: int | None = None) -> int:
    """Offset just past the statement that starts at ``pos``."""
    limit = len(text) if limit is None else limit
    pos = skip_ws(text, pos)
    if pos >= limit:
        return limit
    if text[pos] == "{":
        return match_close(text, pos)
    m = _KEYWORD_STMT.match(text, pos)
    if m:
        close = match_close(text, m.end() - 1, "(", ")")
        end = stmt_end(text, close, limit)
        if m.group(1) == "if":
            nxt = skip_ws(text, end)
            if text.startswith("else", nxt) and not re.match(r"\w", text[nxt + 4 : nxt + 5] or " "):
                end = stmt_end(text, nxt + 4, limit)
        return end
    if text.startswith("do", pos) and not re.match(r"\w", text[pos + 2 : pos + 3] or " "):
        end = stmt_end(text, pos + 2, limit)
        semi = text.find(";", end)
        return semi + 1 if semi >= 0 else limit
    depth = 0
    for i in range(pos, limit):
        ch = text[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth < 0:
                return i
        elif ch == ";" and depth == 0:
            return i + 1
    return limit


@dataclass
class Loop:
    kind: str
    start: int
    header: str
    init: str
    cond: str
    incr: str
    var: str | None
    body_start: int
    body_end: int
    unroll: bool
    parents: list[int] = field(default_factory=list)  # indexes of enclosing loops

    def contains(self, pos: int) -> bool:
        return self.body_start <= pos < self.body_end


@dataclass
class Guard:
    kind: str  # if | ternary | return
    start: int
    cond: str
    body_start: int
    body_end: int


def _split_header(header: str) -> tuple[str, str, str]:
    parts = split_top_level(header, ";") + ["", ""]
    return parts[0], parts[1], parts[2]


def find_loops(text: str, start: int, end: int) -> list[Loop]:
    loops: list[Loop] = []
    for m in _LOOP.finditer(text, start, end):
        open_paren = m.end() - 1
        close = match_close(text, open_paren, "(", ")")
        header = text[open_paren + 1 : close - 1]
        after = skip_ws(text, close)
        if m.group(1) == "while" and after < len(text) and text[after] == ";":
            continue  # the tail of a do-while
        body_end = stmt_end(text, close, end)
        if m.group(1) == "for":
            init, cond, incr = _split_header(header)
        else:
            init, cond, incr = "", header.strip(), ""
        var_m = re.search(r"([A-Za-z_]\w*)\s*=", init) or re.match(r"\s*([A-Za-z_]\w*)", cond)
        line_start = text.rfind("\n", 0, m.start())
        prev_line_start = text.rfind("\n", 0, max(line_start, 0))
        unroll = "#pragma unroll" in text[max(prev_line_start, 0) : m.start()] and not re.search(
            r"#pragma\s+unroll\s+1\b", text[max(prev_line_start, 0) : m.start()])
        loops.append(Loop(kind=m.group(1), start=m.start(), header=header, init=init, cond=cond, incr=incr,
                          var=var_m.group(1) if var_m else None, body_start=close, body_end=body_end,
                          unroll=unroll))
    for i, loop in enumerate(loops):
        loop.parents = [j for j, other in enumerate(loops) if j != i and other.contains(loop.start)]
    return loops


def _cond_start(text: str, qpos: int, floor: int) -> int:
    """Where the condition of the ternary whose ``?`` is at ``qpos`` starts."""
    depth = 0
    i = qpos - 1
    while i > floor:
        ch = text[i]
        if ch in ")]":
            depth += 1
        elif ch in "([":
            if depth == 0:
                return i + 1
            depth -= 1
        elif depth == 0:
            if ch in ";,{}:?":
                return i + 1
            if ch == "=" and text[i - 1] not in "=<>!" and text[i + 1] != "=":
                return i + 1
            if text[i - 5 : i + 1] == "return" and not re.match(r"\w", text[i - 6]):
                return i + 1
        i -= 1
    return floor


def find_guards(text: str, start: int, end: int) -> list[Guard]:
    guards: list[Guard] = []
    for m in _IF.finditer(text, start, end):
        close = match_close(text, m.end() - 1, "(", ")")
        cond = text[m.end() : close - 1]
        body_end = stmt_end(text, close, end)
        body = text[close:body_end].strip().strip("{}").strip()
        kind = "return" if re.fullmatch(r"return\b[^;]*;", body) else "if"
        guards.append(Guard(kind=kind, start=m.start(), cond=cond, body_start=close, body_end=body_end))
    for m in re.finditer(r"\?", text[start:end]):
        q = start + m.start()
        begin = _cond_start(text, q, start)
        stop = stmt_end(text, q + 1, end)
        guards.append(Guard(kind="ternary", start=begin, cond=text[begin:q], body_start=q + 1,
                            body_end=min(stop, end)))
    return guards


_CMP = re.compile(r"(<=|>=|(?<![<>=!])<(?![<=])|(?<![<>=-])>(?![>=])|==|!=)")


def comparisons(cond: str) -> list[tuple[str, str, str]]:
    """Split a condition on && / || into (lhs, op, rhs) atoms; drops atoms without a comparison."""
    out = []
    for atom in re.split(r"&&|\|\|", cond):
        atom = atom.strip().strip("()! ")
        parts = _CMP.split(atom, maxsplit=1)
        if len(parts) == 3:
            out.append((parts[0].strip(" ()"), parts[1], parts[2].strip(" ()")))
    return out
