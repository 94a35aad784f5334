"""The loop's two seams and their real implementations: :class:`HarnessEvaluator` (the GPU side,
through ``pipeline.harness``) and :class:`KBRetriever` (the KB side, through the query), plus the
normalised views the loop, the prompts and the reports read from what they return."""


import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from kernelskill.config import load_settings
from kernelskill.errors import KernelskillError
from kernelskill.pipeline.loop.advice import (
    FAMILY_NAMES,
    ROUTES_PER_FAMILY,
    FamilyAdvice,
    Route,
    TaskAdvice,
    measured_effect,
)
from kernelskill.pipeline.loop.examples import worked_example
from kernelskill.pipeline.loop.learning import learned_for
from kernelskill.pipeline.runs.gpu_pool import GPUJob, GPUPool, HarnessBackend
from kernelskill.retrieval.api import query
from kernelskill.retrieval.api import task_advice as retrieval_task_advice
from kernelskill.retrieval.kernels import task_calls
from kernelskill.retrieval.op_hints import load_rules as load_op_rules
from kernelskill.retrieval.profile import load_profile

log = logging.getLogger(__name__)


# Seams -----------------------------------------------------------------------------------------
class LoopEvaluator(Protocol):
    """The GPU side. Results are JSON dicts (EvalResult.to_dict(), ProfileResult.to_dict())."""

    def check(self) -> None: ...

    def evaluate(self, task: Path, candidate: Path, *, seed: int | None = None) -> dict[str, Any]: ...

    def profile(self, task: Path, candidate: Path) -> dict[str, Any]: ...


class Retriever(Protocol):
    """The KB side: ``kernelskill.query`` as a JSON dict (QueryResult.model_dump(mode="json")), under the run's
    ``protocol`` (its tolerances and library policy decide the vetoes) and ``precision`` (the dtype the task
    is evaluated in: ``task_dtype``, and with it the KB's precision vetoes)."""

    def query(self, kernel: Path, *, task: Path, profile: Path | None, protocol: str | None = None,
              precision: str | None = None) -> dict[str, Any]: ...

    def task_advice(self, task: Path, protocol: str | None = None, precision: str | None = None) -> TaskAdvice:
        """The KB's advice for the operations of ``task``'s reference, under ``protocol`` and ``precision``,
        before any kernel exists (the seed prompt's knowledge; :mod:`~kernelskill.pipeline.loop.advice`)."""
        ...

    def profile_numbers(self, profile: Path) -> dict[str, Any]:
        """The ``--knowledge profile`` arm's view of a profile: per kernel its measured counters, normalised, and
        nothing the KB adds (no tier, bottleneck, case or method); :func:`profile_numbers`."""
        ...


class HarnessEvaluator:
    """``kernelskill.pipeline.harness.evaluate`` / ``profile`` on this machine's GPU(s)."""

    def __init__(self, harness_settings: Any = None, cache_dir: str | Path | None = None) -> None:
        self.settings = harness_settings
        self.cache_dir = cache_dir  # the build cache `kernelskill eval` uses too (settings.cache_dir / "builds")

    def check(self) -> None:
        try:
            import torch
        except ImportError as exc:  # pragma: no cover
            raise KernelskillError("evaluator: torch is not installed") from exc
        if not torch.cuda.is_available():
            raise KernelskillError("evaluator: no CUDA device is visible (the harness needs a GPU; "
                                   "run the GPU steps on a GPU machine)")

    def _config(self, seed: int | None = None) -> Any:
        from kernelskill.pipeline.harness.config import eval_config

        values = self.settings.model_dump() if hasattr(self.settings, "model_dump") else dict(self.settings or {})
        return eval_config(values, seed=seed, cache_dir=str(self.cache_dir) if self.cache_dir else None)

    def evaluate(self, task: Path, candidate: Path, *, seed: int | None = None) -> dict[str, Any]:
        from kernelskill.pipeline.harness import evaluate

        result = evaluate(task, candidate, self._config(seed))
        return result.to_dict() if hasattr(result, "to_dict") else dict(result)

    def profile(self, task: Path, candidate: Path) -> dict[str, Any]:
        from kernelskill.pipeline.harness import profile

        result = profile(task, candidate, self._config())
        return result.to_dict() if hasattr(result, "to_dict") else dict(result)

    def evaluate_many(self, steps: Sequence[Any], *,
                      on_result: Callable[[int, dict[str, Any] | None, BaseException | None], None] | None = None
                      ) -> list[dict[str, Any] | None]:
        """A search round's candidates (``gpu_side.PendingStep``s) through the GPU pool: built side by side on
        the CPU first, then a worker per visible GPU; ``on_result(i, result, error)`` the moment each ends."""
        out: list[dict[str, Any] | None] = [None] * len(steps)

        def done(i: int, future: Any) -> None:
            error = future.exception()
            out[i] = None if error is not None else future.result()
            if on_result is not None:
                on_result(i, out[i], error)

        with GPUPool(HarnessBackend(lambda run_dir, seed: self._config(seed))) as pool:
            futures = []
            for i, s in enumerate(steps):
                future = pool.submit(GPUJob(kind="eval", task=s.run.path / s.request["task"],
                                            candidate=s.run.path / s.request["candidate"], run_dir=s.run.path,
                                            seed=s.request.get("seed"), tag=f"{s.run.id}:{s.request['step']}"))
                future.add_done_callback(lambda f, i=i: done(i, f))
                futures.append(future)
            for future in futures:
                future.exception()  # wait for every job (its callback has run by then)
        return out


class KBRetriever:
    """``kernelskill.query`` as JSON, each permitted method with its worked example attached (``example``:
    label, closeness to the task, before/after code; :func:`~kernelskill.pipeline.loop.examples.worked_example`),
    so the recorded query holds everything the prompts show and a resumed or moved run needs no KB files."""

    def __init__(self, settings: Any = None) -> None:
        self.settings = settings

    def query(self, kernel: Path, *, task: Path, profile: Path | None, protocol: str | None = None,
              precision: str | None = None) -> dict[str, Any]:
        settings = self.settings
        if protocol is not None or precision is not None:  # the run's, not this machine's default, decide the vetoes
            settings = ((settings if settings is not None else load_settings()).under_protocol(protocol)
                        .under_precision(precision))
        raw = query(kernel, task=task, profile=profile, settings=settings).model_dump(mode="json")
        for method in raw.get("permitted") or []:
            if method.get("examples"):
                method["example"] = worked_example(method["examples"], task)
        self._attach_learned(raw, kernel)
        return raw

    def profile_numbers(self, profile: Path) -> dict[str, Any]:
        return profile_numbers(profile)

    def task_advice(self, task: Path, protocol: str | None = None, precision: str | None = None) -> TaskAdvice:
        """The KB's advice for the operation families of ``task``'s reference ``forward`` (dominant first), under
        ``protocol`` (its vetoes decide which routes exist): :func:`kernelskill.retrieval.api.task_advice`, each
        family's first routes with guidance and measured effect, as the seed prompt shows them.

        The one place the loop asks retrieval for this: the prompts and the recorded runs keep their shape."""
        settings = (self.settings if self.settings is not None else load_settings()).under_precision(precision)
        proto = protocol or settings.harness.protocol
        try:
            advice = retrieval_task_advice(task, protocol=proto, settings=settings.under_protocol(proto))
        except KernelskillError as exc:  # an unreadable task was refused before the loop started; say why
            log.warning("task advice for %s: %s", task, exc)
            return TaskAdvice(protocol=str(proto), families=_task_families(task), note=f"no routes: {exc}")
        families = []
        for fam in advice.families:
            routes = []
            for permitted in fam.routes[:ROUTES_PER_FAMILY]:
                method = permitted.model_dump(mode="json")
                if method.get("examples"):
                    method["example"] = worked_example(method["examples"], task)
                routes.append(Route(method_id=method["id"], name=method.get("name") or "",
                                    guidance=" ".join(str(method.get("guidance") or "").split()),
                                    effect=measured_effect(method)))
            calls = ", ".join(fam.calls)
            families.append(FamilyAdvice(family=FAMILY_NAMES.get(fam.family, fam.family), routes=routes,
                                         evidence=f"{task.name}: Model.forward calls {calls}" if calls else ""))
        if not families:
            families = _task_families(task)
        return TaskAdvice(protocol=str(proto), families=families, note="; ".join(advice.notes))

    def _attach_learned(self, raw: dict[str, Any], kernel: Path) -> None:
        """Each permitted method's learned evidence on similar kernels (``learned``), when runs taught any."""
        settings = self.settings if self.settings is not None else load_settings()
        try:
            found = learned_for(raw, kernel.read_text(), settings)
        except Exception as exc:  # noqa: BLE001 - a broken learned store (DuckDB, Chroma) never stops a query
            log.warning("learned evidence left out: %s", exc)
            return
        for method in raw.get("permitted") or []:
            if found.get(method.get("id")):
                method["learned"] = found[method["id"]]


def _task_families(task: Path) -> list[FamilyAdvice]:
    """The operation families ``task``'s ``Model.forward`` runs, in order, each once with where it is called
    (retrieval's task-family rules over the forward's torch calls); none of them: elementwise."""
    groups = load_op_rules().task_families
    calls = task_calls(task)
    names = {n for n, _ in calls}
    out: dict[str, FamilyAdvice] = {}
    for name, line in calls:
        for group in groups:
            wanted = {str(c).lower() for c in group.get("calls", [])}
            also = {str(c).lower() for c in group.get("with", [])}
            if name not in wanted or (also and not also & names):
                continue
            family = FAMILY_NAMES.get(str(group["family"]), str(group["family"]))
            if family not in out:
                out[family] = FamilyAdvice(family=family, evidence=f"{task.name}:{line}: Model.forward calls {name}")
            break
    if "attention" in out:  # softmax and the matrix products of an attention are the attention
        out.pop("softmax", None)
        out.pop("GEMM", None)
    return list(out.values()) or [FamilyAdvice(family="elementwise",
                                               evidence=f"{task.name}: no GEMM, conv, attention, softmax, "
                                                        "normalization, reduction, scan or pooling call")]


def profile_numbers(profile: Path) -> dict[str, Any]:
    """A profile's measurements alone, for the ``--knowledge profile`` arm: each kernel (longest first) with its
    launches, total duration, share of the profiled time, grid and block, and its normalised counters
    (``retrieval.profile``'s field map: units fixed, launches averaged). No derived field, tier, bottleneck,
    case or method: what the counters say, without what the knowledge base reads into them."""
    prof = load_profile(profile)
    total = sum(k.total_duration_ns or 0.0 for k in prof.kernels)
    kernels = []
    for k in sorted(prof.kernels, key=lambda k: -(k.total_duration_ns or 0.0)):
        kernels.append({"name": k.base_name, "vendor": k.vendor, "launches": k.launches,
                        "duration_ns": k.total_duration_ns,
                        "share_pct": round(100.0 * (k.total_duration_ns or 0.0) / total, 1) if total else None,
                        "grid": k.grid_size, "block": k.block_size,
                        "fields": {f: v for f, v in sorted(k.fields.items()) if isinstance(v, int | float)}})
    return {"kernels": kernels, "launches": prof.launches}


# Normalised views of what the seams return ---------------------------------------------------------
#: stages of an evaluation that run the harness's own work (loading the task, the reference, the second
#: shape set's reference, the float64 check, timing): a timeout or out-of-memory there is not a bug in the
#: candidate's code, so it is not sent to the diagnoser
HARNESS_STAGES = frozenset({"start", "load_task", "device_facts", "build_reference", "reference_forward", "alt_shapes",
                            "precision_fp64", "timing"})
HARNESS_LIMITS = frozenset({"timeout", "oom"})


def stage_timings(details: dict[str, Any]) -> dict[str, float]:
    """Seconds spent in each stage of an evaluation, in order. The harness records when each stage began
    (``stage_times_s``, with ``end``); a worker killed for its time or memory leaves only its stage and its
    total (``worker_seconds``), and the stage it died in gets what is left of that total."""
    starts = details.get("stage_times_s") or {}
    begun = sorted(((str(k), float(v)) for k, v in starts.items() if isinstance(v, int | float) and k != "end"),
                   key=lambda kv: kv[1])
    end = starts.get("end")
    if not isinstance(end, int | float):
        end = details.get("worker_seconds")
    out: dict[str, float] = {}
    for i, (name, t0) in enumerate(begun):
        t1 = begun[i + 1][1] if i + 1 < len(begun) else end
        if isinstance(t1, int | float):
            out[name] = round(max(float(t1) - t0, 0.0), 3)
    stage = details.get("stage")
    if stage and stage not in out and isinstance(details.get("worker_seconds"), int | float):
        out[str(stage)] = round(float(details["worker_seconds"]) - sum(out.values()), 3)
    return out


def eval_view(raw: dict[str, Any]) -> dict[str, Any]:
    """The fields the loop, the prompts and the report rely on, whatever else the harness adds.
    ``harness_failure`` marks a timeout or out-of-memory in one of the harness's own stages."""
    status = str(raw.get("status") or "runtime_error")
    correct = bool(raw.get("correct", status == "ok")) and status == "ok"
    speed = raw.get("speedup")
    details = raw.get("details") if isinstance(raw.get("details"), dict) else {}
    stage = str(details.get("stage") or "")
    return {"status": status, "correct": correct,
            "speedup": float(speed) if isinstance(speed, int | float) and correct else None,
            "candidate_ms": raw.get("candidate_ms"), "baseline_ms": raw.get("baseline_ms"),
            "candidate_iqr_ms": raw.get("candidate_iqr_ms"), "baseline_iqr_ms": raw.get("baseline_iqr_ms"),
            "speedup_ci": _interval(raw.get("speedup_ci")) if correct else None,
            "message": str(raw.get("message") or "")[:2000], "build_log": str(raw.get("build_log") or "")[-4000:],
            "stage": stage, "stage_timings": stage_timings(details),
            "harness_failure": (status in HARNESS_LIMITS and stage in HARNESS_STAGES)
            or (status in HARNESS_LIMITS and details.get("harness_failure") is True)}


def _interval(value: Any) -> list[float] | None:
    """The harness's ``speedup_ci`` ([lo, hi], the 95 % interval of the speedup over eager) when well formed."""
    if isinstance(value, list | tuple) and len(value) == 2 and all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in value):
        return [float(value[0]), float(value[1])]
    return None


def query_view(raw: dict[str, Any]) -> dict[str, Any]:
    def _methods(items: Any, *keys: str) -> list[dict[str, Any]]:
        out = []
        for item in items or []:
            item = item if isinstance(item, dict) else {"id": str(item)}
            if item.get("id"):
                out.append({"id": item["id"], **{k: item.get(k) or "" for k in keys}})
        return out

    def _label(value: Any, *keys: str) -> str:
        if isinstance(value, dict):  # TierResult / BottleneckResult
            head = next((str(value[k]) for k in keys if value.get(k)), "unknown")
            return f"{head} ({value['reason']})" if value.get("reason") else head
        return str(value) if value else "unknown"

    case = raw.get("case")
    if isinstance(case, dict):
        case = ({"id": case.get("id") or "", "title": case.get("title") or "",
                 "rationale": case.get("rationale") or ""} if case.get("id") else None)
    return {"tier": _label(raw.get("tier"), "name", "id"), "bottleneck": _label(raw.get("bottleneck"), "name", "id"),
            "case": case or None, "static_only": bool(raw.get("static_only", False)),
            "permitted": _methods(raw.get("permitted"), "name", "guidance", "measured", "example", "learned"),
            "forbidden": _methods(raw.get("forbidden"), "reason"),
            "fields": profile_fields(raw.get("profile")), "kernels": raw.get("kernels") or [],
            # the strategic routes of the op that holds the time (ceilings, the roofline verdict) and the methods
            # the parent already applies: the planner weighs the route before the tactics
            "routes": raw.get("routes") if isinstance(raw.get("routes"), dict) else None,
            "applied": [a for a in raw.get("applied") or [] if isinstance(a, dict) and a.get("id")]}


def profile_fields(profile: Any) -> dict[str, float]:
    """Numeric normalised fields of a query's profile, wherever the QueryResult keeps them."""
    if not isinstance(profile, dict):
        return {}
    for key in ("fields", "normalized", "values", "derived"):
        if isinstance(profile.get(key), dict):
            merged = {**profile[key]}
            if isinstance(profile.get("derived"), dict):
                merged.update(profile["derived"])
            return {k: float(v) for k, v in merged.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    return {k: float(v) for k, v in profile.items() if isinstance(v, int | float) and not isinstance(v, bool)}


