"""``kernelskill kb learn RUN...``: a run's verified improvements become learned evidence.

A verified improvement is an ``attempt`` the loop recorded with a method and a parent (an optimize step,
or the repair of one) that the reviewer accepted, that the harness judged correct, and whose time beats
its parent's by more than the timing noise (the larger of the two IQRs). A candidate that failed the
run's final re-verification on a fresh seed is not one; one that passed it is marked ``reverified``.

Each becomes a :class:`~kernelskill.kb.learned.LearnedRecord`: the method, what kind of kernel the parent
was (op family and static features from the query of the parent's source and profile, the bottleneck
and tier the run's own query saw, the case today's KB matches for the parent), the before/after files with their hashes, the speedup over the
parent and each variant's speedup over eager PyTorch (the harness times eager as its baseline), the
protocol, the GPU and the run id. Every run is read and checked before anything is written; then the
records go into the learned store in one write, and each run with records gets a proposals file.

A record whose method is not a KB id (a run without the KB names its techniques freely) is either mapped to
the KB method it is, with its score, or becomes a new method draft in the proposals file, with the run's
parent and child as its worked example (:mod:`kernelskill.pipeline.loop.method_drafts`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from kernelskill.errors import KernelskillError
from kernelskill.kb.home import open_store
from kernelskill.kb.learned import (
    LearnedRecord,
    LearnedStore,
    kernel_text,
    proposal_yaml,
    record_id,
    source_hash,
)
from kernelskill.kb.schema import Method
from kernelskill.pipeline.loop.method_drafts import (
    CodeIndex,
    MethodMapping,
    api_calls,
    change_record,
    change_text,
    draft_id,
    draft_method,
    method_title,
    rank_methods,
)
from kernelskill.pipeline.runs import Run, RunStore
from kernelskill.protocols import DEFAULT_PROTOCOL
from kernelskill.retrieval.api import query as kb_query

log = logging.getLogger(__name__)

PROPOSALS_DIR = "proposals"

#: (kernel, task, profile or None) -> a QueryResult as JSON
QueryFn = Callable[[Path, Path, Path | None], dict[str, Any]]


class RunLearning(BaseModel):
    """What one run gave: its records, and why the other accepted attempts were not improvements."""

    run_id: str
    path: str
    records: list[LearnedRecord] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)
    added: list[str] = Field(default_factory=list)
    proposals: str | None = None
    #: records whose method is not a KB id: the KB method each is, or the new method drafted for it
    mappings: list[MethodMapping] = Field(default_factory=list)
    drafts: list[dict[str, Any]] = Field(default_factory=list)  # Method items (the proposals file's methods)
    joins: dict[str, list[str]] = Field(default_factory=dict)  # case id -> drafts that should join it
    #: draft id -> its worked example's files (task.py, before.py, after.py), written beside the proposals
    draft_files: dict[str, dict[str, str]] = Field(default_factory=dict, exclude=True)


def _step_of(path: str | None) -> str | None:
    """``candidates/r01.repair.py`` -> ``r01.repair``."""
    if not path:
        return None
    name = Path(path).name
    return name[:-3] if name.endswith(".py") else name


def _evals(run: Run) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """(candidate path -> its round's eval result, step -> re-verification result)."""
    by_candidate: dict[str, dict[str, Any]] = {}
    verified: dict[str, dict[str, Any]] = {}
    for event in run.log.of_type("eval"):
        data = event.get("data") or {}
        result = data.get("result") if isinstance(data.get("result"), dict) else {}
        step = str(event.get("step") or "")
        if step.startswith("verify."):
            verified[step.removeprefix("verify.")] = result
        elif data.get("candidate"):
            by_candidate.setdefault(str(data["candidate"]), result)
    return by_candidate, verified


def _ok(result: dict[str, Any] | None) -> bool:
    return bool(result) and result.get("status") == "ok" and bool(result.get("correct")) and \
        isinstance(result.get("candidate_ms"), int | float) and result["candidate_ms"] > 0


def _label(value: Any, *keys: str) -> str | None:
    if isinstance(value, dict):
        return next((str(value[k]) for k in keys if value.get(k)), None)
    return str(value) if value else None


def _op_family(raw: dict[str, Any]) -> str | None:
    kernels = [k for k in raw.get("kernels") or [] if isinstance(k, dict)]
    chosen = next((k for k in kernels if k.get("target")), None) or next((k for k in kernels if k.get("dominant")),
                                                                          None)
    if chosen and chosen.get("op") and chosen["op"] != "other":
        return str(chosen["op"])
    family = (raw.get("context") or {}).get("op_family")
    return str(family) if family else (str(chosen["op"]) if chosen and chosen.get("op") else None)


def improvements(run: Run, *, query_fn: QueryFn, hardware: str | None = None) -> RunLearning:
    """The verified improvements of one run as learned records (nothing is written)."""
    manifest = run.manifest
    out = RunLearning(run_id=run.id, path=str(run.path))
    evals, verified = _evals(run)
    harness = manifest.get("harness") or {}
    for event in run.log.of_type("attempt"):
        a = event.get("data") or {}
        step, method, parent, cand = a.get("step"), a.get("method"), a.get("parent"), a.get("candidate")
        if not (a.get("accepted") and method and parent and cand):
            continue
        after, before = evals.get(cand), evals.get(parent)
        if not (_ok(after) and _ok(before)):
            out.skipped.append(f"{step}: the harness did not time both it and its parent as correct")
            continue
        assert after is not None and before is not None
        before_ms, after_ms = float(before["candidate_ms"]), float(after["candidate_ms"])
        noise = max(float(before.get("candidate_iqr_ms") or 0.0), float(after.get("candidate_iqr_ms") or 0.0))
        if before_ms - after_ms <= noise:
            out.skipped.append(f"{step}: {before_ms:.4f} -> {after_ms:.4f} ms is not faster than its parent "
                               f"beyond the timing noise ({noise:.4f} ms)")
            continue
        again = verified.get(str(step))
        if again is not None and not (again.get("status") == "ok" and again.get("correct")):
            out.skipped.append(f"{step}: failed the final re-verification ({again.get('status')})")
            continue
        out.records.append(_record(run, a, before, after, again, query_fn=query_fn, hardware=hardware,
                                   protocol=str(after.get("protocol") or harness.get("protocol") or DEFAULT_PROTOCOL),
                                   task_name=str(manifest.get("task_name") or "")))
    return out


def _record(run: Run, attempt: dict[str, Any], before: dict[str, Any], after: dict[str, Any],
            again: dict[str, Any] | None, *, query_fn: QueryFn, hardware: str | None, protocol: str,
            task_name: str) -> LearnedRecord:
    parent, cand = str(attempt["parent"]), str(attempt["candidate"])
    before_src, after_src = run.read(parent), run.read(cand)
    parent_step = _step_of(parent)
    recorded = run.log.find(f"query.{parent_step}", "query")
    seen = ((recorded or {}).get("data") or {}).get("result") or {}
    prof_event = run.log.find(f"profile.{parent_step}", "profile")
    csv = ((prof_event or {}).get("data") or {}).get("csv")
    profile = run.path / csv if csv and (run.path / csv).is_file() else None
    try:
        fresh = query_fn(run.path / parent, run.task_path, profile)
    except KernelskillError as exc:  # e.g. a profile this version cannot read: the static query instead
        log.warning("query of %s with its profile: %s; static only", parent, exc)
        fresh = query_fn(run.path / parent, run.task_path, None) if profile else {}
    features = (seen.get("features") or {}).get("values") or (fresh.get("features") or {}).get("values") or {}
    gpu = (after.get("details") or {}).get("gpu_name") or hardware or \
        f"unknown GPU ({run.manifest.get('arch') or 'arch not recorded'})"

    def vs_eager(result: dict[str, Any] | None) -> float | None:
        value = (result or {}).get("speedup")
        return round(float(value), 4) if isinstance(value, int | float) else None

    after_hash = source_hash(after_src)
    return LearnedRecord(
        id=record_id(run.id, str(attempt["step"]), after_hash), run_id=run.id, step=str(attempt["step"]),
        method=str(attempt["method"]), op_family=_op_family(seen) or _op_family(fresh),
        bottleneck=_label(seen.get("bottleneck"), "id", "name") or _label(fresh.get("bottleneck"), "id", "name"),
        tier=_label(seen.get("tier"), "name", "id") or _label(fresh.get("tier"), "name", "id"),
        case=_label(fresh.get("case"), "id") or _label(seen.get("case"), "id"),  # today's KB case: proposals edit it
        features={k: v for k, v in features.items() if isinstance(v, bool | int)}, task_name=task_name,
        before_file=parent, after_file=cand, before_hash=source_hash(before_src), after_hash=after_hash,
        before_source=before_src, after_source=after_src,
        before_ms=round(float(before["candidate_ms"]), 6), after_ms=round(float(after["candidate_ms"]), 6),
        before_iqr_ms=before.get("candidate_iqr_ms"), after_iqr_ms=after.get("candidate_iqr_ms"),
        speedup=round(float(before["candidate_ms"]) / float(after["candidate_ms"]), 4),
        before_vs_eager=vs_eager(before), after_vs_eager=vs_eager(after), reverified_vs_eager=vs_eager(again),
        reverified=again is not None, protocol=protocol, hardware=str(gpu),
    )


def learned_for(raw: dict[str, Any], kernel_source: str, settings: Any, *, per_method: int = 2
                ) -> dict[str, list[dict[str, Any]]]:
    """Learned evidence for each permitted method of a query (``raw``: QueryResult JSON) on the kernels most
    like this one: vector search over the learned store by the kernel's op, bottleneck and source."""
    store = LearnedStore(settings.kb_dir, embed_settings=settings.embed)
    methods = [m["id"] for m in raw.get("permitted") or [] if isinstance(m, dict) and m.get("id")]
    if not store.exists() or not methods:
        return {}
    text = kernel_text(kernel_source, _op_family(raw), _label(raw.get("bottleneck"), "id", "name"))
    hits = store.search(text, methods, per_method=per_method)
    return {m: [h.model_dump() for h in found] for m, found in hits.items()}


def _open_runs(settings: Any, runs: Sequence[str | Path]) -> list[Run]:
    store = RunStore(Path(settings.runs_dir))
    out = []
    for ref in runs:
        path = Path(ref)
        if path.exists() and not path.is_dir():
            raise KernelskillError(f"{path}: not a run folder (a file; give the run's folder or its id)")
        run = store.open(ref)
        run.manifest  # noqa: B018 - raises the one-line error of a broken manifest now, before any write
        out.append(run)
    return out


def learn_runs(settings: Any, runs: Sequence[str | Path], *, hardware: str | None = None,
               dry_run: bool = False) -> list[RunLearning]:
    """Learn from every run, all or nothing: each run is read and checked first, then the records of all
    of them are added to the learned store in one write, then each run's proposals file is written. Records
    whose method is not a KB id are mapped to a KB method or drafted as a new one (also in a dry run)."""
    opened = _open_runs(settings, runs)

    def query_fn(kernel: Path, task: Path, profile: Path | None) -> dict[str, Any]:
        return kb_query(kernel, task=task, profile=profile, settings=settings).model_dump(mode="json")

    results = [improvements(run, query_fn=query_fn, hardware=hardware) for run in opened]
    records = [r for res in results for r in res.records]
    if not records:
        return results
    kb = open_store(settings, read_only=True)
    try:
        cases = {c.id: c for c in kb.cases()}
        known = {m.id: m for m in kb.methods()}
        if any(r.method not in known for r in records):
            index = CodeIndex.of_store(kb)
            bottlenecks = {b.id for b in kb.bottlenecks()}
            taken = set(known)
            for run, res in zip(opened, results, strict=True):
                for rec in res.records:
                    if rec.method not in known:
                        _map_or_draft(run, rec, res, kb, index, known, bottlenecks, taken)
    finally:
        kb.close()
    if dry_run:
        return results
    added = set(LearnedStore(settings.kb_dir, embed_settings=settings.embed).add(records))
    for res in results:
        res.added = [r.id for r in res.records if r.id in added]
        if res.records:
            res.proposals = str(_write_proposal(Path(settings.home), res, cases))
    return results


def _map_or_draft(run: Run, rec: LearnedRecord, res: RunLearning, kb: Any, index: CodeIndex,
                  known: dict[str, Method], bottlenecks: set[str], taken: set[str]) -> None:
    """Map ``rec`` to the KB method it is (setting ``rec.kb_method``), or draft a new method into ``res``."""
    change = change_record(run, rec.step)
    ranked = rank_methods(kb, index, run_method=rec.method, text=change_text(rec.method, change.plan,
                                                                             change.rationale, change.summary),
                          before=rec.before_source, after=rec.after_source)
    best = ranked[0] if ranked else None
    mapping = MethodMapping(record_id=rec.id, step=rec.step, run_method=rec.method, maps_to=None, best=best,
                            runners_up=ranked[1:3])
    if best is not None and best.score >= mapping.threshold:
        mapping.maps_to = best.method
        rec.kb_method, rec.kb_method_score = best.method, best.score
        res.mappings.append(mapping)
        return
    same = next((d for d in res.drafts if d["provenance"]["source"].split(" step ")[0] == f"run {run.id}"
                 and d["name"] == method_title(rec.method)), None)
    nearest = known.get(best.method) if best is not None else None
    method_id = same["id"] if same is not None else draft_id(rec.method, taken)
    item = draft_method(rec, change, nearest, method_id=method_id, example_dir=f"examples/{run.id}/{method_id}",
                        run_id=run.id, api_calls=api_calls(rec.before_source, rec.after_source),
                        bottlenecks=bottlenecks)
    if same is not None:  # the run applied the same new method twice: one draft, both measurements
        same["evidence"].extend(item["evidence"])
        mapping.draft = method_id
        res.mappings.append(mapping)
        return
    try:
        Method.model_validate(item)
    except ValueError as exc:
        res.skipped.append(f"{rec.step}: no draft for {rec.method}: {' '.join(str(exc).split())[:300]}")
        return
    taken.add(method_id)
    mapping.draft = method_id
    res.mappings.append(mapping)
    res.draft_files[method_id] = {"task.py": run.task_path.read_text(encoding="utf-8"),
                                  "before.py": rec.before_source, "after.py": rec.after_source}
    res.drafts.append(item)
    if rec.case:
        res.joins.setdefault(rec.case, []).append(method_id)


def _write_proposal(home: Path, res: RunLearning, cases: dict[str, Any]) -> Path:
    """``<home>/proposals/<run>.yaml`` (and its drafts' worked examples under
    ``<home>/proposals/examples/<run>/<method>/``); left untouched when it already says the same."""
    folder = home / PROPOSALS_DIR
    for item in res.drafts:
        for name, text in res.draft_files.get(item["id"], {}).items():
            dest = folder / item["example"]["task"].rsplit("/", 1)[0] / name
            if not (dest.is_file() and dest.read_text(encoding="utf-8") == text):
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_text(text, encoding="utf-8")
    path = folder / f"{res.run_id}.yaml"
    text = proposal_yaml(res.run_id, res.records, cases, drafts=res.drafts, joins=res.joins,
                         mappings=[m.line() for m in res.mappings])
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path


__all__ = ["RunLearning", "improvements", "learn_runs", "learned_for"]
