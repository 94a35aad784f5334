"""``kernelskill.query``: which methods apply to this kernel, and why?

    result = kernelskill.query("examples/kernels/naive_gemm.py",
                               profile="examples/profiles/naive_gemm.csv")
    result.bottleneck.id, result.case.id, result.first_methods()

Pipeline: features (``feature_rules.extract``) + context (task, settings, overrides) + the normalized
profile of the dominant kernel -> :func:`engine.decide` (derived fields, tier, bottleneck, case, vetoes)
-> :func:`ranking.rank_methods` (SkillDocs of the permitted methods) -> :class:`QueryResult`.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelskill.errors import KernelskillError

from .applied import applied_methods
from .result import (
    FeatureSummary,
    KernelDiagnosis,
    KernelSummary,
    MethodWhy,
    ProfileSummary,
    QueryResult,
    RouteReport,
    TraceStep,
)
from .routes import device_for, route_report
from .task_routes import TaskAdvice, advise, decide_family, forward_families
from .task_routes import is_task_only as task_only

if TYPE_CHECKING:
    from .kernels import KernelView

log = logging.getLogger(__name__)

_STORES: dict[str, Any] = {}
_RULES: dict[tuple[int, str | None], Any] = {}
_LOCK = threading.Lock()


def _open_store(settings: Any) -> Any:
    key = str(Path(settings.kb_dir).resolve())
    with _LOCK:
        store = _STORES.get(key)
        if store is None:
            store = _disk_reads_store(settings)
            _STORES[key] = store
        return store


def _disk_reads_store(settings: Any) -> Any:
    """The KB of ``settings`` behind its disk cache of reads (:mod:`.kb_reads`): the real store is opened
    (building the KB when missing, rebuilding it when its skills changed) now when the KB is not current,
    else on the first read the disk cache does not have."""
    from kernelskill.kb.sources import kb_is_current

    from .kb_reads import DiskReadsKB

    def open_real() -> Any:
        from kernelskill.kb.home import open_store  # DuckDB, the store, curation: only when needed (heavy)

        return open_store(settings, read_only=True)

    reader = DiskReadsKB(settings, open_real)
    if not kb_is_current(settings):
        reader.store()
    return reader


class _LRU:
    def __init__(self, size: int) -> None:
        self.size = size
        self.data: OrderedDict[Any, Any] = OrderedDict()
        self.lock = threading.Lock()

    def get_or(self, key: Any, make: Any) -> Any:
        with self.lock:
            if key in self.data:
                self.data.move_to_end(key)
                return self.data[key]
        value = make()
        with self.lock:
            self.data[key] = value
            while len(self.data) > self.size:
                self.data.popitem(last=False)
        return value

    def clear(self) -> None:
        with self.lock:
            self.data.clear()


_READS = _LRU(4096)


class _CachedReads:
    """The store's reads, memoized per KB content hash (an ingest changes the hash and so the keys).

    The SQL and the vector search still decide what comes back; a warm process only avoids asking the
    same question twice (the planner asks about the same situation every round)."""

    def __init__(self, store: Any, content: str) -> None:
        self._store = store
        self._content = content

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def cases_for(self, bottleneck: str | None, tier: str | None, structure: int | None, *,
                  fallback: bool = False) -> list[Any]:
        key = ("cases", self._content, bottleneck, tier, structure, fallback)
        return _READS.get_or(key, lambda: self._store.cases_for(bottleneck, tier, structure, fallback=fallback))

    def methods(self, ids: list[str] | None = None) -> list[Any]:
        key = ("methods", self._content, tuple(ids) if ids is not None else None)
        return _READS.get_or(key, lambda: self._store.methods(ids))

    def counts(self) -> dict[str, int]:
        return _READS.get_or(("counts", self._content), self._store.counts)

    def example_root(self, method_id: str) -> Any:
        return _READS.get_or(("example_root", self._content, method_id),
                             lambda: self._store.example_root(method_id))

    def search_docs(self, text: str, k: int = 5, methods: list[str] | None = None) -> list[Any]:
        key = ("search", self._content, text, k, tuple(methods) if methods is not None else None)
        return _READS.get_or(key, lambda: self._store.search_docs(text, k=k, methods=methods))


def clear_caches(*, rules: bool = True) -> None:
    """Forget the in-process memos (features, profiles, store reads and, unless ``rules=False``, the
    decision tables read once per KB content); for benchmarks and tests."""
    _READS.clear()
    if rules:
        _RULES.clear()
    _extracted.cache_clear()
    _profile_at.cache_clear()


def _content_of(store: Any) -> str | None:
    try:
        return store.content_hash()
    except Exception:  # noqa: BLE001 - a reader without a hash (MemoryKB): never cache across calls
        return None


def _rules_for(store: Any, content: str | None) -> Any:
    """The small decision tables, cached per store and content hash (re-read after an ingest)."""
    from .engine import Rules

    if content is None:
        return Rules.from_kb(store)
    key = (id(store), content)
    rules = _RULES.get(key)
    if rules is None:
        rules = Rules.from_kb(store)
        _RULES[key] = rules
    return rules


def _features(source: str, path: Path, given: Mapping[str, Any] | Any | None) -> FeatureSummary:
    if given is not None:
        if hasattr(given, "values") and hasattr(given, "kernels") and not isinstance(given, Mapping):
            return _summary_from_featureset(given)  # a FeatureSet
        return FeatureSummary(values=dict(given), source="given")
    return _extracted(source, str(path)).model_copy(deep=True)


@functools.lru_cache(maxsize=256)
def _extracted(source: str, path: str) -> FeatureSummary:
    """Feature extraction is deterministic in the source, so a warm process extracts each source once."""
    try:
        from kernelskill.feature_rules import extract
    except ImportError as exc:  # pragma: no cover - the feature room is part of the package
        raise KernelskillError(f"feature extraction is unavailable ({exc}); pass features=") from exc
    return _summary_from_featureset(extract(source, path=path))


def _load_profile_cached(path: str | Path) -> Any:
    from .profile import load_profile

    p = Path(path)
    try:
        st = p.stat()
    except OSError:
        return load_profile(p)  # raises the one-line error
    return _profile_at(str(p.resolve()), st.st_mtime_ns, st.st_size, str(p)).model_copy(deep=True)


@functools.lru_cache(maxsize=64)
def _profile_at(resolved: str, mtime_ns: int, size: int, shown: str) -> Any:
    from .profile import load_profile

    return load_profile(shown)  # the key holds the resolved path; messages name the path as given


def _summary_from_featureset(fs: Any) -> FeatureSummary:
    evidence = {name: [f"line {e.line}: {e.text.strip()[:120]} ({e.rule})" for e in lines[:3]]
                for name, lines in (getattr(fs, "evidence", {}) or {}).items() if lines}
    undecided = fs.undecided() if hasattr(fs, "undecided") else []
    return FeatureSummary(values=dict(fs.values), kernels=list(fs.kernels), launches=list(fs.launches),
                          undecided=undecided, evidence=evidence, source="extracted")


def _has_kernel(source: str, features: FeatureSummary) -> bool:
    if features.source == "given":
        return True
    if features.kernels or features.launches:
        return True
    return "__global__" in source or "@triton.jit" in source


def _profile_summary(prof: Any, source_kernels: list[str], kernel_path: Path) -> ProfileSummary:
    dom = prof.dominant()
    total = sum(k.total_duration_ns or 0.0 for k in prof.kernels)
    in_source = set(source_kernels)
    kernels = sorted(prof.kernels, key=lambda k: -(k.total_duration_ns or 0.0))
    if in_source and not any(k.base_name in in_source for k in prof.kernels):
        custom = [k.base_name for k in prof.kernels if not k.vendor]
        if custom:
            raise KernelskillError(
                f"{prof.source}: profiles {', '.join(sorted(set(custom))[:4])}, not a kernel of {kernel_path} "
                f"(it defines {', '.join(sorted(in_source)[:4])}); profile this kernel or pass the right file")
    summaries = [KernelSummary(name=k.name, base_name=k.base_name, launches=k.launches,
                               total_duration_ns=k.total_duration_ns,
                               share_pct=round(100.0 * (k.total_duration_ns or 0.0) / total, 2) if total else None,
                               vendor=k.vendor and k.base_name not in in_source,
                               in_source=k.base_name in in_source) for k in kernels]
    missing = [f"{m.field} (looked for {', '.join(m.looked_for)})" for m in dom.missing]
    return ProfileSummary(source=prof.source, units=prof.units, dominant=dom.base_name,
                          dominant_vendor=dom.vendor and dom.base_name not in in_source,
                          launches_per_forward=prof.launches, kernels=summaries,
                          fields={k: v for k, v in dom.fields.items()}, field_sources=dict(dom.sources),
                          missing=missing, notes=list(prof.notes))


def _routes(op: str | None, routing: Any, decision: Any, rules: Any, store: Any, task: str | Path | None,
            prof: ProfileSummary | None, applied: set[str], device_name: str | None = None) -> RouteReport | None:
    """The strategic routes of the target kernel's operation with their ceilings (:mod:`.routes`)."""
    forward_ms = None
    if prof is not None:
        total = sum(k.total_duration_ns or 0.0 for k in prof.kernels)
        forward_ms = total / 1e6 if total > 0 else None
    chosen = routing.chosen
    vendor = bool(chosen.vendor) if chosen is not None else bool(prof is not None and prof.dominant_vendor)
    return route_report(op=op, kernel=chosen.name if chosen is not None else None, env=decision.env, rules=rules,
                        methods={m.id: m for m in store.methods()}, task=task, forward_ms=forward_ms, vendor=vendor,
                        applied=applied, device_name=device_name)


@dataclass
class _Routing:
    """Which kernel the case is chosen for: the dominant one, or the next when it has no permitted method."""

    rows: list[KernelDiagnosis] = field(default_factory=list)
    target: KernelView | None = None  # the kernel whose work features and counters decide the case
    chosen: KernelView | None = None  # the kernel the final case was chosen for
    candidates: list[KernelView] = field(default_factory=list)  # further custom kernels, by share of time
    skipped: list[tuple[KernelView, str]] = field(default_factory=list)
    steps: list[TraceStep] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _route(source: str, kpath: Path, task: str | Path | None, feats: FeatureSummary, ctx: dict[str, Any],
           prof: Any, rules: Any) -> _Routing:
    """Per-kernel diagnosis and the dominant kernel's operation (``dominant_op`` in ``ctx``)."""
    from .kernels import diagnose, dominant_op_of_task, load_kernel_ops, source_kernels, static_views

    ops = load_kernel_ops()
    views = source_kernels(source, str(kpath), task, ops) if feats.source != "given" else {}
    out = _Routing()
    if prof is not None:
        diagnosed = diagnose(prof, views, feats.values, ctx, rules, ops)
        out.rows = [v.diagnosis for v in diagnosed if v.diagnosis is not None]
        dom = next(v for v in diagnosed if v.diagnosis is not None and v.diagnosis.dominant)
        out.target = dom
        out.candidates = [v for v in diagnosed if v is not dom and v.in_source and (v.share_pct or 0) > 0]
        op, why = dom.op, f"the dominant kernel {dom.name} ({dom.share_pct}% of the time): {dom.op_reason}"
    else:
        out.rows = static_views(views)
        decided = dominant_op_of_task(task, ops) if task is not None else None
        if decided is None and views:
            order = [op for op, _ in ops.dominance]
            first = min(views.values(), key=lambda v: order.index(v.op) if v.op in order else len(order))
            decided = (first.op, f"no profile and no task: {first.name} is the source's first {first.op} kernel")
        op, why = decided or (None, "")
        out.target = next((v for v in views.values() if v.op == op), None)
        for row in out.rows:
            row.dominant = out.target is not None and row.name == out.target.name
    if op is None:
        return out
    ctx["dominant_op"] = op
    out.chosen = out.target
    out.steps.append(TraceStep(kind="note", id="dominant_op", value=op, note=why))
    if out.target is not None and out.target.in_source and len(views) > 1:
        changed = {n: (feats.values.get(n), out.target.features[n]) for n in ops.kernel_features
                   if n in out.target.features and feats.values.get(n) != out.target.features[n]}
        if changed:
            out.steps.append(TraceStep(kind="note", id="dominant_kernel_features", value=out.target.name,
                                       inputs={n: new for n, (_, new) in changed.items()},
                                       note="work features from this kernel, not the union of the source's kernels: "
                                            + ", ".join(f"{n} {old} -> {new}" for n, (old, new) in changed.items())))
    return out


def _next_kernel_if_dead_end(decision: Any, routing: _Routing, store: Any, feats: FeatureSummary,
                             ctx: dict[str, Any], structure: int | None, rules: Any,
                             why_missing: Mapping[str, str]) -> tuple[Any, dict[str, Any]]:
    """When the dominant kernel's case leaves no permitted method, decide for the next custom kernel by
    share of time (recorded in the trace); the first one with a permitted method wins."""
    from .engine import decide
    from .kernels import kernel_env

    if decision.permitted or routing.chosen is None:
        return decision, ctx
    for view in routing.candidates:
        routing.skipped.append((routing.chosen, f"no permitted method (case {decision.case.id})"))
        ctx_next = {**ctx, "dominant_op": view.op}
        attempt = decide(store, kernel_env(view, feats.values, ctx_next), structure=structure, rules=rules,
                         why_missing=why_missing)
        routing.chosen = view
        if attempt.permitted:
            routing.notes.append(f"the dominant kernel had no permitted method; case and methods are for "
                                 f"{view.name} ({view.op}, {view.share_pct}% of the time)")
            return attempt, ctx_next
        decision = attempt
    return decision, ctx


def query(kernel: str | Path, *, task: str | Path | None = None, profile: str | Path | Any | None = None,
          settings: Any = None, store: Any = None, features: Mapping[str, Any] | Any | None = None,
          context: Mapping[str, Any] | None = None, k: int = 3) -> QueryResult:
    """Answer "which methods apply to this kernel, and why?" (docs/CONTRACTS.md, "Retrieval").

    ``profile`` is a path (ncu CSV or ``.ncu-rep``) or a parsed :class:`~.profile.Profile`; without it
    the query is static-only. ``features`` overrides extraction (a dict of the 18 features or a
    ``FeatureSet``); ``context`` overrides context fields (``task_dtype``, ``tolerance_atol``, ...).
    """
    from kernelskill.taskfile import read_task

    from .context import default_tolerance, query_context, settings_context
    from .engine import decide, structure_of
    from .kernels import kernel_env, target_note
    from .ranking import query_text, rank_methods

    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    kpath = Path(kernel)
    try:
        source = kpath.read_text()
    except FileNotFoundError:
        raise KernelskillError(f"{kpath}: no such kernel file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise KernelskillError(f"{kpath}: cannot read the kernel: {exc}") from exc

    if features is None and task_only(source):
        return _task_query(kpath, settings=settings, store=store, context=context, k=k, t0=t0)
    feats = _features(source, kpath, features)
    if not _has_kernel(source, feats):
        raise KernelskillError(f"{kpath}: no kernel found (no __global__ function, no load_inline source, "
                               f"no library launch in forward)")
    t1 = time.perf_counter()
    timings["features"] = (t1 - t0) * 1000

    if settings is None and (store is None or context is None or "arch_sm" not in (context or {})):
        from kernelskill.config import load_settings

        settings = load_settings()
    ctx: dict[str, Any] = settings_context(settings)
    task_info = read_task(task) if task is not None else None
    dtype = run_dtype(settings, task_info.dtype if task_info is not None else None)
    if dtype:
        ctx["task_dtype"] = dtype
        if task_info is not None:
            task_info.dtype = dtype  # the query text names the dtype the run evaluates in
        for key, value in default_tolerance(dtype, getattr(getattr(settings, "harness", None),
                                                           "protocol", None)).items():
            ctx.setdefault(key, value)  # settings.harness.atol/rtol, when set, win
    ctx["has_profile"] = profile is not None
    if feats.launches:
        ctx["launches_per_forward"] = len(feats.launches)

    prof_summary: ProfileSummary | None = None
    why_missing: dict[str, str] = {}
    prof_fields: dict[str, Any] = {}
    if profile is not None:
        from .profile import Profile

        prof = profile if isinstance(profile, Profile) else _load_profile_cached(profile)
        prof_summary = _profile_summary(prof, feats.kernels, kpath)
        ctx["launches_per_forward"] = prof.launches
        ctx["vendor_kernel_dominant"] = prof_summary.dominant_vendor
        prof_fields = {k: v for k, v in prof_summary.fields.items() if v is not None}
        for m in prof.dominant().missing:
            why_missing[m.field] = f"is not in the profile (looked for {', '.join(m.looked_for)})"
    else:
        from .profile import load_field_map

        for name in load_field_map().fields:
            why_missing[name] = "needs a profile (static-only query; pass --profile)"
    device_name = prof.device_name if profile is not None else None  # the profiled GPU's facts, else the arch's
    ctx["device_sm_count"] = device_for(ctx.get("arch_sm"), device_name)[1]["sm_count"]
    hints = query_context(source, task, prof if profile is not None else None)
    ctx.update(hints.fields)  # op-family hints and the dominant kernel's share; explicit context wins
    if context:
        ctx.update({k: v for k, v in context.items()})
    timings["profile"] = (time.perf_counter() - t1) * 1000
    t2 = time.perf_counter()

    if store is None:
        if settings is None:
            from kernelskill.config import load_settings

            settings = load_settings()
        store = _open_store(settings)
    content = _content_of(store)
    rules = _rules_for(store, content)
    if content is not None:
        store = _CachedReads(store, content)
    structure = structure_of(feats.values)
    routing = _route(source, kpath, task, feats, ctx, prof if profile is not None else None, rules)
    env: dict[str, Any] = ({**feats.values, **ctx, **prof_fields} if routing.target is None
                           or (profile is not None and not routing.target.in_source)
                           else kernel_env(routing.target, feats.values, ctx))
    decision = decide(store, env, structure=structure, rules=rules, why_missing=why_missing)
    decision, ctx = _next_kernel_if_dead_end(decision, routing, store, feats, ctx, structure, rules, why_missing)
    if routing.chosen is not None:
        routing.steps.append(target_note(routing.chosen, routing.skipped))
        for row in routing.rows:
            row.target = row.name == routing.chosen.name
    t3 = time.perf_counter()
    timings["decide"] = (t3 - t2) * 1000
    if prof_summary is not None:
        prof_summary.derived = {s.id: s.value for s in decision.trace if s.kind == "derived"}

    b_text = ""
    if decision.bottleneck.id:
        b = next((b for b in rules.bottlenecks if b.id == decision.bottleneck.id), None)
        b_text = b.description if b is not None else ""
    # The text depends on the diagnosis and the task, not on identifiers, so equal situations share
    # one cached query embedding (the planner asks again every round).
    text = query_text(feats.values, op_summary=task_info.summary() if task_info else "",
                      bottleneck=decision.bottleneck.name, bottleneck_text=b_text, tier=decision.tier.name)
    applied = applied_methods(source, decision.env)
    offered = [m for m in decision.permitted if m.id not in applied]
    for a in applied.values():
        a.in_case = a.id in decision.case.methods
    permitted = rank_methods(store, offered, text, case_id=decision.case.id, k=k, static_only=profile is None)
    routes = _routes(ctx.get("dominant_op"), routing, decision, rules, store, task, prof_summary, set(applied),
                     device_name)
    flush = getattr(store, "flush", None)  # a DiskReadsKB keeps the reads it took from the store
    if callable(flush):
        flush()
    timings["rank"] = (time.perf_counter() - t3) * 1000

    notes = list(decision.notes)
    if routes is not None and routes.at_roofline:
        notes.insert(0, f"{routes.kernel or 'the kernel'} is {routes.verdict}")
    if profile is None:
        notes.insert(0, "static-only: no profile given, so no tier or bottleneck; the answer comes from code "
                        "features, a fallback case and similarity (pass --profile for a diagnosis)")
    if prof_summary is not None:
        if prof_summary.dominant_vendor:
            notes.append(f"the dominant kernel {prof_summary.dominant} is a vendor kernel; its counters "
                         f"describe the library, not the custom code")
        notes.extend(prof_summary.notes)
    if feats.undecided:
        notes.append(f"features left at rule defaults (no LLM): {', '.join(feats.undecided)}")
    context_out = {k: v for k, v in ctx.items()}
    timings["total"] = (time.perf_counter() - t0) * 1000
    return QueryResult(
        kernel=str(kpath), task=str(task) if task is not None else None, static_only=profile is None,
        features=feats, context=context_out, profile=prof_summary, kernels=routing.rows,
        target_kernel=routing.chosen.name if routing.chosen is not None else None, tier=decision.tier,
        bottleneck=decision.bottleneck, case=decision.case, permitted=permitted, forbidden=decision.forbidden,
        vetoes=decision.vetoes, routes=routes, applied=sorted(applied.values(), key=lambda a: (not a.in_case, a.id)), query_text=text, trace=hints.trace_steps() + routing.steps + decision.trace,
        notes=notes + routing.notes,
        timings_ms={k: round(v, 3) for k, v in timings.items()})


def run_dtype(settings: Any, task_dtype: str | None) -> str | None:
    """The dtype a run evaluates the task in, as the ``task_dtype`` context field: the settings' precision when
    it casts the task (bf16, fp16: the harness casts inputs and weights to it), else the task file's own dtype
    (fp32 precision evaluates the task as written); None when neither is known."""
    precision = getattr(getattr(settings, "harness", None), "precision", None)
    if precision in ("bf16", "fp16"):
        return str(precision)
    return task_dtype or None


# ------------------------------------------------------------------------------ tasks with no kernel
def _task_context(task: Path, settings: Any, protocol: str | None, context: Mapping[str, Any] | None) -> dict[str, Any]:
    """The context of advice on a task file: settings (arch, library policy), the protocol (named, else
    the settings' harness protocol) for the task's dtype, the task's op hints; explicit ``context`` wins."""
    from kernelskill.protocols import load_protocol
    from kernelskill.taskfile import read_task

    from .context import query_context, settings_context

    ctx: dict[str, Any] = settings_context(settings)
    info = read_task(task)
    dtype = run_dtype(settings, info.dtype) or "fp32"
    name = protocol or getattr(getattr(settings, "harness", None), "protocol", None)
    try:
        ctx.update(load_protocol(name).context(dtype))
    except (KeyError, ValueError, OSError) as exc:
        raise KernelskillError(f"protocol {name!r}: {exc}") from exc
    ctx["task_dtype"] = dtype
    ctx.update(query_context(None, task).fields)
    if context:
        ctx.update(context)
    return ctx


def _store_and_rules(settings: Any, store: Any) -> tuple[Any, Any]:
    if store is None:
        store = _open_store(settings)
    content = _content_of(store)
    rules = _rules_for(store, content)
    return (_CachedReads(store, content) if content is not None else store), rules


def task_advice(task: str | Path, *, protocol: str | None = None, home: str | Path | None = None,
                settings: Any = None, store: Any = None, context: Mapping[str, Any] | None = None,
                k: int = 1) -> TaskAdvice:
    """The KB's advice for the operations of a task's forward (docs/CONTRACTS.md, "Retrieval"): per op
    family of ``Model.forward`` (dominant first), the routes the KB puts first under ``protocol`` (a preset
    name or a protocol file; default: the settings' harness protocol), with guidance and the measured
    effect of each route's worked example. Offline: no GPU, no LLM; the task file is parsed, never run."""
    from kernelskill.taskfile import validate_task

    tpath = Path(task)
    validate_task(tpath)
    if settings is None:
        from kernelskill.config import load_settings

        settings = load_settings(home=home)
    ctx = _task_context(tpath, settings, protocol, context)
    store, rules = _store_and_rules(settings, store)
    advice = advise(store, rules, tpath, ctx, k=k)
    flush = getattr(store, "flush", None)
    if callable(flush):
        flush()
    return advice


def _task_query(kpath: Path, *, settings: Any, store: Any, context: Mapping[str, Any] | None, k: int,
                t0: float) -> QueryResult:
    """``query TASK.py`` on a task with no kernel: the answer for the forward's dominant op family from the
    task-route cases; the other families' first routes are in the notes."""
    from kernelskill.taskfile import validate_task

    validate_task(kpath)
    if settings is None:
        from kernelskill.config import load_settings

        settings = load_settings()
    ctx = _task_context(kpath, settings, None, context)
    store, rules = _store_and_rules(settings, store)
    found = forward_families(kpath)
    n_calls = sum(len(c) for _, c in found)
    notes = ["task only: no kernel in this file, so no features, profile or bottleneck; the answer is the KB's "
             "route for the forward's dominant op family under the protocol"]
    steps: list[TraceStep] = []
    if not found:
        raise KernelskillError(f"{kpath}: a task file with no kernel, and no op-family rule recognises the calls "
                               f"of Model.forward (retrieval/task_families.yaml)")
    spec, calls = found[0]
    steps.append(TraceStep(kind="note", id="task_family", value=spec.family,
                           note=f"Model.forward runs {', '.join(f'{n} (line {ln})' for n, ln in calls)}"))
    decision, env = decide_family(store, rules, spec, ctx, calls_in_forward=n_calls)
    permitted = rank_methods_for_task(store, decision, k)
    for other, other_calls in found[1:]:
        d, _ = decide_family(store, rules, other, ctx, calls_in_forward=n_calls)
        notes.append(f"also in the forward: {other.family} ({', '.join(n for n, _ in other_calls)}): case {d.case.id}, "
                     f"routes {', '.join(m.id for m in d.permitted[:4]) or 'none permitted'}")
    flush = getattr(store, "flush", None)
    if callable(flush):
        flush()
    from kernelskill.kb.schema import FEATURE_NAMES

    feats = FeatureSummary(values={n: env[n] for n in FEATURE_NAMES if isinstance(env.get(n), bool | int)},
                           source="given")
    return QueryResult(
        kernel=str(kpath), task=str(kpath), static_only=True, features=feats,
        context={k_: v for k_, v in env.items() if k_ not in FEATURE_NAMES}, tier=decision.tier,
        bottleneck=decision.bottleneck, case=decision.case, permitted=permitted, forbidden=decision.forbidden,
        vetoes=decision.vetoes, trace=steps + decision.trace, notes=notes,
        timings_ms={"total": round((time.perf_counter() - t0) * 1000, 3)})


def rank_methods_for_task(store: Any, decision: Any, k: int) -> list[Any]:
    """A task route keeps the case's order (the route before the tactics): no similarity re-ranking."""
    from .ranking import rank_methods

    return rank_methods(store, decision.permitted, "", case_id=decision.case.id, k=k) if decision.permitted else []


# ------------------------------------------------------------------------------------------- --why
def _all_cases_and_methods(store: Any) -> tuple[list[Any], list[Any]]:
    real = store.store() if callable(getattr(store, "store", None)) else store  # a DiskReadsKB: the real store
    return list(real.cases()), list(store.methods())


def why_method(result: QueryResult, method: str, *, settings: Any = None, store: Any = None,
               cut: int | None = None, failed: Iterable[str] = ()) -> MethodWhy:
    """Why ``method`` is or is not in ``result`` (a :func:`query` answer), one reason per line with the values
    that decided it (docs/CONTRACTS.md, "Retrieval"). ``cut``: how many permitted methods the reader is
    shown (a rank beyond it is reported as below the cut); ``failed``: methods the run's memory filters."""
    from .why import explain

    if store is None:
        if settings is None:
            from kernelskill.config import load_settings

            settings = load_settings()
        store = _open_store(settings)
    cases, methods = _all_cases_and_methods(store)
    return explain(result, method, cases=cases, methods=methods, cut=cut, failed=failed)
