"""The agent roles: each is a template (``prompts/<role>.j2``), an output parser and a validator.

Code roles (generator, repairer, optimizer) answer with a Python file; the parser finds the fenced
block that defines ``ModelNew`` (with or without a language tag, several blocks, a fence left open)
and the validator parses it with ``ast``. JSON roles (diagnoser, planner, reviewer) answer with one
object checked against a schema. An unusable answer is asked again once with the reason; every
request goes through :class:`~kernelskill.pipeline.loop.llm.LLMClient` under a step id, so a resumed run
never asks twice.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from pydantic import BaseModel

from kernelskill.pipeline.harness.gpu_facts import prompt_gpu
from kernelskill.pipeline.loop.decisions import SpeedDecision, compare_to_parent, noise_rule_text
from kernelskill.pipeline.loop.formats import prompt_context
from kernelskill.pipeline.loop.llm import LLMClient
from kernelskill.pipeline.runs.answers import check_answer, extract_code, plans_problem  # noqa: F401 (the roles' checks)
from kernelskill.pipeline.runs.redact import redact
from kernelskill.protocols import FP64_ERROR_FACTOR, FP64_ERROR_FLOOR

PROMPTS_DIR = Path(__file__).resolve().parents[2] / "prompts"
ROLES = ("generator", "reviewer", "diagnoser", "repairer", "planner", "optimizer")
#: the ablation arms: the planner names any technique and sees no KB content (``profile``: the measured counters)
FREE_ARMS = ("none", "profile")

DIAGNOSIS_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["root_cause", "fix"],
    "properties": {"error_class": {"type": "string"}, "root_cause": {"type": "string", "minLength": 1},
                   "fix": {"type": "string", "minLength": 1}}}
PLAN_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["method", "plan"],
    "properties": {"method": {"type": "string", "minLength": 1}, "rationale": {"type": "string"},
                   "plan": {"type": "string", "minLength": 1}}}
REVIEW_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["accept", "reason"],
    "properties": {"accept": {"type": "boolean"}, "reason": {"type": "string"}}}


#: how many permitted methods the planner sees with their whole guidance (the rest by name); guidance is
#: never cut, so a shorter prompt shows fewer methods in full
FULL_GUIDANCE_METHODS = 6
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`(\"'])")


def whole_sentences(text: str, limit: int = 300) -> str:
    """``text`` shortened to the whole sentences that fit in ``limit`` characters (at least the first one,
    whatever its length): nothing is cut mid-sentence. A shortened text says how much was left out."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    sentences = _SENTENCE_END.split(text)
    kept = [sentences[0]]
    for sentence in sentences[1:]:
        if len(" ".join(kept + [sentence])) > limit:
            break
        kept.append(sentence)
    left = len(sentences) - len(kept)
    return " ".join(kept) + (f" ({left} more sentence{'s' if left > 1 else ''} not shown)" if left else "")


@lru_cache(maxsize=4)
def environment(prompts_dir: Path = PROMPTS_DIR) -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(prompts_dir)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, autoescape=False)
    env.filters["sentences"] = whole_sentences
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


def messages_for(role: str, *, candidate_format: str = "load_inline", template: str | None = None,
                 **context: Any) -> list[dict[str, str]]:
    """The system and user messages of ``role``: ``partials/system.j2`` and ``<role>.j2`` (or ``template``)."""
    fmt = prompt_context(candidate_format)  # the templates branch on the candidate format (and the protocol)
    system = render("partials/system.j2", role=role, protocol=context.get("protocol"), **fmt)
    user = render(template or f"{role}.j2", role=role, **fmt, **context).strip() + "\n"
    # a secret that reached the context (an error message quoting a key) never reaches a prompt
    return [{"role": "system", "content": redact(system.strip())}, {"role": "user", "content": redact(user)}]


def default_gpu(arch: str = "sm_90", name: str | None = None, protocol: str | None = None,
                precision: str | None = None) -> dict[str, Any]:
    """The target GPU as the prompts describe it: its facts (SMs, bandwidth, L2) and, as ``contract``, the
    protocol the candidates are judged by and the precision the task runs in (prompts/partials/contract.j2)."""
    gpu = prompt_gpu(arch, name=name, protocol=protocol, precision=precision)
    gpu["contract"]["fp64_check"] = {"factor": FP64_ERROR_FACTOR, "floor": FP64_ERROR_FLOOR}
    gpu["contract"]["decision_rule"] = noise_rule_text()
    return gpu


# The expected shape of an answer, as stored with a request (the ``exchange`` provider) ----------------
def code_expects(candidate_format: str = "load_inline") -> dict[str, Any]:
    out: dict[str, Any] = {"kind": "code", "defines": "ModelNew",
                           "how": "the whole Python file in one ```python block that defines class ModelNew"}
    if candidate_format == "triton":
        out["format"] = "triton"
        out["how"] += " and its @triton.jit kernels"
    return out


def json_expects(schema: dict[str, Any], method_in: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": "json", "schema": schema, "how": "one JSON object matching the schema"}
    if method_in is not None:
        out["method_in"] = list(method_in)
        out["how"] += "; `method` must be one of the permitted methods"
    return out


class CodeAnswer(BaseModel):
    code: str | None
    reason: str = ""
    asks: int = 1


class Diagnosis(BaseModel):
    error_class: str
    root_cause: str
    fix: str
    fallback: bool = False


class PlanDecision(BaseModel):
    method: str
    plan: str
    rationale: str = ""
    asks: int = 1
    fallback: bool = False  # the planner never named a permitted method: the top one was used
    rejections: list[str] = []


class ReviewDecision(BaseModel):
    accept: bool
    reason: str
    by: str = "reviewer"  # reviewer (the code review rejected or passed it) | rule (the measurements decided)
    speed: SpeedDecision | None = None  # the measurements' verdict against the parent, when there is one


class Agents:
    """The six loop roles over one LLM client."""

    def __init__(self, llm: LLMClient | None, gpu: dict[str, Any] | None = None, *,
                 candidate_format: str = "load_inline", knowledge: str = "kb") -> None:
        self.llm = llm  # None: only render prompts (``kernelskill prompts render``)
        self.gpu = gpu or {"name": "NVIDIA H200", "arch": "sm_90", "notes": ""}
        self.candidate_format = candidate_format
        self.knowledge = knowledge  # kb | none | profile (the ablations: the planner chooses freely)

    # the exact messages of each step (the loop sends them; ``prompts render`` prints them) ------------
    def _messages(self, role: str, template: str | None = None, **context: Any) -> list[dict[str, str]]:
        return messages_for(role, gpu=self.gpu, candidate_format=self.candidate_format, template=template,
                            **context)

    def plan_messages(self, *, task_source: str, kernel_source: str, parent_speedup: float,
                      query: dict[str, Any], permitted: list[dict[str, Any]], filtered: dict[str, str],
                      memory: dict[str, Any], rejection: str = "", plans_wanted: int = 1,
                      paid: dict[str, str] | None = None, parent_ci: list[float] | None = None) -> list[dict[str, str]]:
        """``plans_wanted`` > 1: the search's ask for several plans at once (``partials/plans.j2``), with the
        methods that ``paid`` on another candidate of the search."""
        if self.knowledge in FREE_ARMS:  # no diagnosis, methods or evidence: the code, the GPU, the memory (and the
            # profile arm: the parent's measured counters)
            return self._messages("planner", "planner_free.j2", task_source=task_source, kernel_source=kernel_source,
                                  parent_speedup=parent_speedup, parent_ci=parent_ci, filtered=filtered, memory=memory,
                                  rejection=rejection, plans_wanted=plans_wanted, paid=paid or {}, permitted=[],
                                  profile=query.get("profile_numbers") if self.knowledge == "profile" else None,
                                  profile_error=query.get("profile_error") if self.knowledge == "profile" else None)
        evidence = sorted((m for m in permitted if (m.get("measured") or {}).get("speedup")),
                          key=lambda m: (-((m.get("example") or {}).get("similarity") or 0.0), m["id"]))
        return self._messages("planner", task_source=task_source, kernel_source=kernel_source,
                              parent_speedup=parent_speedup, parent_ci=parent_ci, query=query, permitted=permitted,
                              full_methods=FULL_GUIDANCE_METHODS, evidence=evidence, filtered=filtered,
                              forbidden=query.get("forbidden", []), memory=memory, rejection=rejection,
                              plans_wanted=plans_wanted, paid=paid or {})

    def optimize_messages(self, *, task_source: str, kernel_source: str, method: dict[str, Any],
                          plan: PlanDecision, memory: dict[str, Any]) -> list[dict[str, str]]:
        return self._messages("optimizer", task_source=task_source, kernel_source=kernel_source, method=method,
                              plan=plan.model_dump(), memory=memory)

    def diagnose_messages(self, *, task_source: str, kernel_source: str, failure: dict[str, Any],
                          memory: dict[str, Any]) -> list[dict[str, str]]:
        return self._messages("diagnoser", task_source=task_source, kernel_source=kernel_source, failure=failure,
                              memory=memory)

    def _ask(self, role: str, messages: list[dict[str, str]], step: str, round_: int | None,
             expects: dict[str, Any] | None = None) -> str:
        assert self.llm is not None
        return self.llm.chat(role, messages, step=step, round_=round_, expects=expects).text

    def _code(self, role: str, step: str, round_: int | None, messages: list[dict[str, str]] | None = None,
              **context: Any) -> CodeAnswer:
        messages = messages or self._messages(role, **context)
        text = self._ask(role, messages, f"{step}.1", round_, code_expects(self.candidate_format))
        code, reason = extract_code(text, self.candidate_format)
        if code is not None:
            return CodeAnswer(code=code)
        messages = messages + [{"role": "assistant", "content": text}, {"role": "user", "content": (
            f"That answer could not be used: {reason}. Return the whole file in one ```python block "
            "that defines class ModelNew.")}]
        code, reason2 = extract_code(self._ask(role, messages, f"{step}.2", round_,
                                               code_expects(self.candidate_format)), self.candidate_format)
        return CodeAnswer(code=code, reason="" if code else reason2, asks=2)

    def _json(self, role: str, schema: dict[str, Any], step: str, round_: int | None,
              messages: list[dict[str, str]] | None = None, *, steps: tuple[str, ...] | None = None,
              method_in: list[str] | None = None, **context: Any) -> tuple[dict[str, Any] | None, str]:
        """A JSON answer through the client's one re-ask loop (by default ``<step>.1``, then ``<step>.2``)."""
        assert self.llm is not None
        return self.llm.ask_json(role, messages or self._messages(role, **context), schema,
                                 steps=steps or (f"{step}.1", f"{step}.2"), round_=round_,
                                 expects=json_expects(schema, method_in))

    # roles ------------------------------------------------------------------------------------
    def generate_messages(self, *, task_source: str, memory: dict[str, Any],
                          advice: dict[str, Any] | None = None) -> list[dict[str, str]]:
        """The seed prompt; with the KB's ``advice`` for the task's operations (the KB arm) when given."""
        return self._messages("generator", task_source=task_source, memory=memory, advice=advice)

    def generate(self, *, step: str, round_: int, task_source: str, memory: dict[str, Any],
                 advice: dict[str, Any] | None = None) -> CodeAnswer:
        return self._code("generator", step, round_, self.generate_messages(task_source=task_source, memory=memory,
                                                                            advice=advice))

    def diagnose(self, *, step: str, round_: int, task_source: str, kernel_source: str,
                 failure: dict[str, Any], memory: dict[str, Any]) -> Diagnosis:
        value, reason = self._json("diagnoser", DIAGNOSIS_SCHEMA, step, round_, self.diagnose_messages(
            task_source=task_source, kernel_source=kernel_source, failure=failure, memory=memory))
        if value is None:
            return Diagnosis(error_class=failure["status"], fallback=True,
                             root_cause=f"(no usable diagnosis: {reason}) {failure.get('message', '')}",
                             fix="make the code build and match the reference")
        return Diagnosis(error_class=str(value.get("error_class") or failure["status"]),
                         root_cause=value["root_cause"], fix=value["fix"])

    def repair(self, *, step: str, round_: int, task_source: str, kernel_source: str,
               failure: dict[str, Any], diagnosis: Diagnosis, memory: dict[str, Any]) -> CodeAnswer:
        return self._code("repairer", step, round_, task_source=task_source, kernel_source=kernel_source,
                          failure=failure, diagnosis=diagnosis.model_dump(), memory=memory)

    def plan(self, *, step: str, round_: int, task_source: str, kernel_source: str, parent_speedup: float,
             query: dict[str, Any], permitted: list[dict[str, Any]], filtered: dict[str, str],
             memory: dict[str, Any], reasks: int = 1, parent_ci: list[float] | None = None) -> PlanDecision:
        """The planner must name a permitted method: re-asked ``reasks`` times with the reason,
        then the top permitted method is used and that is recorded (``fallback``)."""
        free = self.knowledge in FREE_ARMS  # the ablations: any technique, checked for the answer's shape only
        ids = [m["id"] for m in permitted]
        rejection = ""
        rejections: list[str] = []
        for ask in range(1, reasks + 2):
            messages = self.plan_messages(task_source=task_source, kernel_source=kernel_source,
                                          parent_speedup=parent_speedup, query=query, permitted=permitted,
                                          filtered=filtered, memory=memory, rejection=rejection, parent_ci=parent_ci)
            # one ask per step: a rejected plan is asked again with a fresh prompt that says why
            value, reason = self._json("planner", PLAN_SCHEMA, step, round_, messages,
                                       steps=(f"{step}.{ask}",), method_in=None if free else ids)
            if value is not None and (free or value["method"] in ids):
                return PlanDecision(method=value["method"], plan=value["plan"],
                                    rationale=value.get("rationale", ""), asks=ask, rejections=rejections)
            if value is not None:
                why = filtered.get(value["method"])
                reason = (f"`{value['method']}` was not offered again: it already failed on this parent "
                          f"({why})" if why else f"`{value['method']}` is not in the permitted list")
                reason += f"; choose one of: {', '.join(ids)}"
            rejection = reason
            rejections.append(reason)
        if free or not permitted:
            return PlanDecision(method="unnamed", asks=reasks + 1, fallback=True, rejections=rejections,
                                plan="make the dominant kernel faster", rationale="the planner gave no usable answer")
        top = permitted[0]
        return PlanDecision(method=top["id"], asks=reasks + 1, fallback=True, rejections=rejections,
                            plan=top.get("guidance") or f"apply {top['id']} to the dominant kernel",
                            rationale="the planner named no permitted method; the top permitted one is used")

    def optimize(self, *, step: str, round_: int, task_source: str, kernel_source: str,
                 method: dict[str, Any], plan: PlanDecision, memory: dict[str, Any]) -> CodeAnswer:
        return self._code("optimizer", step, round_, self.optimize_messages(
            task_source=task_source, kernel_source=kernel_source, method=method, plan=plan, memory=memory))

    def review(self, *, step: str, round_: int, task_source: str, candidate: dict[str, Any],
               result: dict[str, Any], parent: dict[str, Any] | None, memory: dict[str, Any],
               diff: str = "") -> ReviewDecision:
        """Whether a candidate becomes the new parent.

        Speed is decided by the measurements alone (:func:`~kernelskill.pipeline.loop.decisions.compare_to_parent`:
        the interval of the ratio of speedups, or the IQR rule without intervals); no LLM reads the medians. The
        reviewer is asked only about a correct candidate the measurements call faster than its parent, and only
        as a code reviewer: its ``accept: false`` rejects a candidate it suspects of cheating or of breaking the
        contract, never for its speed. Without a usable answer the measurements decide."""
        if result.get("harness_failure"):
            return ReviewDecision(accept=False, by="rule", reason=(
                f"not evaluated: {result.get('status')} in the harness's own {result.get('stage')} stage "
                f"(the task's limit, not a bug in the candidate)"))
        if not result.get("correct"):
            return ReviewDecision(accept=False, by="rule", reason=f"harness: {result.get('status')}")
        if parent is None:
            return ReviewDecision(accept=True, by="rule", reason="the first correct candidate")
        speed = compare_to_parent(result, parent["result"])
        if not speed.improved:
            return ReviewDecision(accept=False, by="rule", reason=speed.reason, speed=speed)
        value, reason = self._json("reviewer", REVIEW_SCHEMA, step, round_, task_source=task_source,
                                   candidate=candidate, result=result, parent=parent, memory=memory,
                                   decision=speed.model_dump(), diff=diff,
                                   noise_rule=noise_rule_text(result, parent["result"]))
        if value is None:
            return ReviewDecision(accept=True, by="rule", reason=f"{speed.reason} (no usable review: {reason})",
                                  speed=speed)
        if not value["accept"]:
            return ReviewDecision(accept=False, reason=f"rejected by the code review: {value['reason']}", speed=speed)
        return ReviewDecision(accept=True, reason=f"{speed.reason}; code review: {value['reason']}", speed=speed)
