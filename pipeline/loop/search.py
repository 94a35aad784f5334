"""The search: K candidates per round from a frontier of the F best correct candidates, evaluated as one batch.

Each round spreads its K slots over the frontier members (best first, round-robin), asks the planner once per
member for that many plans (``r03.plan.p1.1``), writes one candidate per plan (``r03.optimize.k2``), evaluates
them together (``r03.eval.k2``; through the evaluator's ``evaluate_many`` when it has one), reviews each
against its own parent (``r03.review.k2``) and repairs each broken one up to ``repairs_per_candidate`` times
in waves (``r03.diagnose1.k2``, ``r03.repair1.k2``, ``r03.eval.repair1.k2``). A round ends with a ``round``
note (candidates, correct, best, the methods that paid, the frontier after it).

Every step id is fixed by the round, the slot and the wave, so a resumed run walks the same path and reads its
steps back. Within a phase every step is tried before the run pauses: with the ``exchange`` provider all K
prompts of a round are posted at once, and a run stopped before the GPU pauses with the whole batch in its
request (``batch``), which the GPU side evaluates together.

The memory is shared by the frontier: a method that failed on a member is not offered to it again, and a
method that paid on one member is offered first (and named) to the others.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import BaseModel, Field

from kernelskill.pipeline.loop.adapters import eval_view
from kernelskill.pipeline.loop.agents import FREE_ARMS, CodeAnswer, PlanDecision
from kernelskill.pipeline.loop.memory import HARNESS_FAILURE, Attempt, Repair, diff_summary, unified_diff
from kernelskill.pipeline.loop.planning import plan_many
from kernelskill.pipeline.runs import Paused, gpu_request, run_gpu_step
from kernelskill.pipeline.runs.gpu_side import PendingStep
from kernelskill.pipeline.runs.gpu_steps import Measured

log = logging.getLogger(__name__)

#: LLM steps of one phase (a round's plans, candidates, reviews, diagnoses, repairs) in flight at once
LLM_IN_FLIGHT = 8

#: rounds in a row whose every evaluated candidate hit a limit of the harness's own stages before the run stops
HARNESS_ROUNDS_IN_A_ROW = 2


class Candidate(BaseModel):
    step: str
    path: str  # relative to the run folder
    round: int
    branch: str
    parent: str | None = None
    method: str | None = None
    result: dict[str, Any] = Field(default_factory=dict)
    accepted: bool = False
    rejected_by_review: bool = False  # the code review suspected a cheat: never a parent, never the final pick


def failed_reverification(run: Any, step: str) -> bool:
    """True when the run's log holds a re-verification of ``step`` that the candidate itself failed (a harness
    limit does not count). Such a record exists only when a finished run was resumed with more rounds: its
    result did not hold on a fresh seed, so it is no parent and no frontier member."""
    event = run.log.find(f"verify.{step}", "eval")
    if event is None:
        return False
    result = eval_view((event.get("data") or {}).get("result") or {})
    return not result["correct"] and not result["harness_failure"]


def search_enabled(options: Any) -> bool:
    return options.candidates_per_round > 1 or options.frontier > 1


def spread(slots: int, members: int) -> list[int]:
    """How many of ``slots`` candidates each of ``members`` frontier members gets (best first)."""
    return [slots // members + (1 if i < slots % members else 0) for i in range(members)]


def _accepts(fn: Any, name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # pragma: no cover - a builtin
        return False


class Slot(BaseModel):
    """One candidate of a round in the making."""

    step: str  # r03.optimize.k2 | r03.generate.k1 | r03.repair1.k2
    tag: str  # k2 | repair1.k2: the suffix of its eval and review steps
    branch: str
    parent: str | None = None
    method: str | None = None
    plan: str | None = None
    decision: PlanDecision | None = None
    method_info: dict[str, Any] | None = None  # the offered method (guidance, example) the writer is shown
    base_source: str | None = None
    repairs: str | None = None  # the broken candidate a repair starts from
    answer: CodeAnswer | None = None
    candidate_path: str | None = None
    candidate: Candidate | None = None


class Search:
    """Runs rounds 0..N of a search-mode loop over the :class:`~kernelskill.pipeline.loop.loop.Loop`'s
    own step helpers (``_gpu``, ``_note``, ``_phase``, ``_profile_and_query``), memory and agents."""

    def __init__(self, loop: Any) -> None:
        self.loop = loop
        self.options = loop.options

    # helpers ---------------------------------------------------------------------------------------
    def collect(self, calls: list[Callable[[], Any]], *, llm: bool = False) -> list[Any]:
        """Call each; a call that pauses does not stop the others (so every request of the phase is posted);
        the first pause (in call order) is raised after all were tried, carrying every GPU request of the phase.
        ``llm``: the calls are independent LLM steps (they neither read nor change what the others change), sent
        side by side to an API provider; the answers land in call order whatever order they come back in."""
        def attempt(call: Callable[[], Any]) -> tuple[Any, Paused | None]:
            try:
                return call(), None
            except Paused as exc:
                return None, exc

        if llm and len(calls) > 1 and getattr(self.loop.llm, "provider", None) == "openai":
            with ThreadPoolExecutor(max_workers=min(len(calls), LLM_IN_FLIGHT)) as pool:
                done = list(pool.map(attempt, calls))  # an exception other than a pause is raised here
        else:
            done = [attempt(call) for call in calls]
        out = [value for value, _ in done]
        paused = [exc for _, exc in done if exc is not None]
        if paused:
            first = paused[0]
            gpu = [p.request for p in paused if p.side == "gpu" and p.request]
            if first.side == "gpu" and len(gpu) > 1:
                raise Paused(first.step, "gpu", {**gpu[0], "batch": gpu})
            raise first
        return out

    def frontier(self) -> list[Candidate]:
        """The best F correct candidates (fastest first; earlier round, then step, on a tie); a candidate the code
        review rejected as suspect is none."""
        pool = [c for c in self.loop.candidates.values() if c.result.get("correct") and not c.rejected_by_review
                and not failed_reverification(self.loop.run, c.step)]
        pool.sort(key=lambda c: (-(c.result.get("speedup") or 0.0), c.round, c.step))
        return pool[: self.options.frontier]

    def lineage(self, member: Candidate) -> set[str]:
        """The methods that made ``member`` and its ancestors (already in its code: not offered as news)."""
        out: set[str] = set()
        node: Candidate | None = member
        while node is not None:
            if node.method:
                out.add(node.method)
            node = self.loop._by_path(node.parent)
        return out

    def evaluate_batch(self, slots: list[Slot]) -> list[dict[str, Any]]:
        """Evaluate the slots' candidates as one batch; each result is recorded the moment it is measured."""
        loop = self.loop
        r = loop._round
        requests = [gpu_request("eval", f"r{r:02d}.eval.{s.tag}", s.candidate_path or "") for s in slots]
        todo = [{**q, "round": r} for q in requests if loop.run.log.find(q["step"], "eval") is None]
        many = getattr(loop.evaluator, "evaluate_many", None)
        if todo and many is not None and len(todo) > 1 and "gpu" not in self.options.stop_before:
            lock = threading.Lock()

            def record(i: int, result: dict[str, Any] | None, error: BaseException | None) -> None:
                if error is None and result is not None:
                    with lock:  # the log is fsync'd per event: a kill loses nothing measured
                        run_gpu_step(loop.run, todo[i], Measured(result), round_=r)

            steps = [PendingStep(loop.run, q) for q in todo]
            try:
                if _accepts(many, "on_result"):
                    many(steps, on_result=record)
                else:
                    for i, result in enumerate(many(steps)):
                        record(i, result, None)
            except Paused:
                raise
            except Exception as exc:  # noqa: BLE001 - the batch failed as a whole: what it left, one at a time
                log.warning("the batch of %d evaluations failed (%s); the rest one at a time", len(steps), exc)
        # what the batch left (or every step, without evaluate_many): one at a time, or the pause with all of them
        return self.collect([lambda q=q: loop._gpu(q) for q in requests])

    # rounds ------------------------------------------------------------------------------------------
    def run(self) -> None:
        loop = self.loop
        loop._round = 0
        seed = loop._new_candidate(loop._generate(0))
        if seed is not None:
            self.repair_waves([seed])
        self.round_note(0)
        harness_rounds = 0
        for r in range(1, self.options.rounds + 1):
            loop._round = r
            frontier = self.frontier()
            if frontier:
                slots = self.plan_round(r, frontier)
                if not slots:
                    break  # no member has a permitted method left: noted per member
            else:
                slots = [Slot(step=f"r{r:02d}.generate.k{j}", tag=f"k{j}", branch="generate")
                         for j in range(1, self.options.candidates_per_round + 1)]
            self.write(slots, "optimize" if frontier else "generate")
            made = self.judge(slots)
            made += self.repair_waves([c for c in made if c is not None])
            self.round_note(r)
            evaluated = [c for c in made if c is not None]
            harness_rounds = harness_rounds + 1 if evaluated and all(
                c.result.get("harness_failure") for c in evaluated) else 0
            if harness_rounds >= HARNESS_ROUNDS_IN_A_ROW:
                loop._note("harness_gave_up", f"r{r:02d}", {
                    "failures": harness_rounds, "stage": evaluated[-1].result.get("stage"),
                    "reason": "every candidate of the last rounds hit a limit of the harness's own stages"})
                break

    def plan_round(self, r: int, frontier: list[Candidate]) -> list[Slot]:
        loop = self.loop
        counts = spread(self.options.candidates_per_round, len(frontier))
        members = [(i, m, n) for i, (m, n) in enumerate(zip(frontier, counts, strict=True), start=1) if n]
        if self.options.knowledge == "profile":  # the counters, no KB content
            numbers = self.collect([lambda m=m: loop._profile_numbers(m) for _, m, _ in members])
            queries: list[Any] = [{"permitted": [], "fields": {}, "profile_numbers": n.get("numbers"),
                                   "profile_error": n.get("error")} for n in numbers]
        elif self.options.knowledge == "none":
            queries = [{"permitted": [], "fields": {}} for _ in members]
        else:
            queries = self.collect([lambda m=m: loop._profile_and_query(m) for _, m, _ in members])
        memory = loop.memory.view()
        loop._phase("plan")

        def plan(i: int, member: Candidate, n: int, query: dict[str, Any]) -> list[Slot]:
            step = f"r{r:02d}.plan.p{i}"
            free = self.options.knowledge in FREE_ARMS
            permitted = query.get("permitted") or []
            if not free and not permitted:
                loop._note("no_permitted_method", step, {"parent": member.path, "query": query})
                return []
            failed = loop.memory.failed_methods(member.path)
            paid = {k: v for k, v in loop.memory.paid_methods(member.path).items() if k not in self.lineage(member)}
            offered = [m for m in permitted if m["id"] not in failed]
            filtered = {m["id"]: failed[m["id"]] for m in permitted if m["id"] in failed}
            if free:
                filtered = failed
            elif not offered:
                offered, filtered = permitted, {}
                loop._note("all_methods_failed", step, {"parent": member.path, "offered_again": True})
            # what paid on another member first, then the ranked order
            offered = ([m for m in offered if m["id"] in paid] + [m for m in offered if m["id"] not in paid])
            paid = {k: v for k, v in paid.items() if free or k in {m["id"] for m in offered}}
            source = loop.run.read(member.path)
            plans = plan_many(loop.agents, step=step, round_=r, wanted=n, task_source=loop.task_source,
                              kernel_source=source, parent_speedup=member.result.get("speedup") or 0.0,
                              query=query if not free else {k: v for k, v in query.items()
                                                             if k.startswith("profile_")}, permitted=offered, filtered=filtered, paid=paid,
                              memory=memory, reasks=self.options.reask_planner,
                              parent_ci=member.result.get("speedup_ci"))
            loop._note("plan", step, {"parent": member.path, "offered": [m["id"] for m in offered],
                                      "filtered": filtered, "paid_elsewhere": paid, "wanted": n,
                                      **({"knowledge": self.options.knowledge} if free else {}),
                                      **plans.model_dump()})
            by_id = {m["id"]: m for m in offered}
            return [Slot(step="", tag="", branch="optimize", parent=member.path, method=p.method, plan=p.plan,
                         decision=p, method_info=by_id.get(p.method), base_source=source) for p in plans.plans]

        per_member = self.collect([lambda i=i, m=m, n=n, q=q: plan(i, m, n, q)
                                   for (i, m, n), q in zip(members, queries, strict=True)], llm=True)
        slots = [s for group in per_member for s in group]
        for j, s in enumerate(slots, start=1):
            s.step, s.tag = f"r{r:02d}.optimize.k{j}", f"k{j}"
        return slots

    def write(self, slots: list[Slot], branch: str) -> None:
        """One code step per slot; all are asked before any pause."""
        loop = self.loop
        memory = loop.memory.view()
        loop._phase(branch)
        advice = loop.seed_advice(slots[0].step) if branch == "generate" and slots else None

        def one(s: Slot) -> None:
            if s.branch == "generate":
                s.answer = loop.agents.generate(step=s.step, round_=loop._round, task_source=loop.task_source,
                                                memory=memory, advice=advice)
                return
            method = s.method_info or {"id": s.method, "name": "", "guidance": ""}
            assert s.decision is not None
            s.answer = loop.agents.optimize(step=s.step, round_=loop._round, task_source=loop.task_source,
                                            kernel_source=s.base_source or "", method=method, plan=s.decision,
                                            memory=memory)

        self.collect([lambda s=s: one(s) for s in slots], llm=True)

    def judge(self, slots: list[Slot]) -> list[Candidate | None]:
        """Store, evaluate (one batch), review and remember the slots' candidates, in slot order."""
        loop = self.loop
        r = loop._round
        with_code = []
        for s in slots:
            assert s.answer is not None
            if s.answer.code is None:
                attempt = Attempt(round=r, step=s.step, candidate=None, parent=s.parent, branch=s.branch,
                                  derived_from=s.repairs or s.parent, method=s.method, plan=s.plan,
                                  result_class="invalid_output", review=s.answer.reason)
                loop.memory.add_attempt(attempt)
                self._repair_outcome(s, "invalid_output")
                loop._note("attempt", s.step, {**attempt.model_dump(), "reason": s.answer.reason})
                continue
            s.candidate_path = loop.run.write_candidate(s.step, s.answer.code)
            with_code.append(s)
        loop._phase("evaluate")
        datas = self.evaluate_batch(with_code) if with_code else []
        memory = loop.memory.view()
        loop._phase("review")
        for s, data in zip(with_code, datas, strict=True):
            result = eval_view(data["result"])
            s.candidate = Candidate(step=s.step, path=s.candidate_path or "", round=r, branch=s.branch,
                                    parent=s.parent, method=s.method, result=result)
            loop.candidates[s.step] = s.candidate
            if result["harness_failure"]:
                loop._note("harness_failure", f"r{r:02d}.eval.{s.tag}", {
                    "candidate": s.candidate.path, "status": result["status"], "stage": result["stage"],
                    "stage_timings": result["stage_timings"], "message": result["message"]})

        def review(s: Slot) -> Any:
            assert s.candidate is not None
            parent = loop._by_path(s.parent)
            parent_view = {"step": parent.step, "result": parent.result} if parent is not None else None
            diff = (unified_diff(loop.run.read(parent.path), s.answer.code if s.answer else None,
                                 before_name=parent.path, after_name=s.candidate.path) if parent is not None else "")
            return loop.agents.review(step=f"r{r:02d}.review.{s.tag}", round_=r, task_source=loop.task_source,
                                      candidate={"step": s.step, "branch": s.branch, "method": s.method},
                                      result=s.candidate.result, parent=parent_view, memory=memory, diff=diff)

        decisions = self.collect([lambda s=s: review(s) for s in with_code], llm=True)
        for s, decision in zip(with_code, decisions, strict=True):
            cand = s.candidate
            assert cand is not None and s.answer is not None
            result = cand.result
            result_class = HARNESS_FAILURE if result["harness_failure"] else result["status"]
            cand.accepted = decision.accept
            cand.rejected_by_review = decision.by == "reviewer" and not decision.accept
            self._repair_outcome(s, result_class)
            attempt = Attempt(round=r, step=s.step, candidate=cand.path, parent=cand.parent, branch=cand.branch,
                              derived_from=s.repairs or cand.parent, method=cand.method, plan=s.plan,
                              diff_summary=diff_summary(s.base_source, s.answer.code), result_class=result_class,
                              correct=result["correct"], speedup=result["speedup"], accepted=decision.accept,
                              review=decision.reason)
            loop.memory.add_attempt(attempt)
            front = self.frontier()
            loop.parent = front[0] if front else loop.parent
            loop._note("attempt", s.step, {**attempt.model_dump(), "review_by": decision.by, "asks": s.answer.asks,
                                           "speed_decision": decision.speed.model_dump() if decision.speed else None,
                                           "parent_after": loop.parent.path if loop.parent else None,
                                           "frontier_after": [c.path for c in front]})
        return [s.candidate for s in slots]

    def _repair_outcome(self, s: Slot, result_class: str) -> None:
        if s.repairs:
            for rep in reversed(self.loop.memory.repairs):
                if rep.candidate == s.repairs:
                    rep.outcome = result_class
                    break

    def repair_waves(self, made: list[Candidate]) -> list[Candidate | None]:
        """Up to ``repairs_per_candidate`` repairs of each broken candidate (a build error or a wrong result,
        not a limit of the harness), all of a wave asked, evaluated and reviewed together."""
        loop = self.loop
        r = loop._round
        out: list[Candidate | None] = []
        broken = [c for c in made if not c.result.get("correct") and not c.result.get("harness_failure")]
        for w in range(1, self.options.repairs_per_candidate + 1):
            if not broken:
                break
            memory = loop.memory.view()
            loop._phase("diagnose")

            def diagnose(c: Candidate, w: int = w, memory: dict[str, Any] = memory) -> Any:
                tag = c.step.split(".")[-1] if c.step.split(".")[-1].startswith("k") else "k1"
                step = f"r{r:02d}.diagnose{w}.{tag}"
                d = loop.agents.diagnose(step=step, round_=r, task_source=loop.task_source,
                                         kernel_source=loop.run.read(c.path), failure=c.result, memory=memory)
                loop._note("diagnosis", step, {"candidate": c.path, **d.model_dump()})
                return d

            diagnoses = self.collect([lambda c=c: diagnose(c) for c in broken], llm=True)
            slots = []
            for c, d in zip(broken, diagnoses, strict=True):
                tag = c.step.split(".")[-1] if c.step.split(".")[-1].startswith("k") else "k1"
                loop.memory.add_repair(Repair(round=r, candidate=c.path, error_class=d.error_class,
                                              diagnosis=d.root_cause, fix=d.fix))
                slots.append((Slot(step=f"r{r:02d}.repair{w}.{tag}", tag=f"repair{w}.{tag}", branch="repair",
                                   parent=c.parent, method=c.method, base_source=loop.run.read(c.path),
                                   repairs=c.path), c, d))
            loop._phase("repair")

            def repair(s: Slot, c: Candidate, d: Any, memory: dict[str, Any] = memory) -> None:
                s.answer = loop.agents.repair(step=s.step, round_=r, task_source=loop.task_source,
                                              kernel_source=s.base_source or "", failure=c.result, diagnosis=d,
                                              memory=memory)

            self.collect([lambda s=s, c=c, d=d: repair(s, c, d) for s, c, d in slots], llm=True)
            fixed = self.judge([s for s, _, _ in slots])
            out += fixed
            broken = [c for c in fixed if c is not None and not c.result.get("correct")
                      and not c.result.get("harness_failure")]
        return out

    def round_note(self, r: int) -> None:
        """What the round made: candidates, correct ones, its best speedup, the methods that paid, the frontier."""
        made = [c for c in self.loop.candidates.values() if c.round == r]
        attempts = [a for a in self.loop.memory.attempts if a.round == r]
        correct = [c for c in made if c.result.get("correct")]
        paid = sorted({c.method for c in made if c.accepted and c.method})
        self.loop._note("round", f"r{r:02d}.round", {
            "round": r, "candidates": len(attempts), "evaluated": len(made), "correct": len(correct),
            "best": max((c.result.get("speedup") or 0.0 for c in correct), default=None),
            "methods": sorted({a.method for a in attempts if a.method}), "paid": paid,
            "frontier": [{"candidate": c.path, "speedup": c.result.get("speedup")} for c in self.frontier()]})
