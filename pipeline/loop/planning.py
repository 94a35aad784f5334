"""The search's planner ask: up to N plans in one answer (``{"plans": [{method, plan}, ...]}``), checked
against the permitted list (distinct methods while enough are permitted), re-asked with the reason like the
single plan, and filled from the top of the offered list when no usable answer comes."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from kernelskill.pipeline.loop.agents import FREE_ARMS, PLAN_SCHEMA, Agents, PlanDecision, json_expects
from kernelskill.pipeline.runs.answers import plans_problem


def plans_schema() -> dict[str, Any]:
    return {"type": "object", "required": ["plans"],
            "properties": {"plans": {"type": "array", "items": PLAN_SCHEMA}}}


class PlanSet(BaseModel):
    plans: list[PlanDecision]
    asks: int = 1
    fallback: bool = False
    rejections: list[str] = []


def plan_many(agents: Agents, *, step: str, round_: int, wanted: int, task_source: str, kernel_source: str,
              parent_speedup: float, query: dict[str, Any], permitted: list[dict[str, Any]],
              filtered: dict[str, str], paid: dict[str, str], memory: dict[str, Any], reasks: int = 1,
              parent_ci: list[float] | None = None) -> PlanSet:
    """Ask under ``<step>.1`` (then ``<step>.2`` ... with the reason) for up to ``wanted`` plans."""
    assert agents.llm is not None
    free = agents.knowledge in FREE_ARMS
    ids = None if free else [m["id"] for m in permitted]
    schema = plans_schema()
    expects = json_expects(schema, ids) | {"plans_wanted": wanted}
    rejection = ""
    rejections: list[str] = []
    for ask in range(1, reasks + 2):
        messages = agents.plan_messages(task_source=task_source, kernel_source=kernel_source,
                                        parent_speedup=parent_speedup, query=query, permitted=permitted,
                                        filtered=filtered, memory=memory, rejection=rejection,
                                        plans_wanted=wanted, paid=paid, parent_ci=parent_ci)
        value, reason = agents.llm.ask_json("planner", messages, schema, steps=(f"{step}.{ask}",),
                                            round_=round_, expects=expects)
        if value is not None:
            reason = plans_problem(value, ids, wanted)
            if not reason:
                plans = [PlanDecision(method=p["method"], plan=p["plan"], rationale=p.get("rationale", ""),
                                      asks=ask) for p in value["plans"]]
                return PlanSet(plans=plans, asks=ask, rejections=rejections)
            bad = [p.get("method") for p in value["plans"] if p.get("method") in filtered]
            if bad:
                reason += f" (`{bad[0]}` already failed on this kernel: {filtered[bad[0]]})"
        rejection = reason
        rejections.append(reason)
    if free or not permitted:
        return PlanSet(plans=[PlanDecision(method="unnamed", plan="make the dominant kernel faster", fallback=True,
                                           asks=reasks + 1)], asks=reasks + 1, fallback=True, rejections=rejections)
    top = permitted[:wanted]
    plans = [PlanDecision(method=m["id"], plan=m.get("guidance") or f"apply {m['id']} to the dominant kernel",
                          rationale="the planner gave no usable plans; the top permitted methods are used",
                          asks=reasks + 1, fallback=True) for m in top]
    return PlanSet(plans=plans, asks=reasks + 1, fallback=True, rejections=rejections)
