"""Every figure the README quotes is the tool's: the knowledge base's counts are `kb stats`'s, the H200 results
tables (and the sentences quoting them) and the committed compare files are what `bench report` / `bench
compare` compute from the published archives. A figure that drifts from the tool fails here; `python
benchmarks/readme_figures.py --write` puts the tool's figures back."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "readme_figures.py"
_spec = importlib.util.spec_from_file_location("readme_figures", SCRIPT)
figs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(figs)
README = (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory):
    """The three published suites imported once (bench import of each archive) for the whole module."""
    return figs.Reports(figs.import_suites(tmp_path_factory.mktemp("published")))


@pytest.fixture(scope="module")
def stats(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return figs.kb_stats(tmp_path_factory.mktemp("kb_home"))


@pytest.mark.slow  # builds the bundled KB (about 15 s of CPU)
def test_the_readme_kb_counts_are_kb_stats(stats: dict) -> None:
    wanted = figs.kb_figures(stats)
    assert figs.drift(README, wanted) == []
    assert wanted["kb.methods"] == str(stats["counts"]["methods"]) and int(wanted["kb.cases"]) > 100


def test_the_readme_results_recompute_from_the_published_archives(reports) -> None:
    assert figs.drift(README, figs.result_figures(reports)) == []


def test_the_committed_compare_files_are_what_bench_compare_writes(reports) -> None:
    files = figs.compare_files(reports)
    assert len(files) == 2 * len(figs.COMPARES)
    assert figs.file_drift(files) == []
    # the GPU seconds of the search's first round: the archives' own, not the figures written before the
    # re-verification of a later round stopped counting into earlier ones
    round1 = json.loads((figs.RESULTS / "search_k4_vs_k1_round1.json").read_text())
    assert round1["gpu_s"] == {"a": 114.9, "b": 239.6} and round1["llm_calls"] == {"a": 20, "b": 46}


def test_a_drifted_figure_is_named_and_write_puts_the_tools_back(reports) -> None:
    figures = figs.result_figures(reports) | {"kb.methods": "51"}
    stale = README.replace("<!-- fig:kb.methods -->", "<!-- fig:kb.methods -->4", 1)
    stale = re.sub(r"(<!-- fig:results.search -->\n.*?\| )2\.37x", r"\g<1>2.38x", stale, count=1, flags=re.S)
    problems = figs.drift(stale, figures)
    assert sorted(p.split()[2] for p in problems) == ["kb.methods", "results.search"], problems
    fixed = figs.put_figures(stale, figures)
    assert figs.drift(fixed, figures) == []
    assert fixed.count("\n") == stale.count("\n")  # the tables keep their lines and the list item's indent
    assert "\n  | level 1 #1 square GEMM |" in fixed


def test_every_figure_the_tool_computes_is_in_the_readme(reports, stats: dict) -> None:
    names = set(figs.readme_figures(README))
    assert set(figs.result_figures(reports)) | set(figs.kb_figures(stats)) == names
