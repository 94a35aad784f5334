"""The run store: one self-contained, portable folder per optimize run.

Layout of a run folder (every path stored inside it is relative to the folder)::

    run.json            the manifest: id, task file, loop options, model, created (written once)
    task.py             a copy of the task, so the folder needs nothing outside itself
    candidates/         every candidate source the loop produced, ``<step>.py``
    events.jsonl        the append-only event log: the resume point and the analysis database
    best.py             the best verified ModelNew (KernelBench-compatible), when the run ends
    trajectory.json     one row per candidate, when the run ends
    report.md           the markdown report, when the run ends

Each line of ``events.jsonl`` is one event::

    {"seq": 7, "ts": "...Z", "kind": "llm" | "gpu" | "kb" | "loop", "type": "...",
     "step": "r03.plan.1", "round": 3, "data": {...}}

``kind`` says which side of a split run produced the event: ``llm`` (an LLM request and its
answer), ``kb`` (a knowledge-base query), ``gpu`` (an evaluation or a profile) or ``loop``
(decisions the loop took from the others, cheap to recompute). A step whose event is in the log
is never executed again. Lines are written with one ``write`` and fsync'd; a line cut short by a
kill is ignored on read and removed before the next append.

No absolute path, host name or credential is written into the folder: the writer replaces the
run folder's absolute path (and the user's home) in every string it stores.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
import os
import re
import secrets
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kernelskill.errors import KernelskillError

log = logging.getLogger(__name__)

EVENTS = "events.jsonl"
MANIFEST = "run.json"
TASK = "task.py"
CANDIDATES = "candidates"
LOCK = ".lock"
STEP_KINDS = ("llm", "kb", "gpu", "loop")
#: which machine a step kind needs in a split run: LLM side (keys, the KB) or GPU side.
SIDE = {"llm": "llm", "kb": "llm", "gpu": "gpu", "loop": "any"}


class Paused(KernelskillError):
    """The loop stopped before a step of a side it was told not to run, or one that waits for an answer
    file (the ``exchange`` LLM provider). ``request`` says what it waits for (JSON, run-relative)."""

    exit_code = 3

    def __init__(self, step: str, side: str, request: dict[str, Any] | None = None) -> None:
        super().__init__(f"paused before {side} step {step}")
        self.step, self.side, self.request = step, side, request


def utcnow() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_run_id(task_path: Path) -> str:
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", task_path.stem)[:40].strip("-") or "task"
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%d-%H%M%S")
    return f"{stem}-{stamp}-{secrets.token_hex(2)}"


def step_filename(step: str) -> str:
    """``r03.optimize`` -> ``r03.optimize.py`` (a plain name, safe on every filesystem)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", step).strip("_") + ".py"


class EventLog:
    """Append-only JSONL with fsync per event; readers skip a torn last line."""

    def __init__(self, path: Path, *, scrub: dict[str, str] | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        #: text -> replacement, longest first (absolute paths -> ".", the host name -> "<host>")
        self._scrub = sorted(((k, v) for k, v in (scrub or {}).items() if k and len(k) > 1),
                             key=lambda kv: len(kv[0]), reverse=True)
        self._events: list[dict[str, Any]] = list(self._read())
        self._by_step: dict[tuple[str, str], dict[str, Any]] = {}
        for event in self._events:
            if event.get("step"):
                self._by_step.setdefault((event["step"], event["type"]), event)

    # reading --------------------------------------------------------------------------------
    def _read(self) -> Iterator[dict[str, Any]]:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        lines = data.split(b"\n")
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                if number == len(lines):  # the torn tail of a killed writer
                    log.warning("%s: ignoring a cut-off last line", self.path)
                    continue
                raise KernelskillError(f"{self.path}:{number}: not a JSON event: {exc}") from exc

    @property
    def events(self) -> list[dict[str, Any]]:
        return list(self._events)

    def find(self, step: str, type_: str) -> dict[str, Any] | None:
        """The first event of ``type_`` recorded for ``step``, if any."""
        return self._by_step.get((step, type_))

    def of_type(self, type_: str) -> list[dict[str, Any]]:
        return [e for e in self._events if e.get("type") == type_]

    # writing --------------------------------------------------------------------------------
    def _clean(self, value: Any) -> Any:
        if isinstance(value, str):
            for needle, replacement in self._scrub:
                value = value.replace(needle, replacement)
            return value
        if isinstance(value, dict):
            return {str(k): self._clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._clean(v) for v in value]
        return value

    def scrub(self, value: Any) -> Any:
        """``value`` with this machine's paths and host name replaced, as every event is stored."""
        return self._clean(value)

    def append(self, kind: str, type_: str, data: dict[str, Any] | None = None, *,
               step: str | None = None, round_: int | None = None) -> dict[str, Any]:
        if kind not in STEP_KINDS:
            raise ValueError(f"unknown event kind {kind!r}")
        with self._lock:
            event = {"seq": len(self._events) + 1, "ts": utcnow(), "kind": kind, "type": type_,
                     "step": step, "round": round_, "data": self._clean(data or {})}
            line = (json.dumps(event, ensure_ascii=False, default=str) + "\n").encode()
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._trim_torn_tail()
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)
            self._events.append(event)
            if step:
                self._by_step.setdefault((step, type_), event)
            return event

    def _trim_torn_tail(self) -> None:
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with self.path.open("rb+") as fh:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) == b"\n":
                return
            fh.seek(0)
            data = fh.read()
            cut = data.rfind(b"\n") + 1
            fh.truncate(cut)
            log.warning("%s: removed a cut-off last line before appending", self.path)


class Run:
    """One run folder: manifest, task copy, candidates and the event log."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.id = path.name
        scrub = {str(path.resolve()): ".", str(path.absolute()): "."}
        try:
            scrub[str(Path.home())] = "~"
        except RuntimeError:  # pragma: no cover - no home directory
            pass
        scrub[str(Path(__file__).resolve().parents[1])] = "<kernelskill>"  # where the package is installed
        host = socket.gethostname()
        if len(host) >= 6:
            scrub[host] = "<host>"
        self.log = EventLog(path / EVENTS, scrub=scrub)

    @property
    def task_path(self) -> Path:
        return self.path / TASK

    @property
    def manifest(self) -> dict[str, Any]:
        file = self.path / MANIFEST
        try:
            return json.loads(file.read_text())
        except FileNotFoundError as exc:
            raise KernelskillError(f"{file}: not a run folder (no {MANIFEST})") from exc
        except json.JSONDecodeError as exc:
            raise KernelskillError(f"{file}:{exc.lineno}: invalid JSON: {exc.msg}") from exc

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Exclusive use of the run by one process (released by the OS even on kill -9)."""
        import fcntl

        with (self.path / LOCK).open("a") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as exc:
                raise KernelskillError(f"run {self.id}: in use by another process") from exc
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def write_candidate(self, step: str, source: str) -> str:
        """Store a candidate's source; return its path relative to the run folder."""
        rel = f"{CANDIDATES}/{step_filename(step)}"
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        tmp.write_text(source)
        with tmp.open("rb") as fh:
            os.fsync(fh.fileno())
        tmp.replace(target)
        return rel

    def read(self, rel: str) -> str:
        return (self.path / rel).read_text()

    def write_output(self, name: str, text: str) -> Path:
        target = self.path / name
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(target)
        return target

    def status(self) -> str:
        types = {e["type"] for e in self.log.events}
        if "run_finished" in types:
            return "finished"
        if "run_paused" in types and self.log.events[-1]["type"] == "run_paused":
            return "paused"
        return "incomplete" if types else "new"


class RunStore:
    """The folder that holds runs (``settings.runs_dir``)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def create(self, task_file: Path, manifest: dict[str, Any], run_id: str | None = None) -> Run:
        run_id = run_id or new_run_id(task_file)
        path = self.root / run_id
        if path.exists():
            raise KernelskillError(f"{path}: run already exists")
        path.mkdir(parents=True)
        shutil.copyfile(task_file, path / TASK)
        body = {"id": run_id, "created": utcnow(), "task": TASK, "task_name": task_file.name, **manifest}
        (path / MANIFEST).write_text(json.dumps(body, indent=2, default=str) + "\n")
        return Run(path)

    def open(self, run: str | Path) -> Run:
        """A run by id (under the store) or by folder path."""
        candidate = Path(run)
        for path in (self.root / str(run), candidate):
            if (path / MANIFEST).is_file():
                return Run(path)
        raise KernelskillError(f"run {run}: not found under {self.root} (no {MANIFEST})")

    def list(self) -> list[Run]:
        if not self.root.is_dir():
            return []
        return [Run(p) for p in sorted(self.root.iterdir()) if (p / MANIFEST).is_file()]


# GPU steps as portable requests ---------------------------------------------------------------
def gpu_request(type_: str, step: str, candidate: str, *, seed: int | None = None) -> dict[str, Any]:
    """What a GPU step needs, as JSON with run-relative paths: ``type`` is ``eval`` or ``profile``."""
    if type_ not in ("eval", "profile"):
        raise ValueError(f"unknown GPU step type {type_!r}")
    return {"type": type_, "step": step, "task": TASK, "candidate": candidate, "seed": seed}


def run_gpu_step(run: Run, request: dict[str, Any], evaluator: Any, *, round_: int | None = None
                 ) -> dict[str, Any]:
    """Execute one GPU request with ``evaluator`` (``evaluate(task, candidate, *, seed)`` /
    ``profile(task, candidate)`` returning dicts) and append its event. Standard library only, so the
    GPU machine of a split run can call it without the LLM side's packages."""
    found = run.log.find(request["step"], request["type"])
    if found is not None:
        return found
    task, candidate = run.path / request["task"], run.path / request["candidate"]
    data: dict[str, Any] = {"candidate": request["candidate"]}
    if request["type"] == "eval":
        if request.get("seed") is not None:
            data["seed"] = request["seed"]
            data["result"] = evaluator.evaluate(task, candidate, seed=request["seed"])
        else:
            data["result"] = evaluator.evaluate(task, candidate)
    else:
        raw = evaluator.profile(task, candidate)
        csv = raw.get("csv") if raw.get("ok", True) else None  # a failed profile's csv is ncu's error text
        data.update(ok=bool(csv), message=str(raw.get("message") or "")[:2000])
        if isinstance(csv, str) and csv.strip():
            rel = f"profiles/{step_filename(request['step'])[:-3]}.csv"
            (run.path / "profiles").mkdir(exist_ok=True)
            run.write_output(rel, run.log.scrub(csv))  # ncu names the host and the paths
            data["csv"] = rel
    if round_ is None and isinstance(request.get("round"), int):
        round_ = request["round"]
    return run.log.append("gpu", request["type"], data, step=request["step"], round_=round_)


def pending_request(run: Run) -> dict[str, Any] | None:
    """The step a paused run waits for (``{"side", "before", "request"}``), or None."""
    events = run.log.events
    if events and events[-1]["type"] == "run_paused":
        return events[-1]["data"]
    return None


def pending_steps(run: Run) -> list[dict[str, Any]]:
    """Everything a run waits for: unanswered LLM requests in its ``exchange/`` folder and the GPU (or
    LLM) step it is paused before; one dict per step with ``id, side, role`` and where to look."""
    from kernelskill.pipeline.exchange import Exchange

    out: list[dict[str, Any]] = []
    exchange = Exchange(run.path)
    for req in exchange.pending("llm"):
        if run.log.find(req.id, "llm_call") is None:
            prompt = f"{exchange.dir.name}/{req.id}.prompt.md"
            out.append({"id": req.id, "side": "llm", "role": req.role, "expects": req.expects.get("kind", "text"),
                        "prompt": prompt if (run.path / prompt).is_file() else None,
                        "request": f"{exchange.dir.name}/{req.id}.request.json"})
    waiting = pending_request(run)
    if waiting and waiting.get("before") not in {p["id"] for p in out}:
        request = waiting.get("request") or {}
        if waiting.get("side") == "gpu" and request and run.log.find(request["step"], request["type"]) is None:
            out.append({"id": request["step"], "side": "gpu", "role": request["type"],
                        "candidate": request.get("candidate"), "seed": request.get("seed")})
        elif waiting.get("side") == "llm" and not request:
            out.append({"id": waiting["before"], "side": "llm", "role": None, "prompt": None,
                        "note": "stopped before the LLM side: resume it where the LLM (or the exchange) is"})
    return out


# Analysis with DuckDB -------------------------------------------------------------------------
EVENT_COLUMNS = {"seq": "BIGINT", "ts": "VARCHAR", "kind": "VARCHAR", "type": "VARCHAR",
                 "step": "VARCHAR", "round": "INTEGER", "data": "JSON"}

VIEWS = {
    "llm_calls": """select seq, ts, step, round, data->>'$.role' as role, data->>'$.model' as model,
        cast(data->>'$.usage.prompt_tokens' as bigint) as prompt_tokens,
        cast(data->>'$.usage.completion_tokens' as bigint) as completion_tokens,
        cast(data->>'$.cost_usd' as double) as cost_usd, cast(data->>'$.latency_s' as double) as latency_s,
        cast(data->>'$.attempts' as integer) as attempts, data->>'$.provider' as provider
        from events where kind = 'llm' and type = 'llm_call'""",
    "evals": """select seq, ts, step, round, data->>'$.candidate' as candidate,
        data->>'$.result.status' as status, cast(data->>'$.result.correct' as boolean) as correct,
        cast(data->>'$.result.speedup' as double) as speedup,
        cast(data->>'$.result.candidate_ms' as double) as candidate_ms,
        cast(data->>'$.result.baseline_ms' as double) as baseline_ms
        from events where kind = 'gpu' and type = 'eval'""",
    "attempts": """select seq, round, step, data->>'$.candidate' as candidate, data->>'$.parent' as parent,
        data->>'$.branch' as branch, data->>'$.method' as method, data->>'$.result_class' as result_class,
        cast(data->>'$.speedup' as double) as speedup, cast(data->>'$.accepted' as boolean) as accepted
        from events where type = 'attempt'""",
}


def connect(run: Run):
    """An in-memory DuckDB connection with ``events`` and the convenience views over a run's log."""
    import duckdb

    con = duckdb.connect(":memory:")
    path = str(run.path / EVENTS).replace("'", "''")
    cols = ", ".join(f"'{k}': '{v}'" for k, v in EVENT_COLUMNS.items())
    if (run.path / EVENTS).exists() and (run.path / EVENTS).stat().st_size:
        con.execute(f"create view events as select * from read_json('{path}', format='newline_delimited', "
                    f"columns={{{cols}}}, ignore_errors=true)")
    else:
        con.execute("create table events (" + ", ".join(f"{k} {v}" for k, v in EVENT_COLUMNS.items()) + ")")
    for name, sql in VIEWS.items():
        con.execute(f"create view {name} as {sql}")
    return con


def sql(run: Run, query: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    import duckdb

    con = connect(run)
    try:
        cur = con.execute(query)
    except duckdb.Error as exc:
        raise KernelskillError(f"sql: {str(exc).splitlines()[0]}") from exc
    names = [d[0] for d in cur.description or []]
    return names, cur.fetchall()


# Summaries and the report ----------------------------------------------------------------------
def summary(run: Run) -> dict[str, Any]:
    """One run at a glance, from its manifest and its log alone."""
    manifest = run.manifest
    events = run.log.events
    attempts = [e["data"] for e in events if e["type"] == "attempt"]
    llm = [e["data"] for e in events if e["type"] == "llm_call"]
    finished = [e["data"] for e in events if e["type"] == "run_finished"]
    accepted = [a["speedup"] for a in attempts if a.get("accepted") and a.get("speedup")]
    return {
        "id": run.id, "task": manifest.get("task_name", TASK), "created": manifest.get("created"),
        "model": manifest.get("model"), "answered_by": answered_by(llm, manifest.get("model")),
        "status": run.status(),
        "rounds": max((a["round"] for a in attempts), default=0),
        "attempts": len(attempts), "evals": sum(1 for e in events if e["type"] == "eval"),
        "best_speedup": max(accepted, default=None),
        "verified_speedup": (finished[-1]["best"] or {}).get("verified_speedup") if finished else None,
        "waits_for": (lambda p: f"{p['side']} {p['before']}" if p else None)(pending_request(run)),
        "llm_calls": len(llm), "tokens": sum(d["usage"].get("total_tokens", 0) for d in llm),
        "cost_usd": round(sum(d.get("cost_usd", 0.0) for d in llm), 6),
    }


def answered_by(llm_calls: list[dict[str, Any]], default: str | None) -> str:
    """Who answered the run's LLM steps: the models that were asked and, for answers that came through
    the exchange, who wrote them (``"scripted agent (exchange)"``). Before any call: the configured model."""
    seen: dict[str, int] = {}
    for call in llm_calls:
        who = (f"{call.get('answered_by') or 'unknown'} (exchange)" if call.get("provider") == "exchange"
               else f"{call.get('model') or default} ({call.get('provider') or 'openai'})")
        seen[who] = seen.get(who, 0) + 1
    if not seen:
        return f"{default} (no call yet)"
    return ", ".join(f"{who} x{n}" if len(seen) > 1 else who for who, n in seen.items())


def _cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_report(run: Run) -> str:
    s = summary(run)
    events = run.log.events
    attempts = [e["data"] for e in events if e["type"] == "attempt"]
    plans = {e["step"].split(".")[0]: e["data"] for e in events if e["type"] == "plan"}
    finished = [e["data"] for e in events if e["type"] == "run_finished"]
    best = finished[-1]["best"] if finished else None
    lines = [f"# kernelskill run {s['id']}", "",
             f"- task: `{s['task']}`; answered by: {s['answered_by']}; status: **{s['status']}**",
             f"- rounds: {s['rounds']}; candidates evaluated: {s['evals']}; LLM calls: {s['llm_calls']}, "
             f"{s['tokens']} tokens, ${s['cost_usd']:.4f}"]
    if best:
        lines.append(f"- best: `{best['candidate']}` (round {best['round']}, method `{best['method'] or '-'}`): "
                     f"speedup **{_cell(best['speedup'])}x** over eager, re-verified on a fresh seed at "
                     f"{_cell(best['verified_speedup'])}x ({_cell(best['candidate_ms'])} ms vs "
                     f"{_cell(best['baseline_ms'])} ms); file `best.py`")
    elif finished:
        lines.append("- no candidate was correct and re-verified")
    lines += ["", "## Trajectory", "",
              "| round | branch | method | parent | result | speedup | parent next | planner | review |",
              "|---:|---|---|---|---|---:|---|---|---|"]
    for a in attempts:
        plan = plans.get(f"r{a['round']:02d}") if a["branch"] == "optimize" else None
        planner = "-"
        if plan:
            planner = f"asked {plan['asks']}x" + (", fallback to top permitted" if plan.get("fallback") else "")
            if plan.get("filtered"):
                planner += f", filtered {', '.join(plan['filtered'])}"
        lines.append("| " + " | ".join(_cell(v) for v in (
            a["round"], a["branch"], a.get("method"), a.get("parent"), a["result_class"], a.get("speedup"),
            "accepted" if a.get("accepted") else "kept", planner, a.get("review"))) + " |")
    repairs = [e["data"] for e in events if e["type"] == "diagnosis"]
    if repairs:
        lines += ["", "## Repairs", "", "| candidate | error class | root cause | fix |", "|---|---|---|---|"]
        for d in repairs:
            lines.append("| " + " | ".join(_cell(d.get(k)) for k in ("candidate", "error_class", "root_cause",
                                                                     "fix")) + " |")
    return "\n".join(lines) + "\n"
