"""A required profile column holding NaN, nothing, n/a or a word is refused naming the metric and the file, in
one line with exit 2 (issue 27, failure 10); it is never read as "not measured". An optional column may
still be n/a (ncu leaves some counters empty). The real ``query`` command on a real ncu capture of the
examples, with one cell changed."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelskill.cli import main
from kernelskill.retrieval.profile import load_profile

ROOT = Path(__file__).resolve().parents[1]
GEMM = ROOT / "examples" / "kernels" / "naive_gemm.py"
PROFILE = ROOT / "examples" / "profiles" / "naive_gemm.csv"
DURATION = "gpu__time_duration.avg"
DRAM = "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"


def _profile_with(tmp_path: Path, column: str, value: str) -> Path:
    rows = list(csv.reader(PROFILE.open()))
    rows[2][rows[0].index(column)] = value
    out = tmp_path / "capture.csv"
    with out.open("w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    return out


@pytest.mark.parametrize("value,shown", [("NaN", "'NaN'"), ("nan", "'nan'"), ("", "an empty cell"),
                                         ("n/a", "'n/a'"), ("-", "'-'"), ("fast", "'fast'")])
def test_a_required_column_without_a_number_is_refused_naming_the_metric(tmp_path: Path, value: str,
                                                                         shown: str) -> None:
    bad = _profile_with(tmp_path, DURATION, value)
    out = CliRunner().invoke(main, ["query", str(GEMM), "--profile", str(bad), "--home", str(tmp_path / "h"),
                                    "--json"])
    assert out.exit_code == 2, out.output
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1 and lines[0].startswith(f"error: {bad}:3: "), out.stderr
    assert "kernel_duration_ns" in lines[0] and DURATION in lines[0] and shown in lines[0], lines[0]
    assert "Traceback" not in out.output


def test_an_optional_column_may_still_be_not_measured(tmp_path: Path) -> None:
    profile = load_profile(_profile_with(tmp_path, DRAM, "NaN"))
    kernel = profile.dominant()
    assert kernel.fields["dram_throughput_pct"] is None
    assert "dram_throughput_pct" in {m.field for m in kernel.missing}
