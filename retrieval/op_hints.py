"""Op-family hints: what the kernel computes, as context fields with the evidence that decided them.

Two deterministic sources (rules as data in ``op_hints.yaml``):

- the TASK, when given: ``Model.forward`` (and the modules its ``__init__`` builds) parsed with
  :mod:`ast`, never imported; e.g. ``torch.softmax`` -> ``op_family = "softmax"``, a ``matmul`` with a
  vector operand in ``get_inputs`` -> ``"gemv"``, ``nn.MaxPool2d(2, 2)`` -> a non-overlapping pool;
- the kernel SOURCE otherwise (and always for facts a task cannot show, such as global atomics): regex
  rules over the bodies of ``__global__`` functions with comments removed.

A family no rule recognises stays *missing*, so the decision data behaves as it does without hints.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kernelskill.errors import KernelskillError
from kernelskill.feature_rules.scanner import Source, scan
from kernelskill.taskfile import dotted_name as _dotted
from kernelskill.taskfile import parse_task
from kernelskill.yaml_load import safe_load

from .result import TraceStep
from .unit_stride import Config as UnitStrideConfig
from .unit_stride import unit_stride

RULES_PATH = Path(__file__).with_name("op_hints.yaml")
FAMILIES = ("attention", "softmax", "norm", "rms_norm", "gemm", "gemv", "conv", "pool", "scan", "scatter",
            "gather", "reduction")
FIELDS = ("op_family", "op_is_gemv", "op_is_pool_nonoverlap", "op_softmax_online", "op_row_in_registers",
          "op_is_serial_scan", "uses_global_atomics", "single_custom_launch", "op_gathers_rows", "op_has_softmax",
          "op_has_norm", "access_unit_stride", "op_branch_chain", "op_norm_foldable")
#: families whose presence anywhere in the op (not only as its primary family) the vetoes must respect
STAGES = {"op_has_softmax": ("softmax", "attention"), "op_has_norm": ("norm",)}


@dataclass
class OpHints:
    """Context fields and, per field, the evidence (a source line or a task call) that decided it."""

    fields: dict[str, Any] = field(default_factory=dict)
    evidence: dict[str, str] = field(default_factory=dict)

    def merge(self, other: OpHints) -> OpHints:
        """``other`` wins field by field (the task's view of the op beats the source's guess)."""
        return OpHints(fields={**self.fields, **other.fields}, evidence={**self.evidence, **other.evidence})

    def trace_steps(self) -> list[TraceStep]:
        steps = [TraceStep(kind="note", id=name, value=value, note=self.evidence.get(name, ""))
                 for name, value in self.fields.items()]
        # a fact left unknown still says why (access_unit_stride: no threadIdx.x access, a template, ...)
        return steps + [TraceStep(kind="note", id=name, value=None, note=why)
                        for name, why in self.evidence.items() if name not in self.fields]


@dataclass(frozen=True, eq=False)  # hashed by identity (load_rules is cached)
class _Rules:
    patterns: dict[str, re.Pattern[str]]
    families: list[dict[str, Any]]
    flags: dict[str, list[str]]
    task_families: list[dict[str, Any]]
    unit_stride: UnitStrideConfig | None = None


@functools.cache
def load_rules(path: Path = RULES_PATH) -> _Rules:
    try:
        data = safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise KernelskillError(f"{path}: cannot read the op-hint rules: {exc}") from exc
    patterns: dict[str, re.Pattern[str]] = {}
    for name, rx in (data.get("patterns") or {}).items():
        try:
            patterns[name] = re.compile(rx, re.MULTILINE)
        except re.error as exc:
            raise KernelskillError(f"{path}: pattern {name!r} is not a valid regex: {exc}") from exc
    for rule in data.get("families") or []:
        for name in [*rule.get("all", []), *rule.get("none", []), rule.get("evidence", "")]:
            if name and name not in patterns:
                raise KernelskillError(f"{path}: family rule {rule.get('id')!r} names unknown pattern {name!r}")
        if rule.get("family") not in FAMILIES:
            raise KernelskillError(f"{path}: family rule {rule.get('id')!r}: family must be one of {FAMILIES}")
    flags = {k: list(v) for k, v in (data.get("flags") or {}).items()}
    for flag, names in flags.items():
        if flag not in FIELDS or any(n not in patterns for n in names):
            raise KernelskillError(f"{path}: flag {flag!r} is not a hint field or names an unknown pattern")
    for group in data.get("task_families") or []:
        if group.get("family") not in FAMILIES:
            raise KernelskillError(f"{path}: task family {group.get('family')!r} must be one of {FAMILIES}")
    try:
        stride = UnitStrideConfig.from_data(data["unit_stride"]) if data.get("unit_stride") else None
    except (KeyError, TypeError, re.error) as exc:
        raise KernelskillError(f"{path}: the unit_stride section is incomplete or not valid: {exc!r}") from exc
    return _Rules(patterns=patterns, families=list(data.get("families") or []), flags=flags,
                  task_families=list(data.get("task_families") or []), unit_stride=stride)


# ------------------------------------------------------------------------------------------ source


_COMMENT = re.compile(r"//[^\n]*|/\*[\s\S]*?\*/")


@dataclass(frozen=True)
class _Body:
    kernel: str
    text: str
    line0: int  # line number of the body's first character in the kernel file


def _strip_comments(source: str) -> str:
    """Comments replaced by spaces of the same length (newlines kept), so line numbers stay right."""
    return _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), source)


def kernel_bodies(source: str | Source) -> list[_Body]:
    """The bodies (between the braces) of every ``__global__`` function, found by the feature rules' scanner,
    the one reader of CUDA in sources: comments and string literals are blanked, offsets kept. ``source`` may
    be scanned already (a :class:`Source`)."""
    src = source if isinstance(source, Source) else scan(source)
    return [_Body(kernel=fn.name, text=fn.body(src.cuda)[1:-1], line0=src.line_of(fn.body_start + 1))
            for fn in src.kernels if fn.kind == "global"]


def _find(rx: re.Pattern[str], bodies: list[_Body]) -> tuple[_Body, re.Match[str]] | None:
    for b in bodies:
        m = rx.search(b.text)
        if m is not None:
            return b, m
    return None


def _first_true_vector(rx: re.Pattern[str], bodies: list[_Body]) -> tuple[_Body, re.Match[str]] | None:
    """The first GEMV-shaped match whose bare-indexed operand (``x[k]``) is not a pointer the kernel
    offsets by a row (``xr = x + r * d``), which would make the loop a GEMM row rather than a GEMV."""
    for b in bodies:
        for m in rx.finditer(b.text):
            var = m.group(1)
            vec = re.search(rf"\b(\w+)\[\s*{re.escape(var)}\s*\]", m.group(0))
            if vec is None:
                continue
            offset = re.compile(rf"\b{re.escape(vec.group(1))}\s*=\s*(?:\([^()]*\)\s*)?[\w.]+\s*\+")
            if not offset.search(b.text):
                return b, m
    return None


def _where(hit: tuple[_Body, re.Match[str]], rule: str) -> str:
    body, m = hit
    first = body.line0 + body.text.count("\n", 0, m.start())
    last = body.line0 + body.text.count("\n", 0, max(m.start(), m.end() - 1))
    start = body.text.rfind("\n", 0, m.start()) + 1
    end = body.text.find("\n", m.end())
    snippet = " ".join(body.text[start:end if end >= 0 else None].split())[:160]
    where = f"line {first}" if last == first else f"lines {first}-{last}"
    return f"{where} ({body.kernel}): {snippet} [{rule}]"


def from_source(source: str, rules: _Rules | None = None) -> OpHints:
    """Hints from the CUDA kernels in ``source`` (no kernel body: no hints); deterministic in the source,
    so a warm process reads each source once (about 0.3-1.4 ms per kernel file on the 2-core box)."""
    cached = _from_source_cached(source, rules or load_rules())
    return OpHints(fields=dict(cached.fields), evidence=dict(cached.evidence))


@functools.lru_cache(maxsize=256)
def _from_source_cached(source: str, rules: _Rules) -> OpHints:
    src = scan(source)  # once: the bodies and the unit-stride reader both read this scan
    bodies = kernel_bodies(src)
    hints = OpHints()
    if not bodies:
        return hints
    pats = rules.patterns
    for rule in rules.families:
        hits = [_find(pats[n], bodies) for n in rule.get("all", [])]
        if not all(hits) or any(_find(pats[n], bodies) for n in rule.get("none", [])):
            continue
        ev_name = rule.get("evidence") or rule["all"][-1]
        ev = _find(pats[ev_name], bodies)
        if rule.get("vector_not_row_pointer"):
            ev = _first_true_vector(pats[ev_name], bodies)
            if ev is None:
                continue
        hints.fields["op_family"] = rule["family"]
        hints.evidence["op_family"] = _where(ev, rule["id"]) if ev else rule["id"]
        break
    family = hints.fields.get("op_family")
    for stage, families in STAGES.items():  # any family rule of the stage that matches, not only the first
        hit = next((r for r in rules.families if r["family"] in families
                    and all(_find(pats[n], bodies) for n in r.get("all", []))
                    and not any(_find(pats[n], bodies) for n in r.get("none", []))), None)
        hints.fields[stage] = hit is not None
        hints.evidence[stage] = f"source rule {hit['id']}" if hit else f"no {'/'.join(families)} rule matched"
    hints.fields["op_is_gemv"] = family == "gemv"
    hints.fields["op_is_pool_nonoverlap"] = family == "pool"
    for name in ("op_is_gemv", "op_is_pool_nonoverlap"):
        hints.evidence[name] = (f"op_family {family}: {hints.evidence['op_family']}" if hints.fields[name]
                                else "no source rule matched")
    for flag, names in rules.flags.items():
        hit = next((h for h in (_find(pats[n], bodies) for n in names) if h), None)
        hints.fields[flag] = hit is not None
        hints.evidence[flag] = _where(hit, "+".join(names)) if hit else f"no {' / '.join(names)} in the kernels"
    hints.fields["uses_global_atomics"], hints.evidence["uses_global_atomics"] = _global_atomics(bodies, source,
                                                                                                 rules)
    hints.fields["single_custom_launch"], hints.evidence["single_custom_launch"] = _single_launch(source, rules)
    if rules.unit_stride is not None:  # missing (unknown) when no access depends on threadIdx.x or not followed
        value, why = unit_stride(src, rules.unit_stride)
        if value is not None:
            hints.fields["access_unit_stride"] = value
        hints.evidence["access_unit_stride"] = why
    return hints


def kernel_families(source: str, rules: _Rules | None = None) -> dict[str, tuple[str | None, str]]:
    """Per ``__global__`` kernel of ``source``, the op family the first matching source rule gives its
    body alone (None when no rule matches), with the evidence line."""
    rules = rules or load_rules()
    pats = rules.patterns
    out: dict[str, tuple[str | None, str]] = {}
    for body in kernel_bodies(source):
        found: tuple[str | None, str] = (None, "no op-family rule matched its body")
        for rule in rules.families:
            if not all(_find(pats[n], [body]) for n in rule.get("all", [])) or any(
                    _find(pats[n], [body]) for n in rule.get("none", [])):
                continue
            name = rule.get("evidence") or rule["all"][-1]
            hit = (_first_true_vector(pats[name], [body]) if rule.get("vector_not_row_pointer")
                   else _find(pats[name], [body]))
            if hit is None:
                continue
            found = (rule["family"], _where(hit, rule["id"]))
            break
        out.setdefault(body.kernel, found)
    return out


def _single_launch(source: str, rules: _Rules) -> tuple[bool, str]:
    """Exactly one custom kernel launch and no library compute call: any other launch of the forward
    (a clone, a fill, a copy) is data movement around that kernel."""
    text = _strip_comments(source)
    launches = [m.group(1) for m in rules.patterns["kernel_launch"].finditer(text)]
    library = rules.patterns["library_call"].search(text)
    if library is not None:
        line = text.count("\n", 0, library.start()) + 1
        return False, f"line {line}: library call {library.group(0).strip()}"
    return len(launches) == 1, (f"{len(launches)} custom launch(es): {', '.join(launches[:4])}" if launches
                                else "no <<< launch in the source")


def _global_atomics(bodies: list[_Body], source: str, rules: _Rules) -> tuple[bool, str]:
    """An atomic whose target is not a ``__shared__`` array (nor a pointer into one) goes to global memory."""
    text = _strip_comments(source)
    shared = {m.group(1) for rx in ("shared_decl", "extern_shared_decl")
              for m in rules.patterns[rx].finditer(text)}
    found_shared: tuple[_Body, re.Match[str]] | None = None
    for b in bodies:
        for m in rules.patterns["atomic_call"].finditer(b.text):
            if m.group(1) in shared:
                found_shared = found_shared or (b, m)
                continue
            return True, _where((b, m), "atomic_call")
    if found_shared is not None:
        return False, "atomics only on shared memory: " + _where(found_shared, "atomic_call")
    return False, "no atomic calls in the kernels"


# ------------------------------------------------------------------------------------------ task




def _constants(tree: ast.Module) -> dict[str, int]:
    """Module-level integer constants (``M = 4096``, ``K, N = 1, 8``) for reading input shapes."""
    out: dict[str, int] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        for t in node.targets:
            pairs: list[tuple[ast.AST, ast.AST]] = []
            if isinstance(t, ast.Name):
                pairs = [(t, node.value)]
            elif isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple):
                pairs = list(zip(t.elts, node.value.elts, strict=False))
            for name, val in pairs:
                try:
                    v = ast.literal_eval(val)
                except (ValueError, SyntaxError, TypeError):
                    continue
                if isinstance(name, ast.Name) and isinstance(v, int) and not isinstance(v, bool):
                    out[name.id] = v
    return out


def _input_shapes(tree: ast.Module, consts: dict[str, int]) -> list[tuple[list[int | None], int]]:
    """The shapes of the tensors ``get_inputs`` creates (``None`` for a dim it cannot resolve)."""
    shapes: list[tuple[list[int | None], int]] = []
    for node in tree.body:
        if not (isinstance(node, ast.FunctionDef) and node.name == "get_inputs"):
            continue
        for call in ast.walk(node):
            if not isinstance(call, ast.Call):
                continue
            name = (_dotted(call.func) or "").split(".")[-1]
            if name not in {"rand", "randn", "ones", "zeros", "empty", "randint", "full"}:
                continue
            args = call.args[2:3] if name == "randint" and len(call.args) >= 3 else call.args
            if name == "full":
                args = call.args[:1]
            if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
                args = list(args[0].elts)
            dims: list[int | None] = []
            for a in args:
                if isinstance(a, ast.Constant) and isinstance(a.value, int):
                    dims.append(a.value)
                elif isinstance(a, ast.Name):
                    dims.append(consts.get(a.id))
                else:
                    dims.append(None)
            shapes.append((dims, call.lineno))
    return shapes


def _calls(tree: ast.Module) -> list[tuple[str, ast.Call]]:
    """Lower-case last name of every call in ``Model.forward``, plus the modules its ``__init__`` builds
    when forward calls them (``self.pool(x)`` -> ``maxpool2d``)."""
    out: list[tuple[str, ast.Call]] = []
    for cls in tree.body:
        if not (isinstance(cls, ast.ClassDef) and cls.name == "Model"):
            continue
        modules: dict[str, ast.Call] = {}
        forward: ast.FunctionDef | None = None
        for fn in cls.body:
            if isinstance(fn, ast.FunctionDef) and fn.name == "__init__":
                for sub in ast.walk(fn):
                    if isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Call):
                        for t in sub.targets:
                            if isinstance(t, ast.Attribute):
                                modules[t.attr] = sub.value
            elif isinstance(fn, ast.FunctionDef) and fn.name == "forward":
                forward = fn
        if forward is None:
            continue
        for sub in ast.walk(forward):
            if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.MatMult):
                out.append(("matmult", ast.Call(func=ast.Name(id="matmul"), args=[sub.left, sub.right],
                                                keywords=[], lineno=sub.lineno, col_offset=sub.col_offset)))
            if not isinstance(sub, ast.Call):
                continue
            name = _dotted(sub.func) or ""
            short = name.split(".")[-1]
            if name.startswith("self.") and short in modules:
                built = modules[short]
                out.append(((_dotted(built.func) or "").split(".")[-1].lower(), built))
            elif short:
                out.append((short.lower(), sub))
    return sorted(out, key=lambda c: (c[1].lineno, c[1].col_offset))


def _arg(call: ast.Call, pos: int, kw: str) -> ast.AST | None:
    for k in call.keywords:
        if k.arg == kw:
            return k.value
    return call.args[pos] if len(call.args) > pos else None


def _pool_nonoverlap(call: ast.Call, functional: bool) -> bool | None:
    """Window == stride (or stride left at its default, the window) -> non-overlapping."""
    off = 1 if functional else 0  # F.max_pool2d(x, kernel_size, stride) vs nn.MaxPool2d(kernel_size, stride)
    ks, st = _arg(call, off, "kernel_size"), _arg(call, off + 1, "stride")
    if ks is None:
        return None
    if st is None or (isinstance(st, ast.Constant) and st.value is None):
        return True
    return ast.dump(ks) == ast.dump(st)


def from_task(path: str | Path, rules: _Rules | None = None) -> OpHints:
    """Hints from a KernelBench task's ``Model.forward`` (read with :mod:`ast`, never imported)."""
    rules = rules or load_rules()
    p = Path(path)
    source, tree = parse_task(p)
    calls = _calls(tree)
    names = {n for n, _ in calls}
    hints = OpHints()
    for group in rules.task_families:
        wanted = [str(c).lower() for c in group.get("calls", [])]
        also = {str(c).lower() for c in group.get("with", [])}
        if also and not (also | {"matmult"} if "matmul" in also else also) & names:
            continue
        hit = next(((n, c) for n, c in calls if n in wanted), None)
        if hit is None:
            continue
        name, call = hit
        family = group["family"]
        hints.fields["op_family"] = family
        hints.evidence["op_family"] = f"{p.name}:{call.lineno}: Model.forward calls {name}"
        if family == "gemm":
            vec = _vector_operand(tree)
            if vec is not None:
                hints.fields["op_family"] = "gemv"
                hints.evidence["op_family"] += f" with a vector operand ({vec})"
        if family == "pool":
            nonoverlap = _pool_nonoverlap(call, functional=name.startswith(("max_pool", "avg_pool")))
            if nonoverlap is not None:
                hints.fields["op_is_pool_nonoverlap"] = nonoverlap
                hints.evidence["op_is_pool_nonoverlap"] = (f"{p.name}:{call.lineno}: {name} window "
                                                           f"{'==' if nonoverlap else '!='} stride")
        break
    family = hints.fields.get("op_family")
    if family is not None:
        for stage, families in STAGES.items():  # a later stage of the forward (Linear + LayerNorm) counts too
            calls_of = {str(c).lower() for g in rules.task_families if g["family"] in families and not g.get("with")
                        for c in g.get("calls", [])}
            hit = next(((n, c) for n, c in calls if n in calls_of), None)
            hints.fields[stage] = family in families or hit is not None
            hints.evidence[stage] = (f"{p.name}:{hit[1].lineno}: Model.forward calls {hit[0]}" if hit
                                     else f"op_family {family}")
        hints.fields["op_is_gemv"] = family == "gemv"
        hints.evidence["op_is_gemv"] = hints.evidence["op_family"]
    if family is not None and "op_is_pool_nonoverlap" not in hints.fields and family != "pool":
        hints.fields["op_is_pool_nonoverlap"] = False
        hints.evidence["op_is_pool_nonoverlap"] = hints.evidence["op_family"]
    if family in ("conv", "gemm"):
        hints.fields["op_norm_foldable"], hints.evidence["op_norm_foldable"] = _foldable_norm(calls, p.name, family)
    return hints


def _foldable_norm(calls: list[tuple[str, ast.Call]], task: str, family: str) -> tuple[bool, str]:
    """Whether the forward's normalisation after its convolution or GEMM uses fixed statistics (a functional
    ``batch_norm`` with ``training=False``): a per-channel affine map that folds into the weights and bias.
    Batch statistics (the module in training mode, KernelBench's default) and per-row norms do not fold."""
    for name, call in calls:
        if name != "batch_norm":
            continue
        training = next((k.value for k in call.keywords if k.arg == "training"), None)
        if training is None and len(call.args) > 5:
            training = call.args[5]
        if isinstance(training, ast.Constant) and training.value is False:
            return True, f"{task}:{call.lineno}: batch_norm with training=False after the {family}"
        return False, f"{task}:{call.lineno}: batch_norm whose statistics are not fixed (training not False)"
    return False, f"no batch_norm with fixed statistics after the {family}"


def _vector_operand(tree: ast.Module) -> str | None:
    """The one ``get_inputs`` tensor that is a vector (one dimension, or a dimension of 1 in a 2-D shape);
    two such operands are an outer product (K = 1), not a GEMV."""
    vectors = [(dims, line) for dims, line in _input_shapes(tree, _constants(tree))
               if len(dims) == 1 or (len(dims) == 2 and 1 in dims)]
    if len(vectors) != 1:
        return None
    dims, line = vectors[0]
    return f"get_inputs line {line}: shape ({', '.join('?' if d is None else str(d) for d in dims)})"


def op_hints(source: str | None, task: str | Path | None = None) -> OpHints:
    """The hints of a query: the source's, with the task's op family (when a task is given) on top."""
    hints = from_source(source) if source else OpHints()
    if task is not None:
        hints = hints.merge(from_task(task))
    return hints
