"""ncu profile import on the real CSVs captured on the H200 (examples/profiles/), and on variants of
them: human units, the other metric spelling, missing columns, several launches, bad files."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from kernelskill.errors import KernelskillError
from kernelskill.retrieval.profile import (
    base_kernel_name,
    capture_metrics,
    load_field_map,
    load_profile,
    parse_csv_text,
    parse_number,
    unit_factor,
)

PROFILES = Path(__file__).resolve().parents[1] / "examples" / "profiles"


def _table(name: str) -> tuple[list[str], list[str], list[list[str]]]:
    rows = list(csv.reader((PROFILES / name).open()))
    return rows[0], rows[1], rows[2:]


def _write(header: list[str], units: list[str], body: list[list[str]]) -> str:
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL)
    w.writerow(header)
    w.writerow(units)
    w.writerows(body)
    return out.getvalue()


def _drop(name: str, predicate) -> str:
    header, units, body = _table(name)
    keep = [i for i, h in enumerate(header) if not predicate(h)]
    return _write([header[i] for i in keep], [units[i] for i in keep], [[r[i] for i in keep] for r in body])


ACCESS_FIELDS = {"global_sectors", "global_sectors_ideal", "smem_wavefronts", "smem_wavefronts_ideal",
                 "global_load_sectors", "global_load_requests", "global_store_sectors", "global_store_requests",
                 "branch_uniform_pct"}


def test_naive_gemm_base_units() -> None:
    prof = load_profile(PROFILES / "naive_gemm.csv")
    assert prof.units == "base" and prof.launches == 1
    k = prof.dominant()
    assert k.base_name == "naive_gemm_kernel" and not k.vendor and k.launches == 1
    f = k.fields
    assert f["kernel_duration_ns"] == 3_137_984.0  # "3,137,984" in the CSV
    assert f["l1_throughput_pct"] == pytest.approx(99.31)
    assert f["dram_throughput_pct"] == pytest.approx(0.31)
    assert f["sm_throughput_pct"] == pytest.approx(65.52)
    assert f["registers_per_thread"] == 32
    assert f["stall_long_scoreboard_ratio"] == pytest.approx(0.52)
    assert f["warps_eligible_cnt"] == pytest.approx(1.89)  # per cycle, not the 11.6 M cycle sum
    assert f["pred_on_threads_per_inst"] == pytest.approx(31.98)  # .ratio, not .max_rate (always 32)
    assert k.sources["stall_long_scoreboard_ratio"] == \
        "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.ratio"
    # captured before the access and divergence counters were asked for: exactly those are named missing
    assert {m.field for m in k.missing} == ACCESS_FIELDS


def test_human_units_convert_to_base() -> None:
    base = load_profile(PROFILES / "naive_gemm.csv").dominant().fields
    human = load_profile(PROFILES / "naive_gemm_human.csv")
    assert human.units == "human"  # ms, Kbyte, Mbyte were converted
    for name, value in base.items():
        assert human.dominant().fields[name] == pytest.approx(value, rel=0.02, abs=0.01), name
    assert human.dominant().fields["kernel_duration_ns"] == pytest.approx(3_137_984.0)
    assert human.dominant().fields["dram_bytes_read"] == pytest.approx(33_606_144.0)


def test_other_metric_spelling_is_accepted_and_flagged() -> None:
    text = _drop("naive_gemm.csv", lambda h: "_per_warp_active" in h)
    prof = parse_csv_text(text, "gemm_sections.csv")
    k = prof.dominant()
    assert k.sources["stall_long_scoreboard_ratio"].startswith("smsp__average_warps_issue_stalled")
    assert k.fields["stall_long_scoreboard_ratio"] == pytest.approx(21.57)
    assert any("per issue" in n for n in prof.notes)


def test_missing_optional_field_is_named_with_the_columns_looked_for() -> None:
    text = _drop("relu_vec4.csv", lambda h: "dram_throughput" in h or "dram__throughput" in h)
    k = parse_csv_text(text, "relu_no_dram.csv").dominant()
    miss = {m.field: m.looked_for for m in k.missing}
    assert "dram_throughput_pct" in miss
    assert "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed" in miss["dram_throughput_pct"]
    assert "dram_throughput_pct" not in k.fields


def test_missing_duration_is_an_error_naming_the_field() -> None:
    text = _drop("relu_vec4.csv", lambda h: h.startswith("gpu__time_duration"))
    with pytest.raises(KernelskillError, match=r"relu\.csv: no column for kernel_duration_ns \(looked for "
                                                r"gpu__time_duration\.avg"):
        parse_csv_text(text, "relu.csv")


def test_multi_kernel_forward_dominant_by_total_and_vendor_flag() -> None:
    prof = load_profile(PROFILES / "linear_gelu_residual.csv")
    assert prof.launches == 3
    dom = prof.dominant()
    assert dom.vendor and "gemm" in dom.base_name and dom.base_name.startswith("sm80_xmma")
    custom = {k.base_name: k for k in prof.kernels if not k.vendor}
    assert set(custom) == {"gelu_kernel", "residual_add_kernel"}


def test_several_launches_sum_for_dominance() -> None:
    header, units, body = _table("linear_gelu_residual.csv")
    name = header.index("Kernel Name")
    dur = header.index("gpu__time_duration.avg")
    gelu = next(r for r in body if r[name].startswith("gelu_kernel"))
    resid = next(r for r in body if r[name].startswith("residual_add_kernel"))
    one_big = list(resid)
    one_big[dur] = "100,000"  # 100 us once
    rows = [one_big] + [list(gelu) for _ in range(3)]  # 3 x 54 us
    prof = parse_csv_text(_write(header, units, rows), "multi.csv")
    assert prof.launches == 4
    dom = prof.dominant()
    assert dom.base_name == "gelu_kernel" and dom.launches == 3
    assert dom.total_duration_ns == pytest.approx(3 * 54_144)
    assert dom.fields["kernel_duration_ns"] == pytest.approx(54_144)  # per launch


def test_prof_lines_around_the_csv_are_ignored() -> None:
    text = "==PROF== Connected to process 1\n" + (PROFILES / "row_softmax.csv").read_text() + \
        "==PROF== Disconnected from process 1\n"
    assert parse_csv_text(text, "x").dominant().base_name == "row_softmax_kernel"


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"hello,world\n1,2\n", "not an ncu raw-page CSV"),
        (b"", "empty profile"),
        (b'"ID","Kernel Name","gpu__time_duration.avg"\n"","","ns"\n', "no kernel rows"),
        (b'"ID","Kernel Name","gpu__time_duration.avg"\n"","","ns"\n"0","k(int)","fast"\n',
         "bad.csv:3: column 'gpu__time_duration.avg' (kernel_duration_ns) holds 'fast'"),
        (b'"ID","Kernel Name","gpu__time_duration.avg"\n"","","cycle"\n"0","k(int)","10"\n',
         "unit 'cycle'"),
        (b"NVR\x00\x02\x00binary", "binary file"),
    ],
)
def test_bad_files_give_one_line_errors(tmp_path: Path, content: bytes, fragment: str) -> None:
    p = tmp_path / "bad.csv"
    p.write_bytes(content)
    with pytest.raises(KernelskillError) as err:
        load_profile(p)
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


def test_missing_file_and_report_without_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(KernelskillError, match="no such profile file"):
        load_profile(tmp_path / "nope.csv")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(KernelskillError, match=r"needs Nsight Compute's ncu.*ncu --import naive_gemm\.ncu-rep"):
        load_profile(PROFILES / "naive_gemm.ncu-rep")


def test_ncu_rep_through_ncu_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ncu is the boundary (absent here): a stand-in prints what `ncu --import` printed on the H200."""
    fake = tmp_path / "ncu"
    fake.write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path}/args\ncat {PROFILES / 'naive_gemm.csv'}\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    prof = load_profile(PROFILES / "naive_gemm.ncu-rep")
    assert prof.dominant().base_name == "naive_gemm_kernel"
    assert "--import" in (tmp_path / "args").read_text() and "--print-units base" in (tmp_path / "args").read_text()


@pytest.mark.parametrize(
    ("name", "base"),
    [
        ("naive_gemm_kernel(const float *, const float *, float *, int, int, int)", "naive_gemm_kernel"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, T2, T3)",
         "vectorized_elementwise_kernel"),
        ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize256x64x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4"
         "_execute_kernel__5x_cublas", None),
        ("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x64_8x5_nn_align1>(T1::Params)", "Kernel2"),
    ],
)
def test_base_kernel_name(name: str, base: str | None) -> None:
    assert base_kernel_name(name) == (base or name)


def test_vendor_patterns() -> None:
    fmap = load_field_map()
    for name in ("sm90_xmma_gemm_bf16", "ampere_sgemm_128x64_nn", "void cutlass::Kernel2<x>(y)",
                 "cudnn::winograd", "void at::native::reduce_kernel<512, 1>(T)", "gemv2T_kernel_val"):
        assert fmap.vendor_re.search(name), name
    for name in ("naive_gemm_kernel", "row_softmax_kernel", "relu_vec4_kernel"):
        assert not fmap.vendor_re.search(name), name


def test_numbers_and_units() -> None:
    assert parse_number('"1,980,000"') == 1_980_000
    assert parse_number("n/a") is None and parse_number("") is None
    assert parse_number("12.5%") == 12.5
    with pytest.raises(ValueError):
        parse_number("(!) fast")
    assert unit_factor("usecond", "ns") == 1e3 and unit_factor("ms", "ns") == 1e6
    assert unit_factor("s", "ns") == 1e9 and unit_factor("nsecond", "ns") == 1
    assert unit_factor("cycle", "ns") is None
    assert unit_factor("Kbyte", "bytes") == 1e3 and unit_factor("MiB", "bytes") == 1024**2
    assert unit_factor("Mbyte/second", "bytes") == 1e6
    assert unit_factor("%", "pct") == 1 and unit_factor("byte", "pct") is None
    assert unit_factor("Kinst", "count") == 1e3 and unit_factor("register/thread", "count") == 1


def test_capture_metrics_cover_both_spellings() -> None:
    metrics = capture_metrics()
    assert "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.ratio" in metrics
    assert "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio" in metrics
    assert "Duration" not in metrics and len(metrics) == len(set(metrics))


def test_details_page_is_pivoted() -> None:
    """ncu's default CSV page (one row per metric, human names and units) carries the headline fields."""
    head = ['"ID"', '"Process ID"', '"Process Name"', '"Host Name"', '"Kernel Name"', '"Context"', '"Stream"',
            '"Block Size"', '"Grid Size"', '"Device"', '"CC"', '"Section Name"', '"Metric Name"',
            '"Metric Unit"', '"Metric Value"']
    ident = '"0","780","python3.12","127.0.0.1","naive_gemm_kernel(const float *, const float *, float *, int, ' \
            'int, int)","1","7","(16, 16, 1)","(128, 128, 1)","0","9.0"'
    metrics = [("GPU Speed Of Light Throughput", "DRAM Throughput", "%", "0.31"),
               ("GPU Speed Of Light Throughput", "Duration", "msecond", "3.14"),
               ("GPU Speed Of Light Throughput", "L1/TEX Cache Throughput", "%", "99.31"),
               ("GPU Speed Of Light Throughput", "L2 Cache Throughput", "%", "19.13"),
               ("GPU Speed Of Light Throughput", "Compute (SM) Throughput", "%", "65.52"),
               ("Launch Statistics", "Registers Per Thread", "register/thread", "32"),
               ("Launch Statistics", "Grid Size", "", "16,384"),
               ("Occupancy", "Block Limit Registers", "block", "8"),
               ("Occupancy", "Achieved Occupancy", "%", "98.34"),
               ("Scheduler Statistics", "Eligible Warps Per Scheduler", "warp", "1.89")]
    lines = [",".join(head)] + [f'{ident},"{s}","{n}","{u}","{v}"' for s, n, u, v in metrics]
    prof = parse_csv_text("\n".join(lines) + "\n", "details.csv")
    k = prof.dominant()
    assert prof.launches == 1 and k.base_name == "naive_gemm_kernel"
    assert k.fields["kernel_duration_ns"] == pytest.approx(3.14e6)
    assert k.fields["sm_throughput_pct"] == pytest.approx(65.52)
    assert k.fields["warps_eligible_cnt"] == pytest.approx(1.89)
    assert k.sources["dram_throughput_pct"] == "DRAM Throughput"
    assert "stall_long_scoreboard_ratio" in {m.field for m in k.missing}
