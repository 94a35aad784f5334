"""Op-family hints (retrieval/op_hints.py): from the kernel source (rules in op_hints.yaml) and from the
task's Model.forward (ast, never imported), with evidence; and their effect on real queries."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelskill.errors import KernelskillError
from kernelskill.retrieval.context import dominant_kernel_share, query_context
from kernelskill.retrieval.op_hints import from_source, from_task, kernel_bodies, load_rules, op_hints
from kernelskill.retrieval.profile import load_profile

ROOT = Path(__file__).resolve().parents[1]
HELDOUT = ROOT / "tests" / "data" / "heldout"
EX = ROOT / "examples"


def _src(name: str) -> str:
    return (HELDOUT / "kernels" / f"{name}.py").read_text()


@pytest.mark.parametrize(("kernel", "family"), [
    ("softmax_rowthread", "softmax"), ("softmax_online", "softmax"), ("layernorm_twopass", "norm"),
    ("rmsnorm", "rms_norm"), ("gemv_rowthread", "gemv"), ("maxpool2d", "pool"), ("cumsum_rowthread", "scan"),
    ("attention_naive", "attention"), ("embedding_gather", "gather"),
    # no rule recognises these: the family stays missing (unknown), never a guess
    ("naive_gemm_rect", None), ("stencil3x3", None), ("depthwise_conv3x3", None), ("conv2d_direct", None),
    ("elementwise_float4", None), ("bias_gelu", None), ("argmax_rows", None), ("transpose_naive", None),
])
def test_source_family(kernel: str, family: str | None) -> None:
    h = from_source(_src(kernel))
    assert h.fields.get("op_family") == family
    assert h.fields["op_is_gemv"] is (family == "gemv")
    assert h.fields["op_is_pool_nonoverlap"] is (family == "pool")
    if family is not None:
        assert h.evidence["op_family"].startswith(("line ", "lines ")), h.evidence


def test_rules_on_code_they_were_not_written_from() -> None:
    """The method examples of kb/skills (written for the methods, not for these rules)."""
    skills = ROOT / "kb" / "skills" / "examples"
    expect = {"welford_one_pass_norm/before.py": "norm", "welford_one_pass_norm/after.py": "norm",
              "online_softmax/before.py": "softmax", "online_softmax/after.py": "softmax",
              "flash_attention_tiling/before.py": "attention", "flash_attention_tiling/after.py": "attention",
              # a per-thread row of a GEMM through a row pointer (xr = x + r * d; xr[k] * w[j * d + k])
              "loop_unrolling/before.py": None, "shared_memory_tiling/before.py": None}
    for rel, family in expect.items():
        assert from_source((skills / rel).read_text()).fields.get("op_family") == family, rel
    assert from_source((skills / "online_softmax/after.py").read_text()).fields["op_softmax_online"] is True


def test_evidence_names_the_deciding_line() -> None:
    src = _src("gemv_rowthread")
    h = from_source(src)
    first, _, last = h.evidence["op_family"].split()[1].partition("-")
    lines = src.splitlines()[int(first) - 1:int(last or first)]
    assert any("x[k]" in ln for ln in lines) and "gemv_kernel" in h.evidence["op_family"]
    online = from_source(_src("softmax_online"))
    assert online.fields["op_softmax_online"] is True and "expf(m - m_new)" in online.evidence["op_softmax_online"]
    assert from_source(_src("softmax_rowthread")).fields["op_softmax_online"] is False


def test_atomics_global_versus_shared() -> None:
    assert from_source(_src("histogram_global")).fields["uses_global_atomics"] is True
    assert from_source(_src("scatter_add_atomic")).fields["uses_global_atomics"] is True
    cumsum = from_source(_src("cumsum_rowthread"))
    assert cumsum.fields["uses_global_atomics"] is False and cumsum.fields["op_is_serial_scan"] is True
    shared_only = """
    __global__ void hist(const int* d, int* bins, int n) {
        __shared__ int local[256];
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) atomicAdd(&local[d[i]], 1);
    }"""
    h = from_source(shared_only)
    assert h.fields["uses_global_atomics"] is False and "shared" in h.evidence["uses_global_atomics"]


def test_only_kernel_code_counts_not_comments_or_docstrings() -> None:
    # the words of a docstring or a comment never decide; the kernel body does
    src = '''"""softmax with expf and fmaxf, a layer norm with rsqrtf"""
    // float m = fmaxf(m, v); d += expf(v - m);
    __global__ void add(const float* a, const float* b, float* c, int n) {
        /* expf(x) fmaxf(y) */
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) c[i] = a[i] + b[i];
    }'''
    h = from_source(src)
    assert "op_family" not in h.fields and h.fields["uses_global_atomics"] is False
    assert [b.kernel for b in kernel_bodies(src)] == ["add"]
    assert from_source("import torch\n").fields == {}  # no kernel: no hints at all


def test_row_gathers() -> None:
    emb = from_source(_src("embedding_gather"))
    assert emb.fields["op_gathers_rows"] is True and "weight[row * dim + d]" in emb.evidence["op_gathers_rows"]
    scatter = from_source(_src("scatter_add_atomic"))  # rows too, but an atomic scatter is not a "gather" family
    assert scatter.fields["op_gathers_rows"] is True and "op_family" not in scatter.fields
    assert from_source(_src("elementwise_scalar")).fields["op_gathers_rows"] is False


def test_single_custom_launch() -> None:
    assert from_source(_src("scatter_add_atomic")).fields["single_custom_launch"] is True
    assert from_source(_src("tiny_chain")).fields["single_custom_launch"] is False
    lib = from_source(_src("cublas_bias_relu_chain"))
    assert lib.fields["single_custom_launch"] is False and "cublasSgemm" in lib.evidence["single_custom_launch"]


def _task(tmp_path: Path, forward: str, init: str = "", inputs: str = "[torch.randn(M, K)]",
          head: str = "M, K = 4096, 1024") -> Path:
    p = tmp_path / "task.py"
    p.write_text(f"""import torch
import torch.nn as nn
import torch.nn.functional as F

raise RuntimeError("a task file is parsed, never imported")
{head}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init or "        pass"}

    def forward(self, x, y=None):
        {forward}


def get_inputs():
    return {inputs}
""")
    return p


@pytest.mark.parametrize(("forward", "init", "inputs", "family"), [
    ("return torch.softmax(x, dim=-1)", "", "[torch.randn(M, K)]", "softmax"),
    ("return F.log_softmax(x, dim=1)", "", "[torch.randn(M, K)]", "softmax"),
    ("return self.ln(x)", "        self.ln = nn.LayerNorm(K)", "[torch.randn(M, K)]", "norm"),
    ("return F.rms_norm(x, (K,))", "", "[torch.randn(M, K)]", "rms_norm"),
    ("return torch.matmul(x, y)", "", "[torch.randn(M, K), torch.randn(K, M)]", "gemm"),
    ("return torch.matmul(x, y)", "", "[torch.randn(M, K), torch.randn(K, 1)]", "gemv"),
    ("return x @ y", "", "[torch.randn(M, K), torch.randn(K)]", "gemv"),
    ("return x @ y", "", "[torch.randn(M, 1), torch.randn(1, K)]", "gemm"),  # outer product, K = 1
    ("return torch.softmax(x @ y.T, -1) @ y", "", "[torch.randn(M, K), torch.randn(M, K)]", "attention"),
    ("return F.scaled_dot_product_attention(x, x, x)", "", "[torch.randn(M, K)]", "attention"),
    ("return self.conv(x)", "        self.conv = nn.Conv2d(3, 8, 3)", "[torch.randn(8, 3, 32, 32)]", "conv"),
    ("return torch.cumsum(x, dim=1)", "", "[torch.randn(M, K)]", "scan"),
    ("return torch.argmax(x, dim=1)", "", "[torch.randn(M, K)]", "reduction"),
    ("return x.index_add(0, y, x)", "", "[torch.randn(M, K)]", "scatter"),
    ("return torch.relu(x)", "", "[torch.randn(M, K)]", None),
])
def test_task_family(tmp_path: Path, forward: str, init: str, inputs: str, family: str | None) -> None:
    h = from_task(_task(tmp_path, forward, init, inputs))
    assert h.fields.get("op_family") == family
    if family is not None:
        assert h.evidence["op_family"].startswith("task.py:") and "Model.forward calls" in h.evidence["op_family"]
        assert h.fields["op_is_gemv"] is (family == "gemv")


@pytest.mark.parametrize(("call", "nonoverlap"), [
    ("F.max_pool2d(x, 2)", True), ("F.max_pool2d(x, 2, 2)", True), ("F.avg_pool2d(x, kernel_size=3, stride=1)", False),
    ("self.pool(x)", True),
])
def test_task_pool_window_against_stride(tmp_path: Path, call: str, nonoverlap: bool) -> None:
    init = "        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)"
    h = from_task(_task(tmp_path, f"return {call}", init, "[torch.randn(8, 3, 32, 32)]"))
    assert h.fields["op_family"] == "pool" and h.fields["op_is_pool_nonoverlap"] is nonoverlap


def test_later_stages_of_a_forward_keep_their_methods(tmp_path: Path) -> None:
    """Linear + LayerNorm is a GEMM family with a norm stage: Welford must stay permitted."""
    init = "        self.fc = nn.Linear(K, K)\n        self.ln = nn.LayerNorm(K)"
    h = from_task(_task(tmp_path, "return self.ln(self.fc(x))", init))
    assert h.fields["op_family"] == "gemm" and h.fields["op_has_norm"] is True
    assert h.fields["op_has_softmax"] is False and "layernorm" in h.evidence["op_has_norm"]
    assert from_task(_task(tmp_path, "return torch.softmax(x, -1)")).fields["op_has_softmax"] is True


def test_task_wins_over_the_source_and_bad_tasks_fail_in_one_line(tmp_path: Path) -> None:
    task = _task(tmp_path, "return torch.softmax(x, dim=-1)")
    h = op_hints(_src("layernorm_twopass"), task)
    assert h.fields["op_family"] == "softmax" and h.evidence["op_family"].startswith("task.py:")
    assert h.fields["uses_global_atomics"] is False  # facts only the source shows stay
    bad = tmp_path / "bad.py"
    bad.write_text("class Model(:\n")
    with pytest.raises(KernelskillError, match=r"bad\.py:1: not valid Python"):
        from_task(bad)
    with pytest.raises(KernelskillError, match="cannot read the task"):
        from_task(tmp_path / "missing.py")


def test_example_tasks() -> None:
    assert from_task(EX / "tasks" / "softmax_task.py").fields["op_family"] == "softmax"
    assert from_task(EX / "tasks" / "naive_gemm_task.py").fields["op_family"] == "gemm"
    assert from_task(EX / "tasks" / "relu_task.py").fields == {}


def test_broken_rules_file_is_a_one_line_error(tmp_path: Path) -> None:
    p = tmp_path / "rules.yaml"
    p.write_text("patterns:\n  exp: '(('\n")
    with pytest.raises(KernelskillError, match=r"rules\.yaml: pattern 'exp' is not a valid regex"):
        load_rules(p)
    p.write_text("patterns: {}\nfamilies:\n  - {id: x, family: softmax, all: [nope]}\n")
    with pytest.raises(KernelskillError, match="unknown pattern 'nope'"):
        load_rules(p)


def test_dominant_kernel_share_from_the_profile() -> None:
    scatter = load_profile(HELDOUT / "profiles" / "scatter_add_atomic.csv")
    share, why = dominant_kernel_share(scatter)
    assert share is not None and share >= 90 and "scatter_add_kernel" in why
    chain, _ = dominant_kernel_share(load_profile(HELDOUT / "profiles" / "tiny_chain.csv"))
    assert chain is not None and chain < 90
    ctx = query_context(_src("scatter_add_atomic"), None, scatter)
    assert ctx.fields["dominant_kernel_share_pct"] == share
    steps = {s.id: s for s in ctx.trace_steps()}
    assert steps["dominant_kernel_share_pct"].kind == "note" and steps["uses_global_atomics"].value is True
    assert "atomicAdd" in steps["uses_global_atomics"].note


def test_hints_decide_a_real_query() -> None:
    """Through the query API (in-memory KB of kb/skills): the hints select the family's case and remove
    the other family's method; a different family (an explicit context override) changes the answer."""
    from kernelskill.kb.loader import load_report
    from kernelskill.retrieval.api import query
    from kernelskill.retrieval.memory_kb import MemoryKB

    skills, issues = load_report([[ROOT / "kb" / "skills"]])
    assert not issues
    kb = MemoryKB.from_skillset(skills)
    base = {"arch_sm": 90, "library_calls_allowed": False}
    path, prof = HELDOUT / "kernels" / "rmsnorm.py", HELDOUT / "profiles" / "rmsnorm.csv"
    hints = query_context(path.read_text(), None, load_profile(prof))
    hinted = query(path, profile=prof, store=kb, context={**hints.fields, **base})
    assert hinted.case.id == "mb_rms_norm" and "online_softmax" not in hinted.first_methods(99)
    assert hinted.context["op_family"] == "rms_norm"
    gate = next(s for s in hinted.trace if s.kind == "predicate" and s.id == "rms_norm_like")
    assert gate.value is True and gate.inputs == {"op_family": "rms_norm"}
    other = query(path, profile=prof, store=kb, context={**hints.fields, **base, "op_family": "norm"})
    assert other.case.id == "mb_norm_multipass" and other.first_methods(1) == ["welford_one_pass_norm"]
    assert "online_softmax_needs_softmax" in {v.id for v in other.vetoes}


def test_a_row_cached_in_registers_is_told_from_a_shared_scratch_and_from_a_re_read() -> None:
    """A fixed-size local array filled from memory and read again is one read of the row; a __shared__
    scratch array or a kernel that reads global memory again in each pass is not."""
    cached = """
__global__ void k(const float* x, float* y, int n) {
    float v[8];
    float m = -1e30f;
    for (int i = 0; i < 8; ++i) { v[i] = x[threadIdx.x + 32 * i]; m = fmaxf(m, v[i]); }
    float s = 0.f;
    for (int i = 0; i < 8; ++i) { v[i] = expf(v[i] - m); s += v[i]; }
    for (int i = 0; i < 8; ++i) y[threadIdx.x + 32 * i] = v[i] / s;
}
"""
    hint = from_source(cached)
    assert hint.fields["op_row_in_registers"] is True and "float v[8]" in hint.evidence["op_row_in_registers"]
    shared = cached.replace("    float v[8];", "    __shared__ float v[8];")
    assert from_source(shared).fields["op_row_in_registers"] is False
    assert from_source(_src("softmax_rowthread")).fields["op_row_in_registers"] is False
    assert from_source((ROOT / "examples" / "kernels" / "row_softmax.py").read_text()).fields[
        "op_row_in_registers"] is False
