"""Write the synthetic held-out profiles (profiles/<id>.csv) from profiles.yaml.

Each CSV copies the header, the units row and every non-normalized column of a real H200 capture
(examples/profiles/relu_vec4.csv) and replaces the columns of retrieval/field_map.yaml (both
spellings of each metric), the identity columns and the DRAM byte counts. A `==SYNTHETIC==` line at
the top (ncu's own `==PROF==` lines are skipped the same way) says that the numbers are not measured.

    /work/venv/bin/python tests/data/heldout/make_profiles.py
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
TEMPLATE = ROOT / "examples" / "profiles" / "relu_vec4.csv"

#: spec key -> ncu columns it fills (per-issue stall spellings are scaled from the per-warp value)
COLUMNS = {
    "dur": ["gpu__time_duration.avg", "gpu__time_duration.sum", "gpu__time_duration.max", "gpu__time_duration.min"],
    "dram": ["gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "dram__throughput.avg.pct_of_peak_sustained_elapsed"],
    "l2": ["lts__throughput.avg.pct_of_peak_sustained_elapsed"],
    "l1": ["l1tex__throughput.avg.pct_of_peak_sustained_active"],
    "sm": ["sm__throughput.avg.pct_of_peak_sustained_elapsed"],
    "occ": ["sm__warps_active.avg.pct_of_peak_sustained_active"],
    "regs": ["launch__registers_per_thread"],
    "lim_regs": ["launch__occupancy_limit_registers"],
    "lim_smem": ["launch__occupancy_limit_shared_mem"],
    "lim_warps": ["launch__occupancy_limit_warps"],
    "div": ["smsp__sass_branch_targets_threads_divergent.avg"],
    "uni": ["smsp__sass_branch_targets_threads_uniform.avg"],
    "pred": ["smsp__thread_inst_executed_pred_on_per_inst_executed.ratio"],
    "elig": ["smsp__warps_eligible.avg.per_cycle_active"],
    "rd": ["dram__bytes_read.sum"],
    "wr": ["dram__bytes_write.sum"],
}
STALLS = {"long": "long_scoreboard", "short": "short_scoreboard", "noinst": "no_instruction",
          "notsel": "not_selected"}
ISSUE_SCALE = 25.0  # per-issue ratios run about 25x the per-warp ones on these kernels (real CSVs)


def _num(v: float | str) -> str:
    v = float(v)  # YAML 1.1 reads 25.1e6 (no exponent sign) as a string
    if float(v).is_integer() and abs(v) >= 1000:
        return f"{int(v):,}"
    return f"{v:.2f}" if not float(v).is_integer() else str(int(v))


def render(kernel_id: str, rows: list[dict], defaults: dict) -> str:
    lines = list(csv.reader(io.StringIO(TEMPLATE.read_text())))
    header, units, base = lines[0], lines[1], lines[2]
    col = {name: i for i, name in enumerate(header)}
    out = io.StringIO()
    out.write(f"==SYNTHETIC== held-out profile '{kernel_id}' for kernelskill tests: NOT measured; plausible "
              f"H200 values written by hand (tests/data/heldout/profiles.yaml), other columns copied "
              f"from a real H200 capture\n")
    w = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(header)
    w.writerow(units)
    for i, spec in enumerate(rows):
        s = {**defaults, **spec}
        row = list(base)
        row[col["ID"]] = str(i)
        row[col["Kernel Name"]] = s["name"]
        row[col["Block Size"]] = "({}, {}, {})".format(*s["block"])
        row[col["Grid Size"]] = "({}, {}, {})".format(*s["grid"])
        for key, names in COLUMNS.items():
            for name in names:
                if name in col:
                    row[col[name]] = _num(s[key])
        for key, stall in STALLS.items():
            row[col[f"smsp__warp_issue_stalled_{stall}_per_warp_active.ratio"]] = f"{s[key]:.2f}"
            row[col[f"smsp__average_warps_issue_stalled_{stall}_per_issue_active.ratio"]] = f"{s[key] * ISSUE_SCALE:.2f}"
        total = s["div"] + s["uni"]
        for name, value in (("smsp__sass_branch_targets_threads_divergent.sum", s["div"] * 528),
                            ("smsp__sass_branch_targets_threads_uniform.sum", s["uni"] * 528),
                            ("smsp__sass_branch_targets.avg", total)):
            if name in col:
                row[col[name]] = _num(value)
        for name, value in (("launch__block_size", s["block"][0] * s["block"][1] * s["block"][2]),
                            ("launch__grid_size", s["grid"][0] * s["grid"][1] * s["grid"][2]),
                            ("launch__block_dim_x", s["block"][0]), ("launch__block_dim_y", s["block"][1]),
                            ("launch__block_dim_z", s["block"][2]), ("launch__grid_dim_x", s["grid"][0]),
                            ("launch__grid_dim_y", s["grid"][1]), ("launch__grid_dim_z", s["grid"][2]),
                            ("launch__kernel_name", s["name"].split("(")[0])):
            if name in col:
                row[col[name]] = value if isinstance(value, str) else _num(value)
        w.writerow(row)
    return out.getvalue()


def main() -> None:
    spec = yaml.safe_load((HERE / "profiles.yaml").read_text())
    (HERE / "profiles").mkdir(exist_ok=True)
    for kernel_id, rows in spec["profiles"].items():
        (HERE / "profiles" / f"{kernel_id}.csv").write_text(render(kernel_id, rows, spec["defaults"]))


if __name__ == "__main__":
    main()
