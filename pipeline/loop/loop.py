"""The optimize loop: seed -> evaluate -> rounds of repair or (profile -> query -> plan -> optimize)
-> evaluate -> ... -> re-verify the best on fresh seeds -> best.py, trajectory.json, report.md.

Resumable by construction: the loop is a deterministic walk whose every step has a fixed id
(``r03.plan.1``, ``r03.eval``, ``profile.r02.optimize``; letters, digits, ``.``, ``_``, ``-`` only). Before a step runs, the run's event log is
asked for it; a recorded step is read back, never executed again (an LLM answer is never re-requested,
a GPU evaluation never re-run). A resumed run therefore walks the same path, rebuilding its memory,
until it reaches the first step that is not in the log.

Step kinds: ``llm`` (requests to the LLM), ``kb`` (knowledge-base queries; the LLM side of a split
run), ``gpu`` (evaluate and profile; the GPU side) and ``loop`` (decisions recorded for analysis).
``LoopOptions.stop_before`` ({"gpu"}, {"llm"}) makes the loop stop cleanly before the first
unrecorded step of that side (:class:`Paused`), so the run folder can move to the other machine.

The GPU and the knowledge base sit behind two small protocols, :class:`LoopEvaluator` and
:class:`Retriever`; :class:`HarnessEvaluator` and :class:`KBRetriever` are the real ones.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from kernelskill.config import LoopSettings
from kernelskill.errors import KernelskillError
from kernelskill.pipeline.harness.gpu_facts import prompt_gpu
from kernelskill.pipeline.loop.adapters import (
    LoopEvaluator,
    Retriever,
    eval_view,
    profile_numbers,
    query_view,
)
from kernelskill.pipeline.loop.agents import FREE_ARMS, Agents, PlanDecision
from kernelskill.pipeline.loop.llm import LLMClient
from kernelskill.pipeline.loop.memory import (
    HARNESS_FAILURE,
    Attempt,
    Memory,
    Repair,
    diff_summary,
    unified_diff,
)
from kernelskill.pipeline.loop.search import Candidate, Search, failed_reverification, search_enabled
from kernelskill.pipeline.runs import SIDE, Paused, Run, gpu_request, markdown_report, run_gpu_step
from kernelskill.pipeline.runs.report import spend
from kernelskill.retrieval.profile import ProfileError

__all__ = ["Paused", "Loop", "LoopOptions", "LoopResult"]

log = logging.getLogger(__name__)

#: consecutive candidates the harness could not evaluate in its own stages (a timeout or out-of-memory of the
#: reference, the second shape set or timing) before the run stops: the limit is the task's, not the code's
HARNESS_FAILURES_IN_A_ROW = 2

class LoopOptions(LoopSettings):
    """The ``[loop]`` settings (one field list: :class:`~kernelskill.config.LoopSettings`) plus what belongs
    to one invocation. All but ``stop_before`` are kept in the run's manifest, so a resume keeps them."""

    stop_before: list[str] = Field(default_factory=list)  # "gpu" and/or "llm"
    # a manifest written before the search existed resumes on the single path, whatever [loop] says now
    candidates_per_round: int = Field(default=1, ge=1)
    frontier: int = Field(default=1, ge=1)

    @classmethod
    def from_settings(cls, settings: LoopSettings, **overrides: Any) -> LoopOptions:
        """The settings with the given fields replaced (``None`` keeps the setting)."""
        return cls(**(settings.model_dump() | {k: v for k, v in overrides.items() if v is not None}))


class LoopResult(BaseModel):
    run_id: str
    status: str  # finished | paused
    best: dict[str, Any] | None = None
    verified: bool = False
    rounds_done: int = 0
    trajectory: list[dict[str, Any]] = Field(default_factory=list)
    paused_before: str | None = None
    tokens: int = 0
    cost_usd: float = 0.0


class Loop:
    def __init__(self, run: Run, llm: LLMClient, evaluator: LoopEvaluator, retriever: Retriever,
                 options: LoopOptions | None = None, *, gpu: dict[str, Any] | None = None,
                 on_progress: Callable[[dict[str, Any]], None] | None = None) -> None:
        llm.log = run.log  # one log object per run: one sequence, one index
        self.run = run
        self.llm = llm
        self.evaluator = evaluator
        self.retriever = retriever
        self.options = options or LoopOptions()
        self.agents = Agents(llm, gpu, candidate_format=self.options.candidate_format,
                             knowledge=self.options.knowledge)
        self.memory = Memory()
        self.candidates: dict[str, Candidate] = {}
        self.parent: Candidate | None = None
        self.task_source = run.task_path.read_text()
        self.on_progress = on_progress
        self.progress: dict[str, Any] = {"run": run.id, "round": 0, "rounds": self.options.rounds,
                                         "phase": "start", "best_speedup": None, "tokens": 0, "cost_usd": 0.0}
        self._round = 0
        self._device_seen: dict[str, Any] | None = None  # details["gpu"] of the last evaluation

    # step helpers ------------------------------------------------------------------------------
    def _phase(self, phase: str) -> None:
        self.progress.update(round=self._round, phase=phase, **self._spend(),
                             best_speedup=max((c.result.get("speedup") or 0.0 for c in self.candidates.values()
                                               if c.accepted), default=None))
        if self.on_progress is not None:
            self.on_progress(dict(self.progress))

    def _guard(self, kind: str, step: str, request: dict[str, Any] | None = None) -> None:
        side = SIDE[kind]
        if side in self.options.stop_before:
            raise Paused(step, side, request)

    def _gpu(self, request: dict[str, Any]) -> dict[str, Any]:
        """A GPU step: read back from the log, or (unless stopped before gpu) run and record it.
        The request is stdlib JSON, so the other machine of a split run can execute it alone."""
        event = self.run.log.find(request["step"], request["type"])
        if event is not None:
            data = event["data"]
        else:
            request = {**request, "round": self._round}  # so that the other machine records it in this round
            self._guard("gpu", request["step"], request)
            data = run_gpu_step(self.run, request, self.evaluator, round_=self._round)["data"]
        if request["type"] == "eval":
            self._track_device(data)
        return data

    def _track_device(self, data: dict[str, Any]) -> None:
        """The prompts describe the GPU that evaluated last (its name and measured facts), and say so when a run
        moved to another card; replayed steps update it in the same order, so a resumed run's prompts match."""
        facts = ((data.get("result") or {}).get("details") or {}).get("gpu")
        if not isinstance(facts, dict) or not facts.get("arch"):
            return
        contract = self.agents.gpu.get("contract")
        described = prompt_gpu(str(facts["arch"]), protocol=(contract or {}).get("name"), evaluated=facts,
                               previous=self._device_seen)
        if contract is not None:
            described["contract"] = contract  # the run's contract (with the loop's additions) stays as it was
        self.agents.gpu = described
        self._device_seen = facts

    def _recorded(self, kind: str, type_: str, step: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        event = self.run.log.find(step, type_)
        if event is not None:
            return event["data"]
        self._guard(kind, step)
        data = fn()
        return self.run.log.append(kind, type_, data, step=step, round_=self._round)["data"]

    def _note(self, type_: str, step: str, data: dict[str, Any]) -> None:
        """A loop decision, written once (a resumed run recomputes it and finds it there)."""
        if self.run.log.find(step, type_) is None:
            self.run.log.append("loop", type_, data, step=step, round_=self._round)

    # the loop ----------------------------------------------------------------------------------
    def execute(self) -> LoopResult:
        """Run (or continue) the loop; one process at a time per run."""
        with self.run.lock():
            return self._execute_locked()

    def _execute_locked(self) -> LoopResult:
        self.llm.before_request = lambda step: self._guard("llm", step)
        self._note("run_started", "run", {"options": self.options.model_dump(exclude={"stop_before"}),
                                          "model": self.llm.settings.model})
        try:
            return self._execute()
        except Paused as paused:
            self._phase("paused")
            last = self.run.log.events[-1] if self.run.log.events else {}
            if not (last.get("type") == "run_paused" and last["data"].get("before") == paused.step):
                self.run.log.append("loop", "run_paused", {"before": paused.step, "side": paused.side,
                                                           "request": paused.request}, round_=self._round)
            return LoopResult(run_id=self.run.id, status="paused", paused_before=f"{paused.side}:{paused.step}",
                              rounds_done=self._round, trajectory=self.trajectory(), **self._spend())

    def _execute(self) -> LoopResult:
        if search_enabled(self.options):  # K candidates per round from a frontier of F (pipeline/loop/search.py)
            Search(self).run()
            return self._finish()
        fix_target: Candidate | None = None
        repairs_in_chain = 0
        harness_failures = 0  # in a row
        self._round = 0
        self._new_candidate(self._generate(0))
        last = self.candidates.get("r00.generate")
        if last is not None and last.result.get("harness_failure"):
            harness_failures = 1
        elif last is not None and not last.result.get("correct"):
            fix_target = last
        for r in range(1, self.options.rounds + 1):
            self._round = r
            if fix_target is not None and repairs_in_chain < self.options.max_repairs:
                outcome = self._repair(r, fix_target)
                repairs_in_chain += 1
            elif self.parent is not None:
                outcome = self._optimize(r, self.parent)
                repairs_in_chain = 0
                if outcome == "stop":
                    break
            else:
                outcome = self._generate(r)
                repairs_in_chain = 0
            candidate = self._new_candidate(outcome)
            harness_failures = harness_failures + 1 if candidate and candidate.result.get("harness_failure") else 0
            if harness_failures >= HARNESS_FAILURES_IN_A_ROW:
                self._note("harness_gave_up", f"r{r:02d}", {
                    "failures": harness_failures, "stage": candidate.result.get("stage") if candidate else None,
                    "reason": "the harness could not evaluate candidates in its own stages; more rounds would "
                              "spend the budget on the same limit"})
                break
            if candidate is not None and candidate.result.get("harness_failure"):
                fix_target = None  # the harness's failure, not the candidate's: nothing to repair
                repairs_in_chain = 0
            elif candidate is not None and not candidate.result.get("correct"):
                if candidate.branch != "repair":
                    repairs_in_chain = 0
                fix_target = candidate
            elif candidate is not None:
                fix_target = None
                repairs_in_chain = 0
            if fix_target is not None and repairs_in_chain >= self.options.max_repairs:
                self._note("repairs_exhausted", f"r{r:02d}", {"candidate": fix_target.path})
                fix_target = None
                repairs_in_chain = 0
        return self._finish()

    # branches ------------------------------------------------------------------------------------
    def seed_advice(self, step: str) -> dict[str, Any] | None:
        """The KB's advice for the task's operations, for a generator step (the KB arm only; the ablation arms'
        seed prompt carries none). Asked once per run and recorded (``advice.task``, a kb step); a run recorded
        before the advice existed keeps its seed prompt as it was (its generator answer is in the log)."""
        if self.options.knowledge != "kb":
            return None
        if self.run.log.find("advice.task", "task_advice") is None and \
                self.run.log.find(f"{step}.1", "llm_call") is not None:
            return None

        def fetch() -> dict[str, Any]:
            ask = getattr(self.retriever, "task_advice", None)
            if ask is None:
                return {"advice": None, "error": "the retriever offers no task advice"}
            try:
                advice = ask(self.run.task_path, protocol=self.run.protocol, precision=self.run.precision)
            except KernelskillError as exc:  # a broken KB stops the query steps later; the seed goes on without
                log.warning("task advice: %s", exc)
                return {"advice": None, "error": str(exc)}
            if advice is None:
                return {"advice": None, "error": "the retriever offers no task advice"}
            return {"advice": advice.model_dump(mode="json") if hasattr(advice, "model_dump") else dict(advice)}

        return self._recorded("kb", "task_advice", "advice.task", fetch).get("advice")

    def _generate(self, r: int) -> tuple[str, Any, dict[str, Any]]:
        step = f"r{r:02d}.generate"
        self._phase("generate")
        advice = self.seed_advice(step)
        answer = self.agents.generate(step=step, round_=r, task_source=self.task_source, memory=self.memory.view(),
                                      advice=advice)
        return step, answer, {"branch": "generate", "parent": None}

    def _repair(self, r: int, target: Candidate) -> tuple[str, Any, dict[str, Any]]:
        step = f"r{r:02d}.repair"
        source = self.run.read(target.path)
        self._phase("diagnose")
        diagnosis = self.agents.diagnose(step=f"r{r:02d}.diagnose", round_=r, task_source=self.task_source,
                                         kernel_source=source, failure=target.result, memory=self.memory.view())
        self._note("diagnosis", f"r{r:02d}.diagnose", {"candidate": target.path, **diagnosis.model_dump()})
        self._phase("repair")
        answer = self.agents.repair(step=step, round_=r, task_source=self.task_source, kernel_source=source,
                                    failure=target.result, diagnosis=diagnosis, memory=self.memory.view())
        repair = Repair(round=r, candidate=target.path, error_class=diagnosis.error_class,
                        diagnosis=diagnosis.root_cause, fix=diagnosis.fix)
        self.memory.add_repair(repair)
        return step, answer, {"branch": "repair", "parent": target.parent, "method": target.method,
                              "repairs": target.path, "base_source": source}

    def _profile_and_query(self, parent: Candidate) -> dict[str, Any]:
        name = parent.step
        self._phase("profile")

        prof = self._gpu(gpu_request("profile", f"profile.{name}", parent.path))
        self._phase("query")

        def do_query() -> dict[str, Any]:
            profile_path = self.run.path / prof["csv"] if prof.get("csv") else None
            try:
                raw = self.retriever.query(self.run.path / parent.path, task=self.run.task_path,
                                           profile=profile_path, protocol=self.run.protocol,
                                           precision=self.run.precision)
            except ProfileError as exc:
                # the profile does not read (a counter ncu reported out of range): a fact about this parent's
                # profile, not a broken KB; the query goes on from the code alone and says so
                log.warning("profile of %s not used: %s", parent.path, exc)
                raw = self.retriever.query(self.run.path / parent.path, task=self.run.task_path, profile=None,
                                           protocol=self.run.protocol, precision=self.run.precision)
                return {"candidate": parent.path, "result": raw, "error": f"profile not used: {exc}"}
            except KernelskillError as exc:
                if "no kernel found" not in str(exc):  # a broken KB or store: stop, resumable once fixed
                    raise
                log.warning("query of %s: %s", parent.path, exc)  # a fact about this parent: record it
                return {"candidate": parent.path, "result": {}, "error": str(exc)}
            return {"candidate": parent.path, "result": raw}

        data = self._recorded("kb", "query", f"query.{name}", do_query)
        return query_view(data["result"]) | {"error": data.get("error")}

    def _profile_numbers(self, parent: Candidate) -> dict[str, Any]:
        """The ``profile`` arm: the parent profiled (the same gpu step as the KB arm's) and its counters read
        without the KB (``kb`` side step ``numbers.<step>``, so a split run records it where the query runs)."""
        self._phase("profile")
        prof = self._gpu(gpu_request("profile", f"profile.{parent.step}", parent.path))

        def read() -> dict[str, Any]:
            if not prof.get("csv"):
                return {"candidate": parent.path, "numbers": None,
                        "error": str(prof.get("message") or "no profile was captured")}
            read_numbers = getattr(self.retriever, "profile_numbers", None) or profile_numbers  # a plugin may lack it
            try:
                numbers = read_numbers(self.run.path / prof["csv"])
            except KernelskillError as exc:  # a profile that does not read is a fact about this parent
                log.warning("profile of %s: %s", parent.path, exc)
                return {"candidate": parent.path, "numbers": None, "error": str(exc)}
            return {"candidate": parent.path, "numbers": numbers}

        return self._recorded("kb", "profile_numbers", f"numbers.{parent.step}", read)

    def _optimize(self, r: int, parent: Candidate) -> tuple[str, Any, dict[str, Any]] | str:
        if self.options.knowledge in FREE_ARMS:
            return self._optimize_free(r, parent)
        query = self._profile_and_query(parent)
        grand = self._by_path(parent.parent)
        if grand is not None and query["fields"]:
            parent_query = self.run.log.find(f"query.{grand.step}", "query")
            if parent_query is not None:
                self.memory.set_profile_deltas(parent.path, query_view(parent_query["data"]["result"])["fields"],
                                               query["fields"])
        permitted = query["permitted"]
        if not permitted:
            self._note("no_permitted_method", f"r{r:02d}.plan", {"parent": parent.path, "query": query})
            return "stop"
        failed = self.memory.failed_methods(parent.path)
        offered = [m for m in permitted if m["id"] not in failed]
        filtered = {m["id"]: failed[m["id"]] for m in permitted if m["id"] in failed}
        if not offered:
            offered, filtered = permitted, {}
            self._note("all_methods_failed", f"r{r:02d}.plan", {"parent": parent.path, "offered_again": True})
        self._phase("plan")
        plan: PlanDecision = self.agents.plan(
            step=f"r{r:02d}.plan", round_=r, task_source=self.task_source, kernel_source=self.run.read(parent.path),
            parent_speedup=parent.result.get("speedup") or 0.0, query=query, permitted=offered, filtered=filtered,
            memory=self.memory.view(), reasks=self.options.reask_planner, parent_ci=parent.result.get("speedup_ci"))
        self._note("plan", f"r{r:02d}.plan", {"parent": parent.path, "offered": [m["id"] for m in offered],
                                              "filtered": filtered, **plan.model_dump()})
        method = next(m for m in offered if m["id"] == plan.method)
        self._phase("optimize")
        source = self.run.read(parent.path)
        answer = self.agents.optimize(step=f"r{r:02d}.optimize", round_=r, task_source=self.task_source,
                                      kernel_source=source, method=method, plan=plan, memory=self.memory.view())
        return f"r{r:02d}.optimize", answer, {"branch": "optimize", "parent": parent.path, "method": plan.method,
                                              "plan": plan.plan, "base_source": source}

    def _optimize_free(self, r: int, parent: Candidate) -> tuple[str, Any, dict[str, Any]]:
        """The ablation arms (``knowledge: none`` and ``profile``): no query; the planner names any technique
        (its answer is checked for shape only) and the writer gets the plan without KB guidance. The ``profile``
        arm profiles the parent and shows the planner its counters (no KB content)."""
        numbers = self._profile_numbers(parent) if self.options.knowledge == "profile" else None
        self._phase("plan")
        source = self.run.read(parent.path)
        failed = self.memory.failed_methods(parent.path)
        query = {"profile_numbers": numbers.get("numbers"), "profile_error": numbers.get("error")} if numbers else {}
        plan: PlanDecision = self.agents.plan(
            step=f"r{r:02d}.plan", round_=r, task_source=self.task_source, kernel_source=source,
            parent_speedup=parent.result.get("speedup") or 0.0, query=query, permitted=[], filtered=failed,
            memory=self.memory.view(), reasks=self.options.reask_planner, parent_ci=parent.result.get("speedup_ci"))
        self._note("plan", f"r{r:02d}.plan", {"parent": parent.path, "offered": [], "filtered": failed,
                                              "knowledge": self.options.knowledge, **plan.model_dump()})
        self._phase("optimize")
        method = {"id": plan.method, "name": "", "guidance": ""}
        answer = self.agents.optimize(step=f"r{r:02d}.optimize", round_=r, task_source=self.task_source,
                                      kernel_source=source, method=method, plan=plan, memory=self.memory.view())
        return f"r{r:02d}.optimize", answer, {"branch": "optimize", "parent": parent.path, "method": plan.method,
                                              "plan": plan.plan, "base_source": source}

    # candidates ------------------------------------------------------------------------------------
    def _new_candidate(self, outcome: tuple[str, Any, dict[str, Any]] | str) -> Candidate | None:
        assert not isinstance(outcome, str)
        step, answer, meta = outcome
        r = self._round
        base_source = meta.pop("base_source", None)
        repairs = meta.pop("repairs", None)
        if answer.code is None:
            attempt = Attempt(round=r, step=step, candidate=None, parent=meta.get("parent"), branch=meta["branch"],
                              derived_from=repairs or meta.get("parent"),
                              method=meta.get("method"), plan=meta.get("plan"), result_class="invalid_output",
                              review=answer.reason)
            self.memory.add_attempt(attempt)
            if repairs and self.memory.repairs:
                self.memory.repairs[-1].outcome = "invalid_output"
            self._note("attempt", f"r{r:02d}", {**attempt.model_dump(), "reason": answer.reason})
            return None
        rel = self.run.write_candidate(step, answer.code)
        self._phase("evaluate")
        data = self._gpu(gpu_request("eval", f"r{r:02d}.eval", rel))
        result = eval_view(data["result"])
        result_class = HARNESS_FAILURE if result["harness_failure"] else result["status"]
        cand = Candidate(step=step, path=rel, round=r, branch=meta["branch"], parent=meta.get("parent"),
                         method=meta.get("method"), result=result)
        self.candidates[step] = cand
        if repairs and self.memory.repairs:
            self.memory.repairs[-1].outcome = result_class
        if result["harness_failure"]:
            self._note("harness_failure", f"r{r:02d}.eval", {
                "candidate": rel, "status": result["status"], "stage": result["stage"],
                "stage_timings": result["stage_timings"], "message": result["message"]})
        self._phase("review")
        parent_view = None
        diff = ""
        if self.parent is not None:
            parent_view = {"step": self.parent.step, "result": self.parent.result}
            diff = unified_diff(self.run.read(self.parent.path), answer.code, before_name=self.parent.path,
                                after_name=rel)
        decision = self.agents.review(step=f"r{r:02d}.review", round_=r, task_source=self.task_source,
                                      candidate={"step": step, "branch": cand.branch, "method": cand.method},
                                      result=result, parent=parent_view, memory=self.memory.view(), diff=diff)
        cand.accepted = decision.accept
        cand.rejected_by_review = decision.by == "reviewer" and not decision.accept
        attempt = Attempt(round=r, step=step, candidate=rel, parent=cand.parent, branch=cand.branch,
                          derived_from=repairs or cand.parent, method=cand.method, plan=meta.get("plan"),
                          diff_summary=diff_summary(base_source, answer.code), result_class=result_class,
                          correct=result["correct"], speedup=result["speedup"], accepted=decision.accept,
                          review=decision.reason)
        self.memory.add_attempt(attempt)
        if decision.accept and not failed_reverification(self.run, cand.step):
            self.parent = self._choose_parent(cand)
        self._note("attempt", f"r{r:02d}", {**attempt.model_dump(), "review_by": decision.by,
                                             "speed_decision": decision.speed.model_dump() if decision.speed else None,
                                             "asks": answer.asks, "parent_after": self.parent.path if self.parent else None})
        return cand

    def _by_path(self, path: str | None) -> Candidate | None:
        return next((c for c in self.candidates.values() if c.path == path), None) if path else None

    def _choose_parent(self, accepted: Candidate) -> Candidate:
        if self.options.parent_rule == "latest_improving" or self.parent is None:
            return accepted
        pool = [c for c in self.candidates.values() if c.accepted and not failed_reverification(self.run, c.step)]
        return max(pool, key=lambda c: (c.result.get("speedup") or 0.0, c.round))

    # the end -----------------------------------------------------------------------------------------
    def final_candidates(self) -> list[Candidate]:
        """Who may be the run's final pick, fastest first: every correct candidate (accepted as a parent or not:
        a gain within noise of its parent is still a correct kernel at its measured speed), except those the
        code review rejected as suspect; earlier round, then step, on a tie."""
        pool = [c for c in self.candidates.values() if c.result.get("correct") and not c.rejected_by_review]
        return sorted(pool, key=lambda c: (-(c.result.get("speedup") or 0.0), c.round, c.step))

    def _finish(self) -> LoopResult:
        """The final pick: the fastest candidate whose re-verification on a fresh seed passed (up to
        ``verify_candidates`` of the fastest are tried, in order)."""
        self._phase("verify")
        best: Candidate | None = None
        verified: dict[str, Any] | None = None
        for cand in self.final_candidates()[: max(1, self.options.verify_candidates)]:
            data = self._gpu(gpu_request("eval", f"verify.{cand.step}", cand.path, seed=self.options.verify_seed))
            verified = eval_view(data["result"])
            if verified["correct"]:
                best = cand
                break
            self._note("verify_failed", f"verify.{cand.step}", {  # harness_failure: the harness's limit, not the code
                "candidate": cand.path, "status": verified["status"], "harness_failure": verified["harness_failure"],
                "stage": verified["stage"], "stage_timings": verified["stage_timings"]})
        self._phase("report")
        summary: dict[str, Any] | None = None
        if best is not None and verified is not None:
            summary = {"candidate": best.path, "step": best.step, "round": best.round, "method": best.method,
                       "speedup": best.result.get("speedup"), "verified_speedup": verified.get("speedup"),
                       "verified_speedup_ci": verified.get("speedup_ci"), "verify_step": f"verify.{best.step}",
                       "accepted": best.accepted,
                       "candidate_ms": best.result.get("candidate_ms"), "baseline_ms": best.result.get("baseline_ms")}
            header = (f"# kernelskill run {self.run.id}: best candidate {best.step} "
                      f"(speedup {best.result.get('speedup')}x, re-verified {verified.get('speedup')}x on seed "
                      f"{self.options.verify_seed})\n")
            self.run.write_output("best.py", header + self.run.read(best.path))
        trajectory = self.trajectory()
        self.run.write_output("trajectory.json", json.dumps(trajectory, indent=2) + "\n")
        result = LoopResult(run_id=self.run.id, status="finished", best=summary, verified=best is not None,
                            rounds_done=self._round, trajectory=trajectory, **self._spend())
        self._note("run_finished", f"finish.{self._round:02d}", {"best": summary, "verified": best is not None,
                                                                  "rounds": self._round, **self._spend()})
        self.run.write_output("report.md", markdown_report(self.run))
        self._phase("done")
        return result

    def _spend(self) -> dict[str, Any]:
        return spend([e["data"] for e in self.run.log.of_type("llm_call")])

    def trajectory(self) -> list[dict[str, Any]]:
        return [a.model_dump(exclude={"profile_deltas"}) | {"profile_deltas": a.profile_deltas}
                for a in self.memory.attempts]
