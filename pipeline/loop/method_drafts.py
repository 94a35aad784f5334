"""What ``kb learn`` makes of a verified improvement whose method is not a KB id: either the KB method it is
(a stated mapping, with its score), or a draft of a new method that ``kb add`` accepts as it is.

The mapping score of a KB method is a weighted sum of three similarities, each in [0, 1]:

- ``guidance``: 1 - the cosine distance between the change's text (the planner's method name, plan and
  rationale, the optimizer's one-line summary) and the method's guidance doc, searched in the KB's own doc
  index with the KB's embedder (the real MiniLM model);
- ``code``: the cosine, weighted by inverse document frequency over the KB's worked examples, between the
  identifiers the change added to its parent's source and the identifiers each method's worked example adds
  to its ``before`` (API calls, intrinsics, types: ``cublasGemmEx``, ``CUBLAS_COMPUTE_32F_FAST_TF32``...);
- ``name``: the overlap (Jaccard) of the words of the run's method name and of the KB method's id and tags.

``score = 0.25 guidance + 0.55 code + 0.20 name``; the best method maps when its score is at least
:data:`MAP_THRESHOLD`. Weights and threshold were fitted on the no-KB arm of the published H200 suite
(11 improvements named freely by the model): every 3xTF32-through-cuBLAS change ranks
``ec_tf32_library_gemm`` first at 0.30-0.34 and the 3xTF32 tensor-core kernels rank ``ec_tf32_gemm`` first at
0.40-0.45, while the changes the KB has no method for score at most 0.21. Guidance text alone cannot tell
them apart (every GEMM change is about as near ``cublas_gemm``'s doc as to the right one: 0.6-0.75); the
code the change added can.

A draft is deterministic text from the run's own records (no LLM): the id and name from the run's method
name, the category and the bottleneck from the nearest KB method and the run's query, the intent from the
optimizer's summary, the mechanism from the planner's rationale, the guidance from the plan, the calls the
change introduced and its diff size, the parent and child as the worked example's ``before`` and ``after``,
the measurement as ``kind: run`` evidence, and the case the run's query matched for the parent as the case
it should join.
"""

from __future__ import annotations

import ast
import datetime as _dt
import io
import math
import re
import tokenize
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from kernelskill.kb.learned import LearnedRecord
from kernelskill.kb.schema import Method
from kernelskill.pipeline.runs import Run

MAP_THRESHOLD = 0.26
WEIGHTS = {"guidance": 0.25, "code": 0.55, "name": 0.20}
#: characters of each text field of a draft (the schema's bound is far higher; these keep a draft readable)
MECHANISM_CHARS = 1500
GUIDANCE_CHARS = 3000
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
#: identifiers that name a library call, an intrinsic, a PTX or CUDA type: what a change's guidance names
_API = re.compile(r"^(cublas|CUBLAS|cudnn|CUDNN|cuda[A-Z]|CUDA_|cu[A-Z]|__[a-z]|wmma|mma_|ldmatrix|cp_async|"
                  r"atomic[A-Z]|at_cuda|nvcuda|tma|wgmma|cutlass|float4|half2|nv_bfloat)")


class MethodMatch(BaseModel):
    """One KB method's similarity to a change."""

    method: str
    score: float
    guidance: float
    code: float
    name: float


class MethodMapping(BaseModel):
    """The answer for one verified improvement whose method is not a KB id."""

    record_id: str
    step: str
    run_method: str
    maps_to: str | None  # the KB method it is, or None: a new method (``draft``)
    draft: str | None = None  # the draft's id
    threshold: float = MAP_THRESHOLD
    best: MethodMatch | None = None
    runners_up: list[MethodMatch] = []

    def line(self) -> str:
        b = self.best
        if b is None:
            return f"{self.step} {self.run_method}: no KB method to compare with; new method draft {self.draft}"
        why = (f"score {b.score:.3f} = {WEIGHTS['guidance']} x guidance {b.guidance:.3f} + {WEIGHTS['code']} x code "
               f"{b.code:.3f} + {WEIGHTS['name']} x name {b.name:.3f}; threshold {self.threshold}")
        if self.maps_to:
            return f"{self.step} {self.run_method} is the KB's {self.maps_to} ({why})"
        return f"{self.step} {self.run_method}: new method draft {self.draft} (nearest {b.method}: {why})"


_C_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def code_only(text: str) -> str:
    """``text`` without its comments and docstrings: the words of a comment are not code the change added.

    A Python source loses its ``#`` comments and its statement-level strings (docstrings), and the C/C++/CUDA
    comments inside its other strings (a ``load_inline`` source); a source that does not tokenize as Python
    (a ``.cu`` file) loses its C comments."""
    try:
        ast.parse(text)
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return _C_COMMENT.sub(" ", text)
    kept: list[str] = []
    statement_start = True
    for i, tok in enumerate(tokens):
        kind = tok.type
        if kind in (tokenize.COMMENT, tokenize.NL):
            continue
        if kind in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            statement_start = True
            continue
        if kind == tokenize.STRING:
            following = next((t for t in tokens[i + 1:] if t.type not in (tokenize.COMMENT, tokenize.NL)), None)
            if statement_start and (following is None or following.type in (tokenize.NEWLINE, tokenize.ENDMARKER)):
                continue  # a docstring (or any bare string statement)
            kept.append(_C_COMMENT.sub(" ", tok.string))
        else:
            kept.append(tok.string)
        statement_start = False
    return " ".join(kept)


def identifiers(text: str) -> set[str]:
    """The identifiers of a source's code (comments and docstrings left out)."""
    return set(_IDENT.findall(code_only(text)))


def added_identifiers(before: str, after: str) -> set[str]:
    """The identifiers of ``after`` that ``before`` does not use: what a change brought in."""
    return identifiers(after) - identifiers(before)


def _words(name: str) -> set[str]:
    return {w for w in re.split(r"[^a-z0-9]+", name.lower()) if w}


@dataclass
class CodeIndex:
    """The identifiers each KB method's worked example adds, with their inverse document frequencies."""

    added: dict[str, set[str]] = field(default_factory=dict)
    df: Counter = field(default_factory=Counter)

    @classmethod
    def of_store(cls, store: Any) -> CodeIndex:
        out = cls()
        for m in store.methods():
            root = store.example_root(m.id) if m.example is not None else None
            if root is None or m.example is None:
                continue
            try:
                before = (Path(root) / m.example.before).read_text(encoding="utf-8")
                after = (Path(root) / m.example.after).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            out.added[m.id] = added_identifiers(before, after)
        out.df = Counter(t for ids in out.added.values() for t in ids)
        return out

    def _idf(self, token: str) -> float:
        return math.log((len(self.added) + 1) / (self.df.get(token, 0) + 1)) + 1.0

    def similarity(self, change: set[str], method: str) -> float:
        theirs = self.added.get(method)
        if not theirs or not change:
            return 0.0
        num = sum(self._idf(t) ** 2 for t in change & theirs)
        den = math.sqrt(sum(self._idf(t) ** 2 for t in change)) * math.sqrt(sum(self._idf(t) ** 2 for t in theirs))
        return num / den if den else 0.0


def change_text(run_method: str, plan: str, rationale: str, summary: str) -> str:
    """The text a change is searched by in the KB's doc index."""
    return "\n".join(p for p in (run_method.replace("_", " "), summary, plan[:1500], rationale[:600]) if p)


def rank_methods(store: Any, index: CodeIndex, *, run_method: str, text: str, before: str, after: str
                 ) -> list[MethodMatch]:
    """Every KB method with a guidance doc, by score (best first)."""
    methods = store.methods()
    ids = [m.id for m in methods]
    words = {m.id: _words(m.id) | {w for t in m.tags for w in _words(t)} for m in methods}
    guidance: dict[str, float] = {}
    for hit in store.search_docs(text, k=max(1, 4 * len(ids))):
        guidance.setdefault(hit.method, max(0.0, 1.0 - float(hit.distance)))
    change = added_identifiers(before, after)
    mine = _words(run_method)
    out = []
    for mid in ids:
        g = guidance.get(mid, 0.0)
        c = index.similarity(change, mid)
        theirs = words[mid]
        n = len(mine & theirs) / len(mine | theirs) if mine | theirs else 0.0
        score = WEIGHTS["guidance"] * g + WEIGHTS["code"] * c + WEIGHTS["name"] * n
        out.append(MethodMatch(method=mid, score=round(score, 4), guidance=round(g, 4), code=round(c, 4),
                               name=round(n, 4)))
    out.sort(key=lambda m: (-m.score, m.method))
    return out


# --------------------------------------------------------------------------------------------------
# what the run recorded about one change


@dataclass
class ChangeRecord:
    """The run's own words about one accepted change."""

    plan: str = ""
    rationale: str = ""
    summary: str = ""  # the optimizer's one line before its code
    review: str = ""
    diff_summary: str = ""
    date: _dt.date | None = None


def _squash(text: Any) -> str:
    return " ".join(str(text or "").split())


def change_record(run: Run, step: str) -> ChangeRecord:
    """Plan, rationale, summary, review and diff size of ``step`` (``r02.optimize``) from the run's events."""
    out = ChangeRecord()
    round_tag = step.split(".", 1)[0]
    for event in run.log.of_type("attempt"):
        data = event.get("data") or {}
        if data.get("step") == step:
            out.plan = _squash(data.get("plan"))
            out.review = _squash(data.get("review"))
            out.diff_summary = _squash(data.get("diff_summary"))
            out.date = _date(event.get("ts"))
    plan = run.log.find(f"{round_tag}.plan", "plan")
    if plan is not None:
        out.rationale = _squash((plan.get("data") or {}).get("rationale"))
        out.plan = out.plan or _squash((plan.get("data") or {}).get("plan"))
    for event in run.log.of_type("llm_call"):
        data = event.get("data") or {}
        if str(event.get("step") or "").startswith(f"{step}.") and data.get("text"):
            head = str(data["text"]).split("```", 1)[0].strip()
            out.summary = _squash(head.splitlines()[0]) if head else ""
    if out.summary.lower().startswith(("here is", "here's")):
        out.summary = ""
    if out.date is None:
        out.date = _date(run.manifest.get("created"))
    return out


def _date(stamp: Any) -> _dt.date | None:
    if isinstance(stamp, int | float):
        return _dt.datetime.fromtimestamp(stamp, _dt.UTC).date()
    if isinstance(stamp, str) and len(stamp) >= 10:
        try:
            return _dt.date.fromisoformat(stamp[:10])
        except ValueError:
            return None
    return None


# --------------------------------------------------------------------------------------------------
# the draft


def draft_id(run_method: str, taken: set[str]) -> str:
    """A valid KB id from the run's method name, not one of ``taken``."""
    base = re.sub(r"[^a-z0-9_]+", "_", run_method.lower()).strip("_")
    if not base or not base[0].isalpha():
        base = f"learned_{base}".rstrip("_")
    base = base[:64]
    if len(base) < 2:
        base = "learned_method"
    out, n = base, 1
    while out in taken:
        n += 1
        out = f"{base}_{n}"
    return out


def _cut(text: str, limit: int) -> str:
    """``text`` cut at a sentence end (or a word) at most ``limit`` characters long."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    end = max(head.rfind(". "), head.rfind("; "))
    return head[: end + 1] if end > limit // 2 else head.rsplit(" ", 1)[0] + " ..."


def method_title(run_method: str) -> str:
    words = re.split(r"[_\-\s]+", run_method.strip())
    return " ".join(words)[:1].upper() + " ".join(words)[1:]


def draft_method(record: LearnedRecord, change: ChangeRecord, nearest: Method | None, *, method_id: str,
                 example_dir: str, run_id: str, api_calls: list[str], bottlenecks: set[str]) -> dict[str, Any]:
    """The draft as the YAML item ``kb add`` reads (a :class:`Method`'s fields), validated by the caller."""
    where = f"{record.op_family or 'a'} kernel" + (f" bound by {record.bottleneck}" if record.bottleneck else "")
    summary = change.summary or f"{method_title(record.method)}."
    intent = (f"{summary.rstrip('.')}. Learned from run {run_id} ({record.task_name or 'task'}), step "
              f"{record.step}: {record.speedup:.2f}x over its parent on {record.hardware} under the {record.protocol} "
              "protocol.")
    mechanism = _cut(change.rationale or change.plan or summary, MECHANISM_CHARS)
    features = sorted(k for k, v in record.features.items() if v is True)
    preconditions = (f"Learned on a {where} (tier {record.tier or 'unknown'}), protocol {record.protocol}"
                     + (f"; the parent's code features: {', '.join(features)}" if features else "")
                     + ". Check that these hold before applying it elsewhere.")
    guidance = _cut(change.plan or summary, GUIDANCE_CHARS)
    if api_calls:
        guidance += f" Calls and types the change introduced: {', '.join(api_calls)}."
    if change.diff_summary:
        guidance += f" The change was {change.diff_summary} against its parent."
    tags = sorted({t for t in ["learned", record.op_family or ""] if t}
                  | ({t for t in nearest.tags if t in _words(record.method) | _words(change.plan)} if nearest else set()))
    date = change.date or _dt.date.today()
    verdict_note = (f"run {run_id} step {record.step} (parent {record.before_file}, child {record.after_file})"
                    + ("; re-verified on a fresh seed" if record.reverified else "") + f"; review: {change.review}")
    evidence = {"kind": "run", "task": record.task_name or None, "before_ms": record.before_ms,
                "after_ms": record.after_ms, "speedup": record.speedup, "hardware": record.hardware,
                "date": date.isoformat(), "command": f"kernelskill kb learn {run_id}", "protocol": record.protocol,
                "before_vs_eager": record.before_vs_eager, "after_vs_eager": record.after_vs_eager,
                "verdict": "pays", "notes": _cut(verdict_note, 1000)}
    item: dict[str, Any] = {
        "id": method_id, "name": method_title(record.method), "category": nearest.category if nearest else "algorithm",
        "tags": tags, "intent": intent, "mechanism": mechanism, "preconditions": preconditions,
        "guidance": guidance,
        "bottlenecks": [record.bottleneck] if record.bottleneck in bottlenecks else [],
        "example": {"task": f"{example_dir}/task.py", "before": f"{example_dir}/before.py",
                    "after": f"{example_dir}/after.py",
                    "notes": f"run {run_id}: {record.before_file} -> {record.after_file}"},
        "provenance": {"author": "kernelskill kb learn", "source": f"run {run_id} step {record.step}",
                       "date": date.isoformat()},
        "evidence": [{k: v for k, v in evidence.items() if v is not None}],
    }
    return item


def api_calls(before: str, after: str, limit: int = 12) -> list[str]:
    """The library calls, intrinsics and CUDA types the change brought in, sorted."""
    return sorted(t for t in added_identifiers(before, after) if _API.match(t))[:limit]


__all__ = ["MAP_THRESHOLD", "ChangeRecord", "CodeIndex", "MethodMapping", "MethodMatch", "added_identifiers",
           "api_calls", "change_record", "change_text", "draft_id", "draft_method", "method_title", "rank_methods"]
