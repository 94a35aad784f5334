"""Hostile or careless input files fail fast, in one line naming file, line and what is wrong, and change
nothing: a 347-byte YAML alias bomb, a 990-term predicate expression, and impossible profile values
(inf, 1e999, negative throughputs, 5000 %, a zero duration, misplaced thousands separators). ``--json``
output is strict JSON (no NaN or Infinity)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import BaseModel

from kernelskill.cli import main
from kernelskill.commands._common import Ctx, emit

SMALL = Path(__file__).parent / "data" / "skills_small"
ROOT = Path(__file__).resolve().parents[1]
GEMM = ROOT / "examples" / "kernels" / "naive_gemm.py"
PROFILE = ROOT / "examples" / "profiles" / "naive_gemm.csv"


def _run(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == code, result.output
    return result.stdout if code == 0 else result.stderr


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    h = tmp_path_factory.mktemp("kb") / "home"
    _run("kb", "init", "--home", str(h), "--skills", str(SMALL))
    return h


def _stats(home: Path) -> dict:
    return json.loads(_run("kb", "stats", "--home", str(home), "--json"))


def billion_laughs() -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    prev = "a"
    for name in "bcdefgh":
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
        prev = name
    lines.append(f"methods: [*{prev}]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("name,body,where", [
    ("bomb.yaml", billion_laughs(), "bomb.yaml:"),
    ("recursive.yaml", "cases: &c [*c]\n", "recursive.yaml:1:"),
    ("expr.yaml", "predicates:\n  - id: p_big\n    description: d\n    expr: \"" + "+".join(["x"] * 990) + "\"\n",
     "expr.yaml:2:"),
])
def test_hostile_skill_file_is_one_line_and_changes_nothing(home: Path, tmp_path: Path, name: str, body: str,
                                                            where: str) -> None:
    if name == "bomb.yaml":
        assert len(body) <= 400  # the size of the file that kept `kb add` busy for minutes
    before = _stats(home)
    bad = tmp_path / name
    bad.write_text(body)
    err = _run("kb", "add", str(bad), "--home", str(home), code=2)
    lines = [ln for ln in err.strip().splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1 and where in lines[0] and "Traceback" not in err, err
    assert _stats(home) == before and not (home / "skills" / name).exists()


def _profile_with(tmp_path: Path, column: str, value: str) -> Path:
    rows = list(csv.reader(PROFILE.open()))
    rows[2][rows[0].index(column)] = value
    out = tmp_path / "bad.csv"
    with out.open("w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    return out


DRAM = "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"
DURATION = "gpu__time_duration.avg"


@pytest.mark.parametrize("column,value,why", [
    (DRAM, "inf", "not a finite number"),
    (DRAM, "1e999", "not a finite number"),
    (DRAM, "-12.5", "negative"),
    (DRAM, "5000", "above 100 %"),
    (DRAM, "1,2,3,4", "not a number"),
    (DURATION, "0", "zero duration"),
    ("l1tex__throughput.avg.pct_of_peak_sustained_active", "950", "above 400 % of the active cycles' peak"),
])
def test_impossible_profile_values_are_refused_naming_the_metric(tmp_path: Path, column: str, value: str,
                                                                 why: str) -> None:
    bad = _profile_with(tmp_path, column, value)
    err = _run("query", str(GEMM), "--profile", str(bad), "--home", str(tmp_path / "h"), "--json", code=2)
    line = next(ln for ln in err.splitlines() if ln.startswith("error: "))
    assert f"{bad}:3:" in line and why in line and "Traceback" not in err, err
    field = {DRAM: "dram_throughput_pct", DURATION: "kernel_duration_ns"}.get(column, "l1_throughput_pct")
    assert field in line


def test_profile_at_the_ceiling_is_still_accepted(tmp_path: Path) -> None:
    from kernelskill.retrieval.profile import load_profile

    ok = load_profile(_profile_with(tmp_path, DRAM, "100.9"))  # ncu rounds sustained peaks a little over 100
    assert ok.dominant().fields["dram_throughput_pct"] == pytest.approx(100.0)
    # a cuBLAS GEMM's L2 throughput read 104.5 % on an H100: at the peak, not a broken profile
    over = load_profile(_profile_with(tmp_path, DRAM, "104.56"))
    assert over.dominant().fields["dram_throughput_pct"] == pytest.approx(100.0)


class _Model(BaseModel):
    speedup: float


def test_json_output_is_strict(capsys: pytest.CaptureFixture[str]) -> None:
    emit(Ctx(home=None, json=True), {"a": math.inf, "b": [math.nan, 1.5], "m": _Model(speedup=-math.inf),
                                     "t": (math.inf,)})

    def refuse(name: str) -> None:
        raise AssertionError(f"{name} in --json output")

    data = json.loads(capsys.readouterr().out, parse_constant=refuse)
    assert data == {"a": None, "b": [None, 1.5], "m": {"speedup": None}, "t": [None]}


def test_an_l1_reading_above_100_of_its_active_peak_is_read_and_clamped(tmp_path: Path) -> None:
    """Real ncu readings: the L1/TEX throughput of a shared-memory histogram read 170.05 % of the active
    cycles' peak on an H100; the profile is used, the value read as at the peak."""
    from kernelskill.retrieval.profile import load_profile

    prof = load_profile(_profile_with(tmp_path, "l1tex__throughput.avg.pct_of_peak_sustained_active", "170.05"))
    assert prof.dominant().fields["l1_throughput_pct"] == 100.0
