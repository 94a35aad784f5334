"""The tools of ``kernelskill mcp``: for each, its arguments (a pydantic model whose JSON schema is the
tool's input schema) and the function that runs it.

Each tool calls the same library function as the CLI command of the same name and returns the data that
command prints with ``--json`` (:func:`kernelskill.commands._common.json_text` renders both). Errors are
:class:`KernelskillError` with a one-line message; the server turns them into MCP tool errors. Paths are
read on the machine that runs the server, relative to its working directory.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kernelskill.commands._common import Ctx
from kernelskill.errors import KernelskillError


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class KernelArgs(Args):
    kernel: str | None = Field(None, description="Path of the kernel file (.py with load_inline or Triton "
                                                  "kernels, or .cu), read on the server's machine.")
    source: str | None = Field(None, description="The kernel's source text, instead of a path.")

    @model_validator(mode="after")
    def _one_kernel(self) -> KernelArgs:
        if (self.kernel is None) == (self.source is None):
            raise ValueError("give exactly one of 'kernel' (a path) or 'source' (the kernel's text)")
        return self


class QueryArgs(KernelArgs):
    task: str | None = Field(None, description="The KernelBench-format task the kernel implements (a path).")
    profile: str | None = Field(None, description="An Nsight Compute profile of the kernel: CSV (--csv --page "
                                                   "raw) or .ncu-rep (a path).")
    context: dict[str, bool | int | float | str] | None = Field(
        None, description="Context fields, e.g. {\"tolerance_atol\": 1e-4, \"task_dtype\": \"bf16\"}.")
    k: int = Field(3, ge=1, le=20, description="Skill docs to attach per permitted method.")
    why: str | None = Field(None, description="A method id: also say why it is or is not in the answer "
                                              "(method_why: status and one reason per line with the values).")
    precision: Literal["fp32", "bf16", "fp16"] | None = Field(
        None, description="Ask as a run evaluated in this dtype: task_dtype and the precision vetoes follow it.")


class FeaturesArgs(KernelArgs):
    no_llm: bool = Field(False, description="Rules only: never ask the configured LLM about undecided features.")


class KbSearchArgs(Args):
    text: str = Field(description="What to search the skill docs for.")
    k: int = Field(5, ge=1, le=50, description="Number of hits.")
    methods: list[str] = Field(default_factory=list, description="Only docs of these method ids.")
    bottleneck: str | None = Field(None, description="Only docs tagged with this bottleneck id (or untagged).")


class KbShowArgs(Args):
    id: str = Field(description="A KB object id: a method, case, bottleneck, predicate, field, veto, tier or doc.")


class EvalArgs(Args):
    task: str = Field(description="The KernelBench-format task file (a path).")
    kernel: str = Field(description="The candidate file defining ModelNew (a path).")
    profile: bool = Field(False, description="Also profile one forward with ncu.")
    baseline: Literal["eager", "compile"] = Field("eager", description="Also time torch.compile of the reference.")
    trials: int | None = Field(None, ge=1, description="Timing trials (default from settings).")
    policy: Literal["forbid", "allow_gemm_conv"] | None = Field(
        None, description="Whether cuBLAS/cuDNN-backed torch ops are allowed for the GEMM/conv part.")
    timeout: float | None = Field(None, gt=0, description="Wall-clock limit of the GPU phase, seconds.")
    protocol: str | None = Field(None, description="Evaluation protocol: strict, kernelbench or a protocol file "
                                                    "(default from settings).")
    precision: Literal["fp32", "bf16", "fp16"] | None = Field(
        None, description="The dtype the task is evaluated in (bf16/fp16: inputs and weights cast; default from "
                          "settings).")


class RunArgs(Args):
    run: str = Field(description="A run id (see the run folder names under <home>/runs).")


class RunsAnswerArgs(RunArgs):
    request_id: str = Field(description="The LLM step to answer (the id runs_pending lists).")
    answer: str = Field(description="The answer's full text, as the model of that role would write it.")
    by: str = Field("mcp client", description="Who wrote the answer (an agent's name); the report credits it.")


class RunsResumeArgs(RunArgs):
    stop_before: list[Literal["gpu", "llm"]] = Field(
        default_factory=list, description="Pause before the first step of these sides.")
    rounds: int | None = Field(None, ge=0, le=1000, description="Change the number of rounds.")


class BenchReportArgs(Args):
    suite: str = Field(description="The suite's folder (as `kernelskill bench report SUITE_DIR` takes it).")


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    args: type[Args]
    run: Callable[[Ctx, Any], Any]
    needs_gpu: bool = False


@contextmanager
def kernel_path(args: KernelArgs) -> Iterator[Path]:
    """The kernel's path: the given one, or a temporary file holding the given source text."""
    if args.kernel is not None:
        yield Path(args.kernel)
        return
    source = args.source or ""
    looks_python = any(word in source for word in ("import ", "def ", "class "))
    with tempfile.TemporaryDirectory(prefix="kernelskill-mcp-") as tmp:
        path = Path(tmp) / ("kernel.py" if looks_python else "kernel.cu")
        path.write_text(source, encoding="utf-8")
        yield path


def _path(value: str | None, what: str) -> Path | None:
    if value is None:
        return None
    path = Path(value)
    if not path.is_file():
        raise KernelskillError(f"{path}: no such {what} file")
    return path


# ------------------------------------------------------------------------------------------ the tools
def run_query(ctx: Ctx, args: QueryArgs) -> Any:
    from kernelskill.commands.query import query_result

    task = _path(args.task, "task")
    profile = _path(args.profile, "profile")
    with kernel_path(args) as kernel:
        return query_result(ctx, kernel, task=task, profile=profile, context=dict(args.context or {}), k=args.k,
                            why=args.why, precision=args.precision)


def run_features(ctx: Ctx, args: FeaturesArgs) -> Any:
    from kernelskill.commands.features import kernel_features

    with kernel_path(args) as kernel:
        return kernel_features(ctx, kernel, no_llm=args.no_llm)


def run_kb_search(ctx: Ctx, args: KbSearchArgs) -> Any:
    from kernelskill.kb.home import open_store

    with open_store(ctx.settings(), read_only=True) as store:
        return store.search_docs(args.text, k=args.k, methods=args.methods or None, bottleneck=args.bottleneck)


def run_kb_show(ctx: Ctx, args: KbShowArgs) -> Any:
    from kernelskill.commands.kb import show_data
    from kernelskill.kb.home import open_store

    with open_store(ctx.settings(), read_only=True) as store:
        return show_data(store, args.id)


def cuda_visible() -> bool:
    try:
        import torch  # heavy: only when a GPU tool is called
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def run_eval(ctx: Ctx, args: EvalArgs) -> Any:
    from kernelskill.commands.evaluate import eval_data

    task, kernel = _path(args.task, "task"), _path(args.kernel, "kernel")
    return eval_data(ctx, task, kernel, with_profile=args.profile, baseline=args.baseline, trials=args.trials,
                     policy=args.policy, timeout=args.timeout, protocol=args.protocol, precision=args.precision)


def _run_store(ctx: Ctx) -> Any:
    from kernelskill.pipeline.runs import RunStore

    return RunStore(ctx.settings().runs_dir)


def run_runs_pending(ctx: Ctx, args: RunArgs) -> Any:
    from kernelskill.pipeline.runs import pending_steps

    return pending_steps(_run_store(ctx).open(args.run))


def run_runs_answer(ctx: Ctx, args: RunsAnswerArgs) -> Any:
    from kernelskill.commands.runs import answer_step

    return answer_step(ctx, _run_store(ctx).open(args.run), args.request_id, args.answer, by=args.by,
                       source="the answer argument")


def run_runs_resume(ctx: Ctx, args: RunsResumeArgs) -> Any:
    from kernelskill.commands.optimize import result_data
    from kernelskill.commands.runs import resume_one

    run, result = resume_one(ctx, args.run, list(args.stop_before), args.rounds, display=False)
    return result_data(ctx, run, result)


def run_bench_report(ctx: Ctx, args: BenchReportArgs) -> Any:
    try:
        from kernelskill.pipeline.bench.report import suite_report
        from kernelskill.pipeline.bench.suite import Suite
    except ImportError as exc:  # an install without the benchmark suite
        raise KernelskillError(f"bench_report: the benchmark suite is not available in this install ({exc})") \
            from None
    return suite_report(Suite.open(Path(args.suite)))


TOOLS: dict[str, Tool] = {t.name: t for t in (
    Tool("query", "Which optimization methods apply to this kernel, and why: features, tier, bottleneck, "
         "decision case, permitted methods in order with guidance and worked examples, forbidden ones with the "
         "veto, and the trace. Offline: no GPU, no LLM. Same JSON as `kernelskill query --json`.",
         QueryArgs, run_query),
    Tool("features", "The 18 static code features of a kernel with the evidence lines that decided them. "
         "Same JSON as `kernelskill features --json`.", FeaturesArgs, run_features),
    Tool("kb_search", "Vector search over the knowledge base's skill docs. Same JSON as "
         "`kernelskill kb search --json`.", KbSearchArgs, run_kb_search),
    Tool("kb_show", "One knowledge-base object (method, case, bottleneck, ...) with all its fields. Same JSON as "
         "`kernelskill kb show --json`.", KbShowArgs, run_kb_show),
    Tool("eval", "Build, check against the task's reference and time a ModelNew candidate on this machine's "
         "CUDA GPU (anti-cheat checks included). Same JSON as `kernelskill eval --json`.",
         EvalArgs, run_eval, needs_gpu=True),
    Tool("runs_pending", "What an optimize run waits for: LLM steps (role, prompt file) and the GPU step it is "
         "paused before. Same JSON as `kernelskill runs pending --json`.", RunArgs, run_runs_pending),
    Tool("runs_answer", "Answer an LLM step of a paused run (checked like an API answer of that role; an "
         "unusable one is refused and nothing is stored). Same JSON as `kernelskill runs answer --json`.",
         RunsAnswerArgs, run_runs_answer),
    Tool("runs_resume", "Continue a run until it finishes or needs the other side (an LLM answer, or a GPU). "
         "Same JSON as `kernelskill runs resume RUN --json`.", RunsResumeArgs, run_runs_resume),
    Tool("bench_report", "A benchmark suite's report: per level and overall correctness, failure classes, fast_p "
         "vs eager and torch.compile, geomean. Same JSON as `kernelskill bench report --json`.",
         BenchReportArgs, run_bench_report),
)}
