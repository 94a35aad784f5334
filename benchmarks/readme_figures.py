"""The README's figures, recomputed by the tool: the knowledge base's counts from ``kernelskill kb stats``, the
H200 results (tables and the sentences that quote them) and the committed compare files from the published
archives through ``bench import`` / ``bench report`` / ``bench compare``.

Each figure of README.md sits between ``<!-- fig:NAME -->`` and ``<!-- /fig -->`` (invisible when the
markdown is rendered); a committed compare file is a figure as a whole.

    python benchmarks/readme_figures.py            # check: every figure that differs, exit 1 if any
    python benchmarks/readme_figures.py --write    # put the recomputed figures and files in place

It builds a KB from the bundled skills and imports the three published suites into a temporary folder
(about a minute on a 2-core machine). ``tests/test_readme_figures.py`` runs the same check.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from kernelskill.cli import main
from kernelskill.commands._common import json_text
from kernelskill.pipeline.bench.compare import TIE, compare, markdown
from kernelskill.pipeline.bench.report import geomean, suite_report
from kernelskill.pipeline.bench.suite import Suite

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RESULTS = ROOT / "benchmarks" / "results" / "suite_h200"
#: the published suites: the KB arm, the ablation arm (no KB) and the search arm (K=4, F=2)
ARMS = ("kb", "none", "k4")
#: the committed compare files: (file stem, arm A, arm B, --upto-round)
COMPARES = (("ablation", "kb", "none", None),
            *((f"search_k4_vs_k1_round{n}", "kb", "k4", n) for n in (1, 2, 3)))
#: how the README names the search tasks
SEARCH_LABELS = {"L1/1_Square_matrix_multiplication_": "level 1 #1 square GEMM",
                 "L2/1_Conv2D_ReLU_BiasAdd": "level 2 #1 Conv2D + ReLU + bias",
                 "L2/12_Gemm_Multiply_LeakyReLU": "level 2 #12 Gemm + multiply + LeakyReLU",
                 "L2/76_Gemm_Add_ReLU": "level 2 #76 Gemm + add + ReLU",
                 "L3/43_MinGPTCausalAttention": "level 3 #43 causal attention"}
MARKER = re.compile(r"<!-- fig:(?P<name>[\w.-]+) -->(?P<body>.*?)<!-- /fig -->", re.S)


def cli(*args: str) -> str:
    """One kernelskill command in this process; its stdout (a failure raises with its message)."""
    result = CliRunner().invoke(main, list(args))
    if result.exit_code != 0:
        raise RuntimeError(f"kernelskill {' '.join(args)}: exit {result.exit_code}: {result.output.strip()}")
    return result.stdout


# ------------------------------------------------------------------------------------------- sources
def kb_stats(home: Path) -> dict[str, Any]:
    """``kb stats --json`` of ``home`` (built from the bundled skills when it has no KB yet)."""
    return json.loads(cli("kb", "stats", "--json", "--home", str(home)))


def import_suites(dest: Path) -> dict[str, Path]:
    """Each published suite as a reader would rebuild it: its manifest as ``suite.json``, then ``bench
    import`` of its runs archive."""
    out: dict[str, Path] = {}
    for arm in ARMS:
        suite = dest / arm
        suite.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(RESULTS / f"{arm}-suite.json", suite / "suite.json")
        cli("bench", "import", str(suite), str(RESULTS / f"{arm}-runs.tar.gz"), "--json")
        out[arm] = suite
    return out


class Reports:
    """``bench report`` of each suite, whole or as it stood after a round, computed once each."""

    def __init__(self, suites: dict[str, Path]) -> None:
        self.suites = suites
        self._cache: dict[tuple[str, int | None], dict[str, Any]] = {}

    def __call__(self, arm: str, upto_round: int | None = None) -> dict[str, Any]:
        key = (arm, upto_round)
        if key not in self._cache:
            self._cache[key] = suite_report(Suite.open(self.suites[arm]), upto_round=upto_round)
        return self._cache[key]

    def compare(self, a: str, b: str, upto_round: int | None = None) -> dict[str, Any]:
        """What ``bench compare A B [--upto-round N]`` prints with ``--json`` (and, as markdown, ``--md``)."""
        return compare(self(a, upto_round), self(b, upto_round))


# ------------------------------------------------------------------------------------------- figures
def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def kb_figures(stats: dict[str, Any]) -> dict[str, str]:
    counts, backing = stats["counts"], stats["backing"]
    return {"kb.methods": str(counts["methods"]), "kb.cases": str(counts["cases"]),
            "kb.bottlenecks": str(counts["bottlenecks"]), "kb.pays": str(backing["pays"]),
            "kb.no_gain": str(backing["no_gain"]), "kb.unmeasured": str(backing["methods"] - backing["measured"])}


def _row(label: str, group: dict[str, Any]) -> str:
    return (f"| {label} | {group['tasks']} | {group['correct']} | {_p(group['fast_p_eager']['1.0'])} "
            f"| {_x(group['geomean_speedup'])} | {_p(group['fast_p_compile']['1.0'])} "
            f"| {_x(group['geomean_speedup_compile'])} |")


def _subset_row(label: str, c: dict[str, Any], side: str) -> str:
    both = sum(t["in_both"] for t in c["tasks"])
    return (f"| {label} | {both} | {c['common_correct']} | | {_x(c['geomean'][side])} | "
            f"| {_x(c['geomean_compile'][side])} |")


def suite_table(r: Reports) -> str:
    kb, none, k4 = r("kb"), r("none"), r("k4")
    levels = [kb["levels"][k] for k in sorted(kb["levels"], key=int)]

    def per_level(get: Callable[[dict[str, Any]], str]) -> str:
        return " / ".join(get(g) for g in levels)

    correct = "all" if all(g["correct"] == g["tasks"] for g in levels) else per_level(lambda g: str(g["correct"]))
    ablation, search = r.compare("kb", "none"), r.compare("kb", "k4")
    rounds = kb["options"]["rounds"]
    short = [t for t in k4["tasks"] if _rounds_of(k4, t["task"]) < k4["options"]["rounds"]]
    note = "".join(f"; level {t['level']} #{t['task'].split('/')[-1].split('_')[0]}: "
                   f"{_rounds_of(k4, t['task'])} rounds" for t in short)
    return "\n".join([
        "| | tasks | correct | fast_1 vs eager | geomean vs eager | fast_1 vs torch.compile | geomean vs torch.compile |",
        "|---|---:|---:|---:|---:|---:|---:|",
        _row(f"KB arm, all, {rounds} rounds", kb["overall"]),
        f"| KB arm, level {' / '.join(sorted(kb['levels'], key=int))} | {per_level(lambda g: str(g['tasks']))} "
        f"| {correct} | {per_level(lambda g: _p(g['fast_p_eager']['1.0']))} "
        f"| {per_level(lambda g: _x(g['geomean_speedup']))} | {per_level(lambda g: _p(g['fast_p_compile']['1.0']))} "
        f"| {per_level(lambda g: _x(g['geomean_speedup_compile']))} |",
        _subset_row(f"KB arm on the {ablation['common_correct']} ablation tasks", ablation, "a"),
        _row(f"no-KB arm on the same {none['overall']['tasks']}, {none['options']['rounds']} rounds", none["overall"]),
        _subset_row(f"KB arm on the {search['common_correct']} search tasks, {rounds} rounds (K=1, F=1)", search, "a"),
        _row(f"search arm on the same {k4['overall']['tasks']}, {k4['options']['rounds']} rounds "
             f"(K={k4['options'].get('candidates', 1)}, F={k4['options'].get('frontier', 1)}{note})", k4["overall"]),
    ])


def _rounds_of(report: dict[str, Any], task: str) -> int:
    """The last round a task's run reached (its last round with a correct candidate)."""
    row = next(t for t in report["tasks"] if t["task"] == task)
    return max((int(k) for k in row.get("by_round") or {}), default=0)


def search_table(r: Reports) -> str:
    rounds = r("kb")["options"]["rounds"]
    c = r.compare("kb", "k4", rounds)
    lines = [f"| task | K=1 after {rounds} rounds | K=4 after {rounds} rounds | K=1 GPU-s | K=4 GPU-s |",
             "|---|---:|---:|---:|---:|"]
    for t in (t for t in c["tasks"] if t["in_both"]):
        reached = _rounds_of(r("k4", rounds), t["task"])
        b = _x(t["b"]["speedup"]) + (f" after {reached} rounds" if reached < rounds else "")
        b += " (tie)" if t["winner"] == "tie" else ""
        lines.append(f"| {SEARCH_LABELS.get(t['task'], t['task'])} | {_x(t['a']['speedup'])} | {b} "
                     f"| {t['a']['gpu_s']:.0f} | {t['b']['gpu_s']:.0f} |")
    lines.append(f"| geomean over eager / torch.compile | {_x(c['geomean']['a'])} / {_x(c['geomean_compile']['a'])} "
                 f"| {_x(c['geomean']['b'])} / {_x(c['geomean_compile']['b'])} | {c['gpu_s']['a']:.0f} "
                 f"| {c['gpu_s']['b']:.0f} |")
    return "\n".join(lines)


WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}


def _wins(c: dict[str, Any]) -> str:
    w, n = c["wins"], c["common_correct"]
    ties = f" with {w['tie']} tie{'s' if w['tie'] != 1 else ''}" if w["tie"] else ""
    return f"{w['b']} of {n} tasks{ties}"


def search_rounds_text(r: Reports) -> str:
    """The sentence that walks the search against the single path round by round."""
    rounds = r("kb")["options"]["rounds"]
    c = {n: r.compare("kb", "k4", n) for n in range(1, rounds + 1)}
    last = c[rounds]
    early = ", ".join(f"on {_wins(c[n])} after round {n} ({_x(c[n]['geomean']['b'])} against "
                      f"{_x(c[n]['geomean']['a'])})" for n in range(1, rounds))
    calls, gpu = last["llm_calls"], last["gpu_s"]
    first = c[1]
    return (f"After the same number of rounds the search arm was ahead {early} and on {_wins(last)} after round "
            f"{rounds}, with {calls['b'] / calls['a']:.1f}x the LLM calls ({calls['b']} against {calls['a']}) "
            f"and {gpu['b'] / gpu['a']:.1f}x the GPU-seconds ({gpu['b']:.0f} against {gpu['a']:.0f}). At about "
            f"the same GPU time the search still led: its first round ({first['gpu_s']['b']:.0f} GPU-s, "
            f"{first['llm_calls']['b']} calls) against the single path's {WORDS.get(rounds, rounds)} ({gpu['a']:.0f} GPU-s, "
            f"{calls['a']} calls), {_x(first['geomean']['b'])} against {_x(last['geomean']['a'])} over eager.")


def final_picks_text(r: Reports) -> str:
    """The sentence on what the runs hand back (their final picks) against the best candidates found."""
    kb, none = r("kb"), r("none")
    rows = [t for rep in (kb, none, r("k4")) for t in rep["tasks"] if t["status"] == "finished"]
    differ = sum(1 for t in rows if t.get("final_speedup") is not None and t.get("speedup") is not None
                 and t["final_candidate"] != t["best_candidate"])
    common = [t["task"] for t in r.compare("kb", "none")["tasks"] if t["in_both"]]

    def final(rep: dict[str, Any], key: str) -> float | None:
        values = [t[key] for t in rep["tasks"] if t["task"] in common and t.get(key)]
        return geomean(values) if len(values) == len(common) else None

    wins = {"a": 0, "b": 0, "tie": 0}
    for name in common:
        a, b = (next(t["final_speedup"] for t in rep["tasks"] if t["task"] == name) for rep in (kb, none))
        if a and b:
            wins["tie" if abs(a / b - 1) <= TIE else "a" if a > b else "b"] += 1
    return (f"They differ on {differ} of the {len(rows)} finished runs: a reviewer turned down a faster candidate "
            f"as within noise, or a re-verification failed. By final picks the KB arm is "
            f"{_x(kb['overall']['final_geomean_speedup'])} over eager and "
            f"{_x(kb['overall']['final_geomean_speedup_compile'])} over torch.compile on its "
            f"{kb['overall']['tasks']} tasks. On the {len(common)} ablation tasks it is "
            f"{_x(final(kb, 'final_speedup'))} / {_x(final(kb, 'final_speedup_compile'))}, against "
            f"{_x(final(none, 'final_speedup'))} / {_x(final(none, 'final_speedup_compile'))} for the no-KB arm, "
            f"with a {wins['a']} / {wins['b']} / {wins['tie']} split of wins (KB / no KB / tie).")


def result_figures(r: Reports) -> dict[str, str]:
    return {"results.suites": suite_table(r), "results.search": search_table(r),
            "results.search_rounds": search_rounds_text(r), "results.final_picks": final_picks_text(r)}


def compare_files(r: Reports) -> dict[Path, str]:
    """Each committed compare file as ``bench compare --md`` and ``--json`` write it."""
    out: dict[Path, str] = {}
    for stem, a, b, upto in COMPARES:
        c = r.compare(a, b, upto)
        out[RESULTS / f"{stem}.md"] = markdown(c)
        out[RESULTS / f"{stem}.json"] = json_text(c) + "\n"
    return out


# ------------------------------------------------------------------------------------------- check / write
def _shown(body: str) -> str:
    """A figure as shown: a block (a table on lines of its own, maybe indented in a list item) dedented; a
    figure inside a paragraph with its whitespace folded (the paragraph may be wrapped by hand)."""
    if body.startswith("\n"):
        return textwrap.dedent(body).strip("\n ")
    return " ".join(body.split())


def readme_figures(text: str) -> dict[str, str]:
    """The figures README.md shows now, by name."""
    return {m["name"]: _shown(m["body"]) for m in MARKER.finditer(text)}


def drift(text: str, figures: dict[str, str]) -> list[str]:
    """One line per figure of ``figures`` that the text lacks or shows otherwise."""
    shown = readme_figures(text)
    out = []
    for name, value in figures.items():
        if name not in shown:
            out.append(f"README.md: no figure {name} (<!-- fig:{name} -->...<!-- /fig -->)")
        elif shown[name] != (value if "\n" in value else " ".join(value.split())):
            out.append(f"README.md: figure {name} shows {shown[name]!r}; the tool says {value!r}")
    return out


def file_drift(files: dict[Path, str]) -> list[str]:
    out = []
    for path, content in files.items():
        old = path.read_text(encoding="utf-8") if path.is_file() else None
        if old is None:
            out.append(f"{path.relative_to(ROOT)}: missing")
        elif (json.loads(old) != json.loads(content)) if path.suffix == ".json" else old != content:
            out.append(f"{path.relative_to(ROOT)}: differs from what bench compare writes")
    return out


def put_figures(text: str, figures: dict[str, str]) -> str:
    def sub(m: re.Match[str]) -> str:
        name, body = m["name"], m["body"]
        if name not in figures:
            return m.group(0)
        if _shown(body) == _shown(figures[name]) if not body.startswith("\n") else False:
            return m.group(0)  # the same figure, wrapped by hand
        if not body.startswith("\n"):
            return f"<!-- fig:{name} -->{figures[name]}<!-- /fig -->"
        line_start = text.rfind("\n", 0, m.start()) + 1
        indent = text[line_start:m.start()]  # a block inside a list item keeps the item's indentation
        lines = "".join(f"{indent}{line}\n" for line in figures[name].splitlines())
        return f"<!-- fig:{name} -->\n{lines}{indent}<!-- /fig -->"

    return MARKER.sub(sub, text)


def all_figures(work: Path) -> tuple[dict[str, str], dict[Path, str]]:
    reports = Reports(import_suites(work / "suites"))
    figures = kb_figures(kb_stats(work / "home")) | result_figures(reports)
    return figures, compare_files(reports)


def main_(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="Put the recomputed figures and files in place.")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="readme_figures_") as tmp:
        figures, files = all_figures(Path(tmp))
    text = README.read_text(encoding="utf-8")
    if args.write:
        README.write_text(put_figures(text, figures), encoding="utf-8")
        for path, content in files.items():
            path.write_text(content, encoding="utf-8")
    problems = drift(README.read_text(encoding="utf-8"), figures) + file_drift(files)
    for line in problems:
        print(line)
    print(f"{len(figures)} figures and {len(files)} files checked: {len(problems)} differ")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main_())
