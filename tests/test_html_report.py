"""``kernelskill runs report RUN --html FILE``: a self-contained page, checked as text and in a real browser.

The run is a real one: the closed loop over five rounds with the real openai client against the local test
server (the LLM's answers) and the scripted evaluator at the GPU boundary. The browser is Chromium driven by
playwright, headless, with every request that is not the page's own file aborted: the page must render
from itself alone. The browser tests are skipped when playwright or Chromium is not installed.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kernelskill.cli import main
from kernelskill.pipeline.runs import RunStore
from kernelskill.pipeline.runs import html as page
from tests.openai_test_server import ScriptedOpenAI
from tests.test_loop import make_loop
from tests.test_loop_helpers import TASK, main_script

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def ks(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A five-round run: a compile error, a repair, accepted and rejected optimizations, a mismatch."""
    home = tmp_path_factory.mktemp("home")
    task = home / "relu2.py"
    task.write_text(TASK)
    with ScriptedOpenAI(main_script(timeout_fault=False)) as server:
        loop, _ = make_loop(home, task, server.base_url)
        assert loop.execute().status == "finished"
    return home, loop.run.id


def events(home: Path, run_id: str) -> list[dict[str, Any]]:
    return RunStore(home / "runs").open(run_id).log.events


def write_report(home: Path, run_id: str, out: Path) -> dict[str, Any]:
    result = ks("runs", "report", run_id, "--home", str(home), "--html", str(out), "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_page_is_one_file_that_fetches_nothing(finished_run: tuple[Path, str], tmp_path: Path) -> None:
    home, run_id = finished_run
    out = tmp_path / "report" / "run.html"
    data = write_report(home, run_id, out)
    text = out.read_text()
    assert data["html"] == str(out) and text.startswith("<!DOCTYPE html>")
    # no external resource of any kind: the only URL is the SVG namespace (a name, never fetched)
    assert re.findall(r"https?://[^\s\"'<>]+", text) == ["http://www.w3.org/2000/svg"]
    assert not re.search(r"\b(src|href)\s*=", text) and "@import" not in text and "url(" not in text
    assert "default-src 'none'" in text  # the CSP forbids fetching anyway
    # the JSON names every candidate with the numbers of the run's eval events
    evals = {e["data"]["candidate"]: e["data"]["result"] for e in events(home, run_id)
             if e["type"] == "eval" and not e["step"].startswith("verify")}
    assert [c["candidate"] for c in data["candidates"]] == list(evals)
    for c in data["candidates"]:
        assert c["candidate_ms"] == evals[c["candidate"]].get("candidate_ms")
        assert c["status"] == (evals[c["candidate"]]["status"])
    human = ks("runs", "report", run_id, "--home", str(home), "--html", str(out))
    assert human.exit_code == 0 and human.output.strip() == f"wrote {out} (6 candidates)"


def test_bad_html_target_is_one_line(finished_run: tuple[Path, str], tmp_path: Path) -> None:
    home, run_id = finished_run
    result = ks("runs", "report", run_id, "--home", str(home), "--html", str(tmp_path))
    assert result.exit_code == 2 and result.output.strip().startswith("error: --html")
    assert "is a directory" in result.output and len(result.output.strip().splitlines()) == 1


def test_plot_building_blocks() -> None:
    assert page.nice_ticks(0, 2.4) == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
    assert page.nice_ticks(0, 5) == [0, 1, 2, 3, 4, 5]
    empty = page.plot_svg([], title="nothing yet", x_label="round", y_label="speedup")
    assert empty.startswith("<svg") and empty.endswith("</svg>") and 'class="point"' not in empty
    svg = page.plot_svg([page.Series("a<b", [(0, 1.5), (1, float("2.25"))], labels=["x & y", "z"])],
                        title="t", x_label="x", y_label="y", hlines=[(1.0, "eager")])
    assert svg.count('class="point"') == 2 and 'data-y="2.25"' in svg and "a&lt;b" in svg and "x &amp; y" in svg
    table = page.table_html(["n", "name"], [[1.5, "</td><script>"], [None, True]])
    assert "&lt;/td&gt;&lt;script&gt;" in table and 'data-value="1.5"' in table and ">yes<" in table
    html = page.page("t", [table], data={"x": float("nan"), "s": "</script>"})
    assert '"x": null' in html and "<\\/script>" in html


# -- in a real browser ------------------------------------------------------------------------------------
def _chromium() -> str:
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    exe = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(exe).is_file():
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    return exe


@pytest.fixture(scope="module")
def browser() -> Any:
    exe = _chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


def open_offline(browser: Any, path: Path) -> tuple[Any, list[str]]:
    """The page, with every request other than its own file aborted and recorded."""
    tab = browser.new_page()
    asked: list[str] = []

    def route(r: Any) -> None:
        if r.request.url.startswith("file:") and r.request.url.endswith(path.name):
            r.continue_()
        else:
            asked.append(r.request.url)
            r.abort()

    tab.route("**/*", route)
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.goto(path.as_uri())
    assert errors == [], errors
    return tab, asked


def test_page_renders_offline_and_its_numbers_match_the_run(browser: Any, finished_run: tuple[Path, str],
                                                             tmp_path: Path) -> None:
    home, run_id = finished_run
    out = tmp_path / "run.html"
    write_report(home, run_id, out)
    shown = ks("runs", "show", run_id, "--home", str(home), "--json")
    assert shown.exit_code == 0
    run_json = json.loads(shown.stdout)
    tab, asked = open_offline(browser, out)
    assert asked == []  # nothing but the file itself was requested

    # the plot renders: a visible SVG with one marker per candidate, at its speedup (failed ones at 0)
    box = tab.locator("svg#speedup-plot").bounding_box()
    assert box is not None and box["width"] > 100 and box["height"] > 100
    points = tab.eval_on_selector_all("svg#speedup-plot .point", "els => els.map(e => [e.dataset.series, "
                                      "Number(e.dataset.x), Number(e.dataset.y), e.getBoundingClientRect().width])")
    assert all(width > 0 for *_, width in points)
    plotted = sorted((x, y) for _, x, y, _ in points)
    expected = sorted((a["round"], a["speedup"] or 0.0) for a in run_json["trajectory"])
    assert plotted == expected  # data-x, data-y carry the exact values
    assert {s for s, *_ in points} == {"accepted", "correct, not accepted", "failed (shown at 0)"}
    step_line = tab.locator('svg#speedup-plot polyline[data-series="best so far"]').bounding_box()
    assert step_line is not None and step_line["width"] > 0

    # the table: one row per candidate; its numbers are the events' numbers
    rows = tab.eval_on_selector_all("#candidates tbody tr:not(.detail)", "rows => rows.map(r => Object.fromEntries("
                                    "Array.from(r.cells).map(c => [c.dataset.col, c.dataset.value])))")
    evals = {e["data"]["candidate"]: e["data"]["result"] for e in events(home, run_id)
             if e["type"] == "eval" and not e["step"].startswith("verify")}
    trajectory = run_json["trajectory"]
    assert len(rows) == len(trajectory) == len(evals)
    for row, a in zip(rows, trajectory, strict=True):
        result = evals[a["candidate"]]
        assert int(row["round"]) == a["round"] and row["status"] == a["result_class"]
        assert row["method"] == (a.get("method") or "")
        for col, value in (("speedup", a.get("speedup")), ("candidate ms", result.get("candidate_ms")),
                           ("eager ms", result.get("baseline_ms")), ("IQR ms", result.get("candidate_iqr_ms"))):
            assert (float(row[col]) if row[col] else None) == (pytest.approx(value) if value is not None else None)
    shown_text = tab.locator("#candidates tbody tr:not(.detail)").nth(2).inner_text()
    assert "1.9000" in shown_text and "vectorized_access_16b" in shown_text

    # the summary says what runs show says
    summary = dict(zip(tab.locator("dl.summary dt").all_inner_texts(),
                       tab.locator("dl.summary dd").all_inner_texts(), strict=True))
    assert summary["run"] == run_id and summary["status"] == run_json["status"] == "finished"
    assert float(summary["best speedup"]) == pytest.approx(run_json["best_speedup"])
    assert int(summary["tokens"]) == run_json["tokens"]
    embedded = tab.evaluate("JSON.parse(document.getElementById('page-data').textContent)")
    assert embedded["summary"]["best_speedup"] == run_json["best_speedup"]

    # the columns sort on click (inline script): fastest first after two clicks on "speedup"
    # each review is whole and readable: a line under its candidate across the table, inside the page
    reviews = [a.get("review") for a in trajectory]
    assert sum(bool(r) for r in reviews) >= 3

    def review_lines() -> list[list[Any]]:
        return tab.eval_on_selector_all(
            "#candidates tbody tr", "rows => rows.map(r => [r.classList.contains('detail'), r.innerText, "
            "r.cells[0].getBoundingClientRect().width, r.getBoundingClientRect().right])")

    lines = review_lines()
    table_box = tab.locator("#candidates").bounding_box()
    width = tab.evaluate("document.documentElement.clientWidth")
    pairs = [(lines[i][1], lines[i + 1]) for i in range(len(lines) - 1) if not lines[i][0]]
    shown_reviews = [nxt[1] if nxt[0] else None for _, nxt in pairs] + ([None] if not lines[-1][0] else [])
    assert [r.split(":", 1)[1].strip() if r else None for r in shown_reviews] == [r or None for r in reviews]
    for is_detail, _, cell_width, right in lines:
        if is_detail:
            assert cell_width >= 0.95 * table_box["width"] and right <= width
    assert tab.evaluate("Array.from(document.querySelectorAll('.scroll')).every(d => d.scrollWidth <= "
                        "d.clientWidth)")  # nothing hidden past the page's edge

    # the columns sort on click (inline script): fastest first after two clicks on "speedup", each review
    # still under its own candidate
    header = tab.locator('#candidates th[data-col="speedup"]')
    header.click()
    header.click()
    first = tab.locator("#candidates tbody tr:not(.detail)").first.locator('td[data-col="speedup"]').inner_text()
    assert float(first) == pytest.approx(max(a["speedup"] or 0 for a in trajectory))
    by_text = {}
    after = review_lines()
    for i, (is_detail, text, *_) in enumerate(after):
        if not is_detail:
            by_text[text] = after[i + 1][1] if i + 1 < len(after) and after[i + 1][0] else None
    assert sorted(map(str, by_text.values())) == sorted(map(str, (nxt[1] if nxt[0] else None for _, nxt in pairs)))
    for text, review in by_text.items():
        before = next(nxt for row, nxt in pairs if row == text)
        assert review == (before[1] if before[0] else None)
    tab.close()


def test_a_run_without_candidates_still_renders(browser: Any, tmp_path: Path) -> None:
    home = tmp_path / "home"
    task = tmp_path / "relu2.py"
    task.write_text(TASK)
    first = ks("optimize", str(task), "--llm", "exchange", "--home", str(home), "--retriever",
               f"{Path(__file__).with_name('test_loop_helpers.py')}:StandInRetriever")
    assert first.exit_code == 3, first.output
    run_id = next((home / "runs").iterdir()).name
    out = tmp_path / "paused.html"
    write_report(home, run_id, out)
    tab, asked = open_offline(browser, out)
    assert asked == []
    box = tab.locator("svg#speedup-plot").bounding_box()
    assert box is not None and box["width"] > 0
    assert tab.locator("#candidates tbody tr").count() == 0
    facts = dict(zip(tab.locator("dl.summary dt").all_inner_texts(), tab.locator("dl.summary dd").all_inner_texts(),
                     strict=True))
    assert facts["answered by"] == "no answer yet (exchange)" and facts["status"] == "paused"
    tab.close()


# -- the suite page (bench report --html) in a real browser ----------------------------------------------------
RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "suite_h200"


@pytest.fixture(scope="module")
def published_suite_page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The published 12-task H200 suite, imported from its archive and reported with --html."""
    suite = tmp_path_factory.mktemp("suite")
    shutil.copyfile(RESULTS / "kb-suite.json", suite / "suite.json")
    assert ks("bench", "import", str(suite), str(RESULTS / "kb-runs.tar.gz")).exit_code == 0
    out = suite / "report.html"
    result = ks("bench", "report", str(suite), "--html", str(out), "--json")
    assert result.exit_code == 0, result.output
    return out, json.loads(result.stdout)


def _is_round(value: float) -> bool:
    """1, 2 or 5 times a power of ten (or 0)."""
    if value == 0:
        return True
    mantissa = value / 10 ** math.floor(math.log10(value) + 1e-9)
    return any(abs(mantissa - m) < 1e-6 for m in (1, 2, 5))


def test_the_suite_page_shows_whole_task_names_and_round_ticks(browser: Any, published_suite_page) -> None:
    out, report = published_suite_page
    tab, asked = open_offline(browser, out)
    assert asked == []
    for plot in ("task-bars", "speedup-histogram"):
        svg = tab.locator(f"svg#{plot}").bounding_box()
        assert svg is not None and svg["width"] > 100
    # every task's name whole (its level prefix too), drawn inside the plot, none over another
    labels = tab.eval_on_selector_all("svg#task-bars text.task-label", "els => els.map(e => { const r = "
                                      "e.getBoundingClientRect(); return [e.textContent, r.left, r.top, r.right, "
                                      "r.bottom]; })")
    svg = tab.locator("svg#task-bars").bounding_box()
    assert [name for name, *_ in labels] == [t["task"] for t in report["tasks"]]
    assert all(name.startswith(("L1/", "L2/", "L3/")) for name, *_ in labels)
    for name, left, top, right, bottom in labels:
        assert svg["x"] <= left and right <= svg["x"] + svg["width"], name
        assert svg["y"] <= top and bottom <= svg["y"] + svg["height"], name
    for (_, _, _, right, _), (_, left, *_) in zip(labels, labels[1:], strict=False):
        assert right <= left + 0.5  # side by side, no overlap
    # the y ticks fall on round values: 1, 2, 5 times a power of ten
    speedups = tab.eval_on_selector_all("svg#task-bars text.y-tick", "els => els.map(e => e.textContent)")
    counts = tab.eval_on_selector_all("svg#speedup-histogram text.y-tick", "els => els.map(e => e.textContent)")
    assert "1x" in speedups and len(speedups) >= 5 and all(s.endswith("x") for s in speedups)
    assert all(_is_round(float(s[:-1])) for s in speedups), speedups
    values = [float(c) for c in counts]  # a linear count axis: from 0, whole tasks, one round step
    steps = {b - a for a, b in zip(values, values[1:], strict=False)}
    assert values[0] == 0 and all(v.is_integer() for v in values) and len(steps) == 1
    assert _is_round(steps.pop()), counts
    best = max(t["speedup"] for t in report["tasks"] if t["speedup"])
    assert max(float(s[:-1]) for s in speedups) >= best  # the axis reaches the fastest task
    tab.close()


def test_round_speedup_ticks() -> None:
    from kernelskill.pipeline.bench.html import speedup_ticks

    assert speedup_ticks(1.3) == [0.5, 1, 2]
    assert speedup_ticks(29.5) == [0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50]
    assert speedup_ticks(150) == [0.005, 0.01, 0.1, 1, 10, 100, 200]
