"""Write the synthetic profiles of the issue-31 test kernels (profiles/<name>.csv; NOT measured).

Each copies the header, units row and every other column of a real H200 capture (examples/profiles/
naive_gemm.csv, one kernel), renames the kernel and sets the columns below. The values are plausible for the
kernel's state and chosen to put each question of the tests on one side of its threshold:

- tiled_gemm_coalesced: the cp.async tiled SGEMM with L1 hot (96 %), far above L2/DRAM, and its global
  sectors measured at the ideal (excess 1.0): a shared-memory / L1 bound inner loop, not uncoalesced access;
- tiled_gemm_strided: the same counters with a sector excess of 3.0 (what strided access would show);
- scale_add_at_roofline / scale_add_far: y = 2x + z over 8192 x 8192 fp32 (two inputs read, one output
  written: 805 MB); 0.187 ms is the ceiling at 4.3 TB/s, so 0.205 ms is 91 % of it and 0.6 ms is 31 %.

    /work/venv/bin/python tests/data/kb31/make_profiles.py
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE.parents[2] / "examples" / "profiles" / "naive_gemm.csv"
DURATION = ["gpu__time_duration.avg", "gpu__time_duration.sum", "gpu__time_duration.max", "gpu__time_duration.min"]
COLUMNS = {
    "dram": ["gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "dram__throughput.avg.pct_of_peak_sustained_elapsed"],
    "l2": ["lts__throughput.avg.pct_of_peak_sustained_elapsed"],
    "l1": ["l1tex__throughput.avg.pct_of_peak_sustained_active"],
    "sm": ["sm__throughput.avg.pct_of_peak_sustained_elapsed"],
    "sectors": ["memory_l2_theoretical_sectors_global"],
    "ideal": ["memory_l2_theoretical_sectors_global_ideal"],
}
GEMM = "tiled_sgemm_async(const float *, const float *, float *, int, int, int)"
SCALE = "scale_add_vec4(const float4 *, const float4 *, float4 *, long)"
PROFILES = {
    "tiled_gemm_coalesced": dict(name=GEMM, dur=1_450_000, dram=3.1, l2=21.5, l1=96.2, sm=71.0, sectors=1.0e8, ideal=1.0e8),
    "tiled_gemm_strided": dict(name=GEMM, dur=1_450_000, dram=3.1, l2=21.5, l1=96.2, sm=71.0, sectors=3.0e8, ideal=1.0e8),
    "scale_add_at_roofline": dict(name=SCALE, dur=205_000, dram=91.0, l2=88.0, l1=40.0, sm=22.0, sectors=2.5e7, ideal=2.5e7),
    "scale_add_far": dict(name=SCALE, dur=600_000, dram=31.0, l2=30.0, l1=14.0, sm=8.0, sectors=2.5e7, ideal=2.5e7),
}


def write(name: str, spec: dict) -> Path:
    rows = list(csv.reader(io.StringIO(TEMPLATE.read_text())))
    head, units, data = rows[0], rows[1], rows[2:3]
    values = {"Kernel Name": spec["name"], **{c: spec["dur"] for c in DURATION}}
    for key, cols in COLUMNS.items():
        for c in cols:
            values[c] = spec[key]
    for col, value in values.items():
        if col not in head:
            head.append(col)
            units.append("")
            data[0].append("")
        data[0][head.index(col)] = str(value)
    buf = io.StringIO()
    buf.write("==SYNTHETIC== values chosen for tests/test_retrieval_routes.py, not measured\n")
    csv.writer(buf, quoting=csv.QUOTE_ALL).writerows([head, units, *data])
    out = HERE / "profiles" / f"{name}.csv"
    out.write_text(buf.getvalue())
    return out


if __name__ == "__main__":
    for n, s in PROFILES.items():
        print(write(n, s))
