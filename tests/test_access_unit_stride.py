"""access_unit_stride (retrieval/unit_stride.py, rules in retrieval/op_hints.yaml): whether the global
accesses that depend on threadIdx.x use it with unit stride, read from the kernel source; and its effect
on real queries (the real KB built in a temporary home): a kernel without sector counters whose accesses
are unit stride is not called uncoalesced, a measured sector excess always wins over the source."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kernelskill.config import load_settings
from kernelskill.retrieval.api import query
from kernelskill.retrieval.op_hints import from_source

EX = Path(__file__).resolve().parents[1] / "examples"
MANIFEST = {e["name"]: e for e in json.loads((EX / "manifest.json").read_text())["examples"]}


def fact(body: str, params: str = "const float* x, const float* b, float* out, int n, int k") -> tuple:
    h = from_source(f"__global__ void kern({params}) {{\n{body}\n}}\n")
    return h.fields.get("access_unit_stride"), h.evidence.get("access_unit_stride", "")


@pytest.mark.parametrize("body", [
    "int idx = blockIdx.x * blockDim.x + threadIdx.x; if (idx < n) out[idx] = x[idx] * 2.0f;",
    # a column index plus a broadcast row read (a[row * k + i] with row from threadIdx.y)
    "int row = blockIdx.y * blockDim.y + threadIdx.y; int col = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "float acc = 0; for (int i = 0; i < k; ++i) acc += x[row * k + i] * b[i * n + col];\n"
    "out[row * n + col] = acc;",
    # a grid-stride loop
    "for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) out[i] = x[i];",
    "int tid = threadIdx.x; for (int j = tid; j < n; j += blockDim.x) out[blockIdx.x * n + j] = x[j];",
    # a row pointer of the block, read by the lanes
    "const float* xr = x + (long)blockIdx.x * n; int t = threadIdx.x; out[blockIdx.x * n + t] = xr[t];",
    # a float4 view of a parameter, indexed by the thread
    "int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "float4 v = reinterpret_cast<const float4*>(x)[i]; reinterpret_cast<float4*>(out)[i] = v;",
    "const float4* x4 = reinterpret_cast<const float4*>(x); int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "out[i] = x4[i].x;",
    # warp and lane: warp-uniform row, lane-strided columns
    "int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32; int lane = threadIdx.x % 32;\n"
    "for (int c = lane; c < n; c += 32) out[warp * n + c] = x[warp * n + c];",
])
def test_unit_stride(body: str) -> None:
    value, why = fact(body)
    assert value is True, why
    assert why.startswith("line ") and "unit stride" in why


@pytest.mark.parametrize("body", [
    # one thread per row (a GEMV): row * k + j puts the lanes k elements apart
    "int row = blockIdx.x * blockDim.x + threadIdx.x; float s = 0;\n"
    "for (int j = 0; j < k; ++j) s += x[row * k + j] * b[j]; out[row] = s;",
    "int tid = blockIdx.x * blockDim.x + threadIdx.x; int stride = 8;\n"
    "for (int j = 0; j < stride; ++j) out[tid * stride + j] = x[j];",
    # through a row pointer of the thread
    "int r = blockIdx.x * blockDim.x + threadIdx.x; const float* xr = x + r * n; out[r] = xr[0];",
    "int i = blockIdx.x * blockDim.x + threadIdx.x; out[3 * i] = x[i];",
])
def test_strided(body: str) -> None:
    value, why = fact(body)
    assert value is False, why
    assert "[strided:" in why


@pytest.mark.parametrize(("source", "reason"), [
    # nothing depends on threadIdx.x: warp-uniform (broadcast) accesses only
    ("__global__ void kern(const float* x, float* out, int n) { out[blockIdx.x] = x[blockIdx.x * n]; }",
     "no global access depends on threadIdx.x"),
    ("template <typename T>\n__global__ void kern(const T* x, T* out) { int i = threadIdx.x; out[i] = x[i]; }",
     "template"),
    # a pointer passed on, a data-dependent index, a struct element type: not followed
    ("__device__ float ld(const float* p, int i) { return p[i]; }\n"
     "__global__ void kern(const float* x, float* out) { int i = threadIdx.x; out[i] = ld(x, i); }",
     "x used other than by a subscript"),
    ("__global__ void kern(const int* ids, const float* t, float* out, int d) {\n"
     "int i = blockIdx.x * blockDim.x + threadIdx.x; out[i] = t[ids[i / d] * d + i % d]; }",
     "index not followed"),
    ("struct P { float x, y, z; };\n"
     "__global__ void kern(const P* p, float* out) { int i = threadIdx.x; out[i] = p[i].x; }", "points to P"),
    ("__global__ void kern(const float* x, float* out) { int i = threadIdx.x; out[i / 2] = x[i]; }",
     "index not followed"),
    ("int main() { return 0; }", None),
])
def test_unknown(source: str, reason: str | None) -> None:
    h = from_source(source)
    assert "access_unit_stride" not in h.fields
    if reason is not None:
        assert reason in h.evidence["access_unit_stride"], h.evidence


def test_evidence_names_the_line_of_a_strided_access() -> None:
    src = ("__global__ void gemv(const float* a, const float* x, float* y, int n) {\n"
           "    int row = blockIdx.x * blockDim.x + threadIdx.x;\n"
           "    float s = 0.0f;\n"
           "    for (int j = 0; j < n; ++j) s += a[row * n + j] * x[j];\n"
           "    y[row] = s;\n}\n")
    h = from_source(src)
    assert h.fields["access_unit_stride"] is False
    assert h.evidence["access_unit_stride"].startswith("line 4 (gemv): for (int j = 0;")


# ------------------------------------------------------------------------------- real queries


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory):
    from kernelskill.kb.home import open_store

    home = tmp_path_factory.mktemp("unit_stride_home")
    open_store(load_settings(home=home)).close()
    return load_settings(home=home)


SECTORS, SECTORS_IDEAL = "memory_l2_theoretical_sectors_global", "memory_l2_theoretical_sectors_global_ideal"


def _kernel_variant(tmp_path: Path, body: str) -> Path:
    """The naive GEMM example with its kernel's body replaced (same name, so its profile still applies)."""
    text = (EX / MANIFEST["naive_gemm"]["kernel"]).read_text()
    new = re.sub(r"(__global__ void naive_gemm_kernel\([^)]*\)\s*\{)[\s\S]*?\n\}\n", lambda m: m.group(1) + body + "\n}\n",
                 text, count=1)
    assert new != text
    out = tmp_path / "variant.py"
    out.write_text(new)
    return out


def _profile_with_sectors(tmp_path: Path, sectors: float, ideal: float) -> Path:
    import csv
    import io

    rows = list(csv.reader(io.StringIO((EX / MANIFEST["naive_gemm"]["profile"]).read_text())))
    head, units, data = rows[0], rows[1], rows[2:]
    for metric, value in ((SECTORS, sectors), (SECTORS_IDEAL, ideal)):
        head.append(metric)
        units.append("")
        for row in data:
            row.append(str(value))
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL).writerows([head, units, *data])
    out = tmp_path / "naive_gemm_sectors.csv"
    out.write_text(buf.getvalue())
    return out


def _step(r, kind: str, sid: str):
    return next(s for s in r.trace if s.kind == kind and s.id == sid)


def test_naive_gemm_without_sector_counters_is_onchip_operand_traffic(settings) -> None:
    e = MANIFEST["naive_gemm"]
    r = query(EX / e["kernel"], profile=EX / e["profile"], settings=settings)
    assert r.profile.derived.get("global_sector_excess") is None  # not measured in this capture
    assert r.context["access_unit_stride"] is True
    assert (r.bottleneck.id, r.case.id) == ("onchip_operand_traffic", "ot_naive_gemm")
    assert r.first_methods(2) == ["shared_memory_tiling", "register_blocking"]
    assert "coalesced_access" not in [m.id for m in r.permitted]
    assert _step(r, "predicate", "coalescing_not_refuted").value is False


def test_a_measured_sector_excess_wins_over_the_source(settings, tmp_path: Path) -> None:
    e = MANIFEST["naive_gemm"]
    r = query(EX / e["kernel"], profile=_profile_with_sectors(tmp_path, 2.5e6, 1e6), settings=settings)
    assert r.profile.derived["global_sector_excess"] == pytest.approx(2.5)
    assert r.context["access_unit_stride"] is True
    assert r.bottleneck.id == "uncoalesced_access"
    assert _step(r, "predicate", "access_coalesced").value is False


THREAD_PER_ROW = """
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < m) {
        for (int j = 0; j < n; ++j) {
            float acc = 0.0f;
            for (int i = 0; i < k; ++i) acc += a[row * k + i] * b[i * n + j];
            c[row * n + j] = acc;
        }
    }"""

NO_THREAD_X = """
    int row = blockIdx.y;
    int col = blockIdx.x;
    if (row < m && col < n) {
        float acc = 0.0f;
        for (int i = 0; i < k; ++i) acc += a[row * k + i] * b[i * n + col];
        c[row * n + col] = acc;
    }"""


def test_a_thread_per_row_kernel_stays_uncoalesced(settings, tmp_path: Path) -> None:
    r = query(_kernel_variant(tmp_path, THREAD_PER_ROW), profile=EX / MANIFEST["naive_gemm"]["profile"],
              settings=settings)
    assert r.context["access_unit_stride"] is False
    assert "a[row * k + i]" in _step(r, "note", "access_unit_stride").note
    assert r.bottleneck.id == "uncoalesced_access"


def test_no_thread_x_access_leaves_the_fact_missing_and_the_answer_as_before(settings, tmp_path: Path) -> None:
    r = query(_kernel_variant(tmp_path, NO_THREAD_X), profile=EX / MANIFEST["naive_gemm"]["profile"],
              settings=settings)
    assert "access_unit_stride" not in r.context
    note = _step(r, "note", "access_unit_stride")
    assert note.value is None and "no global access depends on threadIdx.x" in note.note
    assert r.bottleneck.id == "uncoalesced_access"  # the old reading: nothing refutes it
