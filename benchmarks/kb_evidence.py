"""Measure every curated method's worked example with the project's harness and store it as evidence.

One judge: the before and after files of each worked example are evaluated exactly as optimize-loop
candidates are (``kernelskill.pipeline.harness``: ``LocalEvaluator`` builds them in parallel on the CPU,
then each runs in its own isolated worker on a GPU), under a named protocol (``kernelskill.protocols``;
``--protocol``, default ``strict``): the protocol's tolerances on several seeds, the second shape set,
the float64 precision check, the anti-cheat checks, and the harness's timing (cold L2, interleaved with
eager PyTorch, medians and IQRs). Each record states the protocol, the speedup of after over before and
each variant's speedup over eager PyTorch (the harness times eager as its baseline).

Mode 1 (on the GPU box; torch + the standard library + the harness)::

    python benchmarks/kb_evidence.py [--skills kb/skills] [--methods a,b] [--jobs 14] [--trials 50]
                                     [--protocol strict] [--out FILE]

For each method YAML under ``<skills>/methods/`` whose ``example:`` names a task, a before and an after
file (paths relative to ``<skills>``), both files are judged against the task. It prints a table and
writes JSON (to ``$OUT/kb_evidence.json`` when ``$OUT`` is set), rewritten after every result so a run
stopped at its time limit still leaves a readable report.

Mode 2 (on a development machine, may use pyyaml)::

    python benchmarks/kb_evidence.py --write-yaml kb_evidence.json [--skills kb/skills]

writes one ``evidence`` record per method whose before and after both passed into its YAML, replacing only
the ``evidence:`` block of that method (comments and key order elsewhere are kept). Reports written by the
earlier version of this script (its own compare and timing, no protocol) are still accepted; their records
carry no ``protocol``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shlex
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SKILLS = REPO / "kb" / "skills"
VARIANTS = ("before", "after")
#: the keys of a YAML evidence record, in the order they are written (absent or None keys are left out)
RECORD_KEYS = ("kind", "task", "protocol", "before_ms", "after_ms", "speedup", "eager_ms", "before_vs_eager",
               "after_vs_eager", "hardware", "date", "command", "verdict", "notes")


# --------------------------------------------------------------------------------------------------
# discovery (regex over the YAML text: pyyaml may be missing on the GPU box)
# --------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Example:
    method: str
    yaml_path: str
    task: str
    before: str
    after: str

    def variant(self, which: str) -> str:
        return self.before if which == "before" else self.after


_ID_RE = re.compile(r"^\s*-\s*id:\s*['\"]?([a-z][a-z0-9_.\-]+)['\"]?\s*$")
_EX_KEY_RE = re.compile(r"^(\s*)example:\s*$")
_EX_FIELD_RE = re.compile(r"^\s*(task|before|after):\s*['\"]?([^'\"#]+?)['\"]?\s*(#.*)?$")


def discover(skills: Path, only: set[str] | None = None) -> tuple[list[Example], list[str]]:
    """Examples named by the method YAMLs, plus messages for methods without a usable example."""
    examples: list[Example] = []
    problems: list[str] = []
    for path in sorted((skills / "methods").glob("*.yaml")):
        lines = path.read_text().splitlines()
        method = None
        fields: dict[str, str] = {}
        in_example = False
        ex_indent = -1
        for line in lines:
            m = _ID_RE.match(line)
            if m and (method is None):
                method = m.group(1)
            m = _EX_KEY_RE.match(line)
            if m:
                in_example, ex_indent = True, len(m.group(1))
                continue
            if in_example:
                if line.strip() and (len(line) - len(line.lstrip())) <= ex_indent:
                    in_example = False
                    continue
                m = _EX_FIELD_RE.match(line)
                if m:
                    fields[m.group(1)] = m.group(2).strip()
        if method is None:
            problems.append(f"{path.name}: no method id found")
            continue
        if only and method not in only:
            continue
        if not {"task", "before", "after"} <= fields.keys():
            problems.append(f"{method}: no example (task/before/after) in {path.name}")
            continue
        paths = {k: skills / v for k, v in fields.items()}
        missing = [str(p.relative_to(skills)) for p in paths.values() if not p.is_file()]
        if missing:
            problems.append(f"{method}: example files missing: {', '.join(missing)}")
            continue
        examples.append(
            Example(method, str(path), str(paths["task"]), str(paths["before"]), str(paths["after"]))
        )
    return examples, problems


# --------------------------------------------------------------------------------------------------
# mode 1: judge both variants with the harness
# --------------------------------------------------------------------------------------------------


def _variant(result) -> dict:
    """What a report keeps of one EvalResult."""
    timing = (result.details or {}).get("timing") or {}
    return {"status": result.status, "correct": bool(result.correct), "ms": result.candidate_ms,
            "iqr_ms": result.candidate_iqr_ms, "eager_ms": result.baseline_ms, "eager_iqr_ms": result.baseline_iqr_ms,
            "vs_eager": round(result.speedup, 4) if result.speedup else None,
            "trials": timing.get("trials"), "cheat_check": result.cheat_check,
            "message": (result.message or "")[-600:], "build_log": (result.build_log or "")[-600:]}


def row_of(ex: Example, results: dict, skills: Path) -> dict:
    """One report row from the two EvalResults of an example (``results``: variant -> EvalResult)."""
    row = {"method": ex.method, "task": _rel(ex.task, skills), "before": _rel(ex.before, skills),
           "after": _rel(ex.after, skills), "protocol": results["after"].protocol or results["before"].protocol}
    for w in VARIANTS:
        row[f"{w}_result"] = _variant(results[w])
    failed = [w for w in VARIANTS if not (results[w].status == "ok" and results[w].correct)]
    if failed:
        row["status"] = "failed"
        row["message"] = "; ".join(f"{w}: {results[w].status} {results[w].message}"[:400] for w in failed)
        return row
    b, a = results["before"], results["after"]
    row.update(status="ok", message="", before_ms=round(b.candidate_ms, 5), after_ms=round(a.candidate_ms, 5),
               before_iqr_ms=round(b.candidate_iqr_ms or 0.0, 5), after_iqr_ms=round(a.candidate_iqr_ms or 0.0, 5),
               eager_ms=round(a.baseline_ms, 5), speedup=round(b.candidate_ms / a.candidate_ms, 4),
               before_vs_eager=round(b.speedup, 4), after_vs_eager=round(a.speedup, 4),
               trials=row["after_result"]["trials"])
    return row


def measure(args: argparse.Namespace) -> int:
    from kernelskill.pipeline.harness import EvalJob, LocalEvaluator
    from kernelskill.pipeline.harness.config import eval_config

    skills = Path(args.skills).resolve()
    only = set(args.methods.split(",")) if args.methods else None
    examples, problems = discover(skills, only)
    out_path = Path(args.out) if args.out else Path(os.environ.get("OUT") or ".") / "kb_evidence.json"
    command = "python benchmarks/kb_evidence.py " + " ".join(shlex.quote(a) for a in args.argv)
    cfg = eval_config({"timing_trials": args.trials, "min_timing_trials": min(10, args.trials)},
                      protocol=args.protocol, cache_dir=args.cache_dir or None)
    t_start = time.perf_counter()
    log(f"{len(examples)} examples under protocol {cfg.protocol}; {len(problems)} methods without a usable example")
    for p in problems:
        log(f"  missing: {p}")
    jobs = [EvalJob(ex.task, ex.variant(w), cfg, tag=f"{ex.method}:{w}") for ex in examples for w in VARIANTS]
    meta = {"command": _portable_command(command), "protocol": cfg.protocol, "missing": problems}
    done: dict[int, object] = {}
    rows: list[dict] = []
    lock = threading.Lock()  # one scheduler thread per GPU reports results

    def on_result(i: int, result) -> None:  # a row as soon as both variants of an example are judged
        with lock:
            done[i] = result
            ex = examples[i // 2]
            pair = (i // 2) * 2
            if not (pair in done and pair + 1 in done):
                return
            rows.append(row_of(ex, {"before": done[pair], "after": done[pair + 1]}, skills))
            r = rows[-1]
            log(f"{ex.method:32s} {r['status']:7s} " + (f"x{r['speedup']:.2f} (after x{r['after_vs_eager']:.2f} vs eager)"
                                                        if r["status"] == "ok" else r["message"][:200]))
            _write(out_path, dict(meta, partial=True, results=rows))

    evaluator = LocalEvaluator(cfg, build_jobs=args.jobs, on_result=on_result)
    evaluator.submit(jobs)
    order = {ex.method: n for n, ex in enumerate(examples)}
    rows.sort(key=lambda r: order[r["method"]])
    report = dict(meta, hardware=_gpu_name(), torch=_torch_version(), date=time.strftime("%Y-%m-%d", time.gmtime()),
                  judge="kernelskill.pipeline.harness (the checks every candidate gets)",
                  total_seconds=round(time.perf_counter() - t_start, 1), results=rows)
    _write(out_path, report)
    print_table(rows)
    log(f"total {report['total_seconds']} s; wrote {out_path}")
    return 0


def log(text: str) -> None:
    print(text, flush=True)


def _gpu_name() -> str:
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"


def _torch_version() -> str:
    import torch

    return str(torch.__version__)


def _write(path: Path, report: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(report, indent=1))
    tmp.replace(path)


def _rel(path: str, skills: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(skills))
    except ValueError:
        return path


def print_table(rows: list[dict]) -> None:
    head = (f"{'method':32s} {'status':7s} {'eager ms':>9s} {'before ms':>10s} {'after ms':>9s} {'speedup':>8s} "
            f"{'after/eager':>11s}")
    print(head)
    print("-" * len(head))
    for r in rows:
        def f(k, r=r, fmt="{:.4f}"):
            return fmt.format(r[k]) if isinstance(r.get(k), float) else "-"

        print(f"{r['method']:32s} {r['status']:7s} {f('eager_ms'):>9s} {f('before_ms'):>10s} {f('after_ms'):>9s} "
              f"{f('speedup', fmt='{:.2f}x'):>8s} {f('after_vs_eager', fmt='{:.2f}x'):>11s}")


# --------------------------------------------------------------------------------------------------
# mode 2: write evidence into the method YAMLs
# --------------------------------------------------------------------------------------------------


def evidence_record(row: dict, report: dict) -> dict | None:
    """The YAML evidence record of one report row; None when the row is not evidence (a variant failed)."""
    if row.get("status") != "ok" or "after_ms" not in row:
        return None
    legacy = "before_result" not in row  # a report of the earlier script (its own judge)
    notes = []
    if legacy:
        notes.append(f"measured by the evidence script's own judge ({report.get('protocol', '')})")
    else:
        notes.append(f"before and after judged by the harness under protocol {row['protocol']} (the checks every "
                     f"candidate gets)")
    if row.get("eager_ms"):
        notes.append(f"eager PyTorch {row['eager_ms']:.4f} ms")
    gain_ms = row["before_ms"] - row["after_ms"]
    verdict = "pays"
    if row["speedup"] < 1.0:
        verdict = "slower"
        notes.append("the method did not pay on this example")
    elif gain_ms <= max(row["before_iqr_ms"], row["after_iqr_ms"]):
        verdict = "no_gain"
        notes.append(f"no measurable gain on this example: the {gain_ms:.4f} ms saved is within the timing IQR")
    notes.append(f"IQR before {row['before_iqr_ms']:.4f} ms, after {row['after_iqr_ms']:.4f} ms, "
                 f"{row.get('trials') or 0} trials")
    after_vs = row.get("after_vs_eager")
    before_vs = row.get("before_vs_eager")
    if before_vs is None and row.get("eager_ms") and row.get("before_ms"):
        before_vs = round(row["eager_ms"] / row["before_ms"], 4)
    return {
        "kind": "measured",
        "task": row["task"],
        "protocol": None if legacy else row["protocol"],
        "before_ms": row["before_ms"],
        "after_ms": row["after_ms"],
        "speedup": row["speedup"],
        "eager_ms": row.get("eager_ms"),
        "before_vs_eager": before_vs,
        "after_vs_eager": after_vs,
        "hardware": report.get("hardware") or "unknown",
        "date": report.get("date") or time.strftime("%Y-%m-%d", time.gmtime()),
        "command": _portable_command(report.get("command", "python benchmarks/kb_evidence.py")),
        "verdict": verdict,
        "notes": "; ".join(notes),
    }


def _portable_command(command: str) -> str:
    """The command as a reader can rerun it: the box's output folder written as ``$OUT``."""
    return re.sub(r"--out \S*/([^/\s]+\.json)", r"--out $OUT/\1", command)


def render_evidence(record: dict, indent: int) -> list[str]:
    pad = " " * indent
    lines = [f"{pad}evidence:"]
    first = True
    for key in RECORD_KEYS:
        if key not in record or record[key] is None:
            continue
        value = record[key]
        text = json.dumps(value) if isinstance(value, str) else repr(value)
        prefix = f"{pad}  - " if first else f"{pad}    "
        lines.append(f"{prefix}{key}: {text}")
        first = False
    return lines


def replace_evidence(text: str, record: dict) -> str:
    """Replace (or add) the ``evidence:`` block of the single method item in ``text``."""
    lines = text.splitlines()
    item = next((i for i, ln in enumerate(lines) if _ID_RE.match(ln)), None)
    if item is None:
        raise ValueError("no '- id:' item found")
    indent = len(lines[item]) - len(lines[item].lstrip()) + 2  # keys of the item
    end = len(lines)
    for j in range(item + 1, len(lines)):
        ln = lines[j]
        if ln.strip() and not ln.lstrip().startswith("#") and len(ln) - len(ln.lstrip()) < indent:
            end = j
            break
    start = None
    for j in range(item, end):
        ln = lines[j]
        if re.match(rf"^ {{{indent}}}evidence:", ln):
            start = j
            break
    new = render_evidence(record, indent)
    if start is None:
        insert = end
        while insert > item + 1 and not lines[insert - 1].strip():
            insert -= 1
        lines[insert:insert] = new
    else:
        stop = start + 1
        while stop < end:
            ln = lines[stop]
            if ln.strip() and len(ln) - len(ln.lstrip()) <= indent and not ln.lstrip().startswith("- "):
                break
            if ln.strip() and len(ln) - len(ln.lstrip()) < indent:
                break
            stop += 1
        while stop > start + 1 and not lines[stop - 1].strip():
            stop -= 1
        lines[start:stop] = new
    return "\n".join(lines) + "\n"


def write_yaml(args: argparse.Namespace) -> int:
    import yaml

    report = json.loads(Path(args.write_yaml).read_text())
    skills = Path(args.skills).resolve()
    by_method = {r["method"]: r for r in report.get("results", [])}
    examples, _ = discover(skills)
    written, skipped = 0, []
    for ex in examples:
        row = by_method.get(ex.method)
        record = evidence_record(row, report) if row else None
        if record is None:
            skipped.append(f"{ex.method}: {row['status'] + ' ' + row.get('message', '')[:200] if row else 'not measured'}")
            continue
        path = Path(ex.yaml_path)
        new = replace_evidence(path.read_text(), record)
        data = yaml.safe_load(new)  # must still parse, with the record in place
        methods = data.get("methods") or []
        if not methods or methods[0].get("evidence", [{}])[0].get("after_ms") != record["after_ms"]:
            raise SystemExit(f"{path}: evidence block not written where expected")
        path.write_text(new)
        written += 1
    print(f"wrote evidence into {written} method files")
    for s in skipped:
        print("  skipped:", s)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--skills", default=str(DEFAULT_SKILLS))
    p.add_argument("--methods", default="", help="comma-separated method ids (default: all)")
    p.add_argument("--jobs", type=int, default=14, help="builds at a time (the harness's CPU build pool)")
    p.add_argument("--trials", type=int, default=50, help="the most timed calls per variant")
    p.add_argument("--protocol", default="strict", help="a protocol preset (strict, kernelbench) or a protocol file")
    p.add_argument("--cache-dir", default="", help="the harness's build cache (default: its own)")
    p.add_argument("--out", default="")
    p.add_argument("--write-yaml", default="", metavar="RESULTS_JSON")
    argv = sys.argv[1:] if argv is None else list(argv)
    args = p.parse_args(argv)
    args.argv = argv
    if args.write_yaml:
        return write_yaml(args)
    return measure(args)


if __name__ == "__main__":
    sys.exit(main())
