"""Find the code in a kernel source and split it into kernels and host functions.

Every view built here has exactly the length of the original file: whatever is not code of the
kind in question is replaced by spaces (newlines are kept), so an offset in a view is an offset in
the original file and line numbers map back without a table.

- Python files: string literals that hold CUDA C++ (load_inline sources, raw or plain, triple-quoted
  or not) are copied into the CUDA view; ``@triton.jit`` functions become Triton kernels; the class
  with ``forward`` (``ModelNew`` first) is kept as an ``ast`` tree for the forward analysis.
- ``.cu``/``.cuh``/C++ files: the whole file is CUDA.
- Inside CUDA, comments and string/char literals are blanked so they never trigger a rule; the
  contents of ``asm(...)`` statements are kept apart in an asm view.
"""

from __future__ import annotations

import ast
import bisect
import io
import logging
import re
import tokenize
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

_CUDA_MARKERS = re.compile(
    r"__global__|__device__|<<<|#include|torch::|at::Tensor|blockIdx|threadIdx|cudaStream|__shared__"
)
_C_NOISE = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)
_ASM_START = re.compile(r"\basm\s*(?:volatile\s*|__volatile__\s*)?\(")
_TRIPLE = re.compile(r"[rRbBuUfF]{0,2}(\"\"\"|''')(.*?)\1", re.S)
_C_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp")


def _blank(text: str) -> str:
    """Spaces for every character but newlines."""
    return re.sub(r"[^\n]", " ", text)


def match_close(text: str, pos: int, open_ch: str = "{", close_ch: str = "}") -> int:
    """Index just past the bracket that closes the one at ``pos`` (or len(text))."""
    depth = 0
    for i in range(pos, len(text)):
        ch = text[i]
        if ch == open_ch:
            depth += 1
        elif ch == close_ch:
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


@dataclass
class Param:
    type: str
    name: str

    @property
    def is_pointer(self) -> bool:
        return "*" in self.type or "[" in self.type or "PackedTensorAccessor" in self.type

    @property
    def is_int(self) -> bool:
        return not self.is_pointer and bool(
            re.search(r"\b(int|long|size_t|int64_t|int32_t|unsigned|uint32_t|uint64_t|short)\b", self.type)
        )


@dataclass
class Function:
    """A C++ function (kernel, device helper or host function) or a Triton kernel."""

    name: str
    kind: str  # global | device | host | triton
    start: int  # offset of the header in the original file
    body_start: int  # offset of the opening brace (Triton: first body line)
    end: int  # offset past the closing brace
    params: list[Param] = field(default_factory=list)
    header: str = ""

    def body(self, view: str) -> str:
        return view[self.body_start : self.end]


@dataclass
class Source:
    """The scanned file: original text plus same-length views."""

    text: str
    path: str | None
    language: str  # python | cuda
    cuda: str  # CUDA code (comments and literals blanked)
    asm: str  # only the inside of asm(...) statements
    python: str  # Python code with comments and strings blanked ('' for C files)
    functions: list[Function] = field(default_factory=list)
    py_tree: ast.Module | None = None
    py_error: str | None = None
    _line_starts: list[int] = field(default_factory=list)

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self._line_starts, offset)

    def line_text(self, line: int) -> str:
        start = self._line_starts[line - 1]
        end = self.text.find("\n", start)
        return self.text[start : end if end >= 0 else len(self.text)].strip()

    @property
    def kernels(self) -> list[Function]:
        return [f for f in self.functions if f.kind in ("global", "triton")]

    @property
    def device_functions(self) -> list[Function]:
        return [f for f in self.functions if f.kind == "device"]

    @property
    def host_functions(self) -> list[Function]:
        return [f for f in self.functions if f.kind == "host"]


def _line_starts(text: str) -> list[int]:
    starts = [0]
    starts.extend(m.end() for m in re.finditer("\n", text))
    return starts


def _offsets(text: str) -> list[int]:
    return _line_starts(text)


def _string_spans_python(text: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]], str | None]:
    """(content spans of string tokens, spans of comments, error) in a Python file."""
    starts = _offsets(text)
    strings: list[tuple[int, int]] = []
    comments: list[tuple[int, int]] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type not in (tokenize.STRING, tokenize.COMMENT):
                continue
            begin = starts[tok.start[0] - 1] + tok.start[1]
            end = starts[tok.end[0] - 1] + tok.end[1]
            if tok.type == tokenize.COMMENT:
                comments.append((begin, end))
                continue
            raw = tok.string
            prefix = len(raw) - len(raw.lstrip("rRbBuUfF"))
            quote = 3 if raw[prefix : prefix + 3] in ('"""', "'''") else 1
            strings.append((begin + prefix + quote, end - quote))
    except (tokenize.TokenError, IndentationError, SyntaxError) as exc:
        return [(m.start(2), m.end(2)) for m in _TRIPLE.finditer(text)], [], str(exc)
    return strings, comments, None


def mask_c(code: str) -> tuple[str, str]:
    """Blank comments and literals of a CUDA view; return (code view, asm view)."""
    masked = _C_NOISE.sub(lambda m: m.group(0)[0] + _blank(m.group(0)[1:-1]) + m.group(0)[-1]
                          if m.group(0)[0] in "\"'" else _blank(m.group(0)), code)
    asm = [" "] * len(code)
    for m in _ASM_START.finditer(masked):
        close = match_close(masked, m.end() - 1, "(", ")")
        asm[m.start() : close] = code[m.start() : close]
    asm_view = "".join(asm)
    return masked, _keep_newlines(asm_view, code)


def _keep_newlines(view: str, original: str) -> str:
    return "".join("\n" if o == "\n" else v for v, o in zip(view, original, strict=True))


_BUILDERS = re.compile(r"(?:^|\.)(load_inline|load|compile|RawKernel|RawModule|SourceModule|Program|build)$")


def _source_string_lines(tree: ast.Module | None) -> set[int] | None:
    """Lines of the string literals handed to load_inline & co. (None: no such call found)."""
    if tree is None:
        return None
    assigned: dict[str, list[ast.AST]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    assigned.setdefault(t.id, []).append(node.value)
    found: set[int] = set()
    calls = 0
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not _BUILDERS.search(ast.unparse(node.func)):
            continue
        calls += 1
        todo: list[ast.AST] = list(node.args) + [k.value for k in node.keywords]
        seen: set[str] = set()
        while todo:
            item = todo.pop()
            for sub in ast.walk(item):
                if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                    found.update(range(sub.lineno, (sub.end_lineno or sub.lineno) + 1))
                elif isinstance(sub, ast.Name) and sub.id in assigned and sub.id not in seen:
                    seen.add(sub.id)
                    todo.extend(assigned[sub.id])
    return found if calls and found else None


def _python_views(text: str, tree: ast.Module | None = None) -> tuple[str, str, str | None]:
    """(CUDA view, Python view) of a Python file."""
    strings, comments, error = _string_spans_python(text)
    wanted = _source_string_lines(tree)
    starts = _line_starts(text)
    cuda = list(_blank(text))
    python = list(text)
    for begin, end in strings:
        content = text[begin:end]
        python[begin:end] = _blank(content)
        line = bisect.bisect_right(starts, begin)
        if (wanted is None or line in wanted) and _CUDA_MARKERS.search(content):
            cuda[begin:end] = content
    for begin, end in comments:
        python[begin:end] = _blank(text[begin:end])
    return "".join(cuda), "".join(python), error


# ---------------------------------------------------------------------------------------- C++ blocks
_PP_LINE = re.compile(r"^[ \t]*#.*$", re.M)
_IDENT_BEFORE = re.compile(r"([A-Za-z_]\w*)\s*$")


def split_top_level(text: str, sep: str, opens: str = "([", closes: str = ")]") -> list[str]:
    """``text`` split at every ``sep`` outside brackets, each piece stripped (empty pieces kept)."""
    parts: list[str] = []
    depth = 0
    cur = ""
    for ch in text:
        if ch in opens:
            depth += 1
        elif ch in closes:
            depth -= 1
        if ch == sep and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [part.strip() for part in parts]


def _split_params(text: str) -> list[Param]:
    params = split_top_level(text, ",", "(<[", ")>]")
    if params and not params[-1]:
        params.pop()
    out = []
    for p in params:
        p = p.split("=")[0].strip()
        m = re.search(r"([A-Za-z_]\w*)\s*(\[[^\]]*\])?\s*$", p)
        if not m or p in ("void",):
            continue
        out.append(Param(type=p[: m.start()].strip() + (m.group(2) or ""), name=m.group(1)))
    return out


def _classify_header(header: str) -> tuple[str, str, list[Param]] | None:
    """(kind, name, params) when ``header`` introduces a function body."""
    h = _PP_LINE.sub("", header).strip()
    if not h or not re.search(r"\)\s*(const|noexcept|override)?\s*$", h):
        return None
    if re.match(r"^(struct|class|union|enum|namespace)\b", h) or "namespace" in h.split("(")[0]:
        return None
    close = h.rfind(")")
    depth = 0
    open_pos = -1
    for i in range(close, -1, -1):
        if h[i] == ")":
            depth += 1
        elif h[i] == "(":
            depth -= 1
            if depth == 0:
                open_pos = i
                break
    if open_pos < 0:
        return None
    m = _IDENT_BEFORE.search(h[:open_pos])
    if not m or m.group(1) in ("if", "for", "while", "switch", "return", "sizeof", "catch"):
        return None
    name = m.group(1)
    if name == "__launch_bounds__" or re.fullmatch(r"PYBIND11_MODULE|TORCH_LIBRARY\w*|TORCH_EXTENSION_NAME", name):
        return None
    pre = h[: m.start()]
    if "__launch_bounds__" in h[open_pos:close]:
        return None
    kind = "global" if "__global__" in pre else "device" if "__device__" in pre else "host"
    return kind, name, _split_params(h[open_pos + 1 : close])


def _scan_blocks(view: str, start: int, end: int, out: list[Function]) -> None:
    i = start
    header_start = start
    while i < end:
        ch = view[i]
        if ch in ";}":
            header_start = i + 1
        elif ch == "{":
            close = match_close(view, i)
            header = view[header_start:i]
            bare = _PP_LINE.sub("", header).strip()
            if re.match(r"^(namespace\b[\w:\s]*|extern\s*\"[\s\w+]*\")$", bare):
                _scan_blocks(view, i + 1, close - 1, out)
            else:
                found = _classify_header(header)
                if found:
                    kind, name, params = found
                    lead = len(header) - len(header.lstrip())
                    out.append(Function(name=name, kind=kind, start=header_start + lead, body_start=i,
                                        end=close, params=params, header=bare))
            i = close
            header_start = close
            continue
        i += 1


# ---------------------------------------------------------------------------------------- Triton
def _triton_functions(tree: ast.Module, text: str) -> list[Function]:
    starts = _offsets(text)
    found: list[Function] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        decos = [ast.unparse(d) for d in node.decorator_list]
        if not any(re.search(r"\bjit\b", d) for d in decos):
            continue
        first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
        begin = starts[first - 1]
        body_line = node.body[0].lineno
        end_line = node.end_lineno or node.lineno
        end = starts[end_line] if end_line < len(starts) else len(text)
        params = [Param(type="tl.constexpr" if a.annotation is not None else "", name=a.arg)
                  for a in node.args.args]
        found.append(Function(name=node.name, kind="triton", start=begin,
                              body_start=starts[body_line - 1], end=end, params=params))
    return found


def scan(text: str, path: str | None = None) -> Source:
    """Scan ``text`` (a Python, ``.cu`` or C++ file) into views, functions and a Python tree."""
    language = "cuda" if path and path.lower().endswith(_C_SUFFIXES) else "python"
    tree: ast.Module | None = None
    py_error: str | None = None
    if language == "python":
        try:
            tree = ast.parse(text)
        except SyntaxError as exc:
            py_error = f"line {exc.lineno}: {exc.msg}"
            if path is None and _CUDA_MARKERS.search(text) and not re.search(r"^\s*(import|from)\s", text, re.M):
                language = "cuda"
    if language == "python":
        raw_cuda, python, tok_error = _python_views(text, tree)
        py_error = py_error or tok_error
    else:
        raw_cuda, python = text, ""
    cuda, asm = mask_c(raw_cuda)
    src = Source(text=text, path=path, language=language, cuda=cuda, asm=asm, python=python,
                 py_tree=tree, py_error=py_error, _line_starts=_line_starts(text))
    functions: list[Function] = []
    _scan_blocks(cuda, 0, len(cuda), functions)
    if tree is not None:
        functions.extend(_triton_functions(tree, text))
    src.functions = sorted(functions, key=lambda f: f.start)
    if py_error:
        log.info("%s: Python parse problem (%s); scanning strings only", path or "<source>", py_error)
    return src
