"""``kb learn`` on improvements whose method is not a KB id (issue 31, item 5): each is either mapped to
the KB method it is, with its score (guidance similarity through the KB's doc search with the real MiniLM
embedder, code similarity against the worked examples), or drafted as a new method that ``kb add`` accepts
as it is. A real run (the loop without knowledge, the real openai client against the local test server,
the scripted evaluator at the GPU boundary) in a real home (DuckDB, Chroma), learned through the CLI; and
the published no-KB arm's runs (``benchmarks/results/suite_h200/none-runs.tar.gz``) against the bundled KB."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kernelskill.cli import main
from kernelskill.kb.learned import LearnedStore
from kernelskill.pipeline.loop import Loop, LoopOptions
from kernelskill.pipeline.loop.llm import LLMClient
from kernelskill.pipeline.loop.method_drafts import MAP_THRESHOLD
from kernelskill.pipeline.runs import RunStore
from tests.openai_test_server import ScriptedOpenAI
from tests.test_loop import llm_settings
from tests.test_loop_helpers import TASK, ScriptedEvaluator, StandInRetriever, fenced, review

ROOT = Path(__file__).resolve().parents[1]
SMALL = Path(__file__).parent / "data" / "skills_small"

EXAMPLE_BEFORE = '''import torch
from torch.utils.cpp_extension import load_inline

CUDA_SRC = """
__global__ void scale_rows_strided(const float* x, float* y, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    for (int c = 0; c < cols; ++c) y[r * cols + c] = x[r * cols + c] * 2.f;
}
"""
'''
EXAMPLE_AFTER = '''import torch
from torch.utils.cpp_extension import load_inline

CUDA_SRC = """
__global__ void scale_rows_coalesced(const float* __restrict__ x, float* __restrict__ y, int total) {
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride)
        y[i] = __ldg(&x[i]) * 2.f;
}
"""
'''


def candidate(marker: str, body: str) -> str:
    return f'''# harness: {marker}
import torch
from torch.utils.cpp_extension import load_inline

CUDA_SRC = """
{body}
"""


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0
'''


SEED = candidate("speedup=1.10", """__global__ void relu2_rows(const float* x, float* y, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    for (int c = 0; c < cols; ++c) y[r * cols + c] = fmaxf(x[r * cols + c], 0.f) * 2.f;
}""")
#: the change the KB knows (coalesced_access): the same identifiers its worked example brings in
COALESCED = candidate("speedup=1.90", """__global__ void relu2_flat(const float* __restrict__ x, float* __restrict__ y,
                           int total) {
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride)
        y[i] = fmaxf(__ldg(&x[i]), 0.f) * 2.f;
}""")
#: a change no method of the small KB describes
WARP_RING = candidate("speedup=2.60", """__global__ void relu2_warp_ring(const float* __restrict__ x, float* y, int total) {
    __shared__ float ring[4][256];
    int lane = threadIdx.x & 31;
    unsigned mask = __ballot_sync(0xffffffffu, lane < 16);
    float v = __shfl_down_sync(mask, x[lane], 1);
    ring[lane & 3][threadIdx.x] = fmaxf(v, 0.f) * 2.f;
    __syncwarp(mask);
    y[threadIdx.x] = ring[lane & 3][threadIdx.x];
}""")


def plan(method: str, text: str, why: str) -> str:
    return json.dumps({"method": method, "rationale": why, "plan": text})


SCRIPT = {
    "r00.generate.1": [fenced(SEED)],
    "r01.plan.1": [plan("flat_contiguous_indexing",
                        "Map threadIdx.x to the contiguous index of the flattened tensor with a grid-stride loop so "
                        "that a warp reads adjacent addresses in one transaction; read through __ldg.",
                        "Each thread walks its own row: neighbouring threads are cols floats apart.")],
    "r01.optimize.1": ["Flattened, coalesced grid-stride loop.\n\n```python\n" + COALESCED + "```\n"],
    "r01.review.1": [review(True)],
    "r02.plan.1": [plan("warp_ballot_ring_staging",
                        "Stage each warp's values in a four-slot shared ring, exchanging lanes with __shfl_down_sync "
                        "under a __ballot_sync mask, then write the ring back after __syncwarp.",
                        "The flat loop leaves the warp scheduler idle between dependent loads.")],
    "r02.optimize.1": ["Warp ring staging with ballot masks.\n\n```python\n" + WARP_RING + "```\n"],
    "r02.review.1": [review(True)],
}


def _cli(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result.stdout


@pytest.fixture(scope="module")
def learned(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("learn_methods")
    skills = root / "skills"
    shutil.copytree(SMALL, skills)  # the small KB, with a real worked example for coalesced_access
    (skills / "examples" / "coalesced_access" / "before.py").write_text(EXAMPLE_BEFORE)
    (skills / "examples" / "coalesced_access" / "after.py").write_text(EXAMPLE_AFTER)
    home = root / "home"
    _cli("kb", "init", "--home", str(home), "--skills", str(skills))
    task = root / "relu2.py"
    task.write_text(TASK)
    options = LoopOptions(rounds=2, knowledge="none")
    run = RunStore(home / "runs").create(task, {"model": "test-model", "options": options.model_dump()})
    with ScriptedOpenAI(SCRIPT) as server:
        llm = LLMClient.from_settings(llm_settings(server.base_url))
        result = Loop(run, llm, ScriptedEvaluator(), StandInRetriever(), options).execute()
    assert result.status == "finished" and result.best["step"] == "r02.optimize"
    out = json.loads(_cli("kb", "learn", run.id, "--home", str(home), "--hardware", "test GPU", "--json"))
    return {"home": home, "run": run, "out": out, "skills": skills}


def test_a_known_change_maps_to_its_kb_method_with_the_score(learned: dict) -> None:
    [res] = learned["out"]["runs"]
    by_step = {m["step"]: m for m in res["mappings"]}
    known = by_step["r01.optimize"]
    assert known["run_method"] == "flat_contiguous_indexing" and known["maps_to"] == "coalesced_access"
    best = known["best"]
    assert best["method"] == "coalesced_access" and best["score"] >= MAP_THRESHOLD == known["threshold"]
    assert best["code"] > 0.3 and 0 < best["guidance"] <= 1  # the identifiers its worked example adds
    assert all(r["score"] <= best["score"] for r in known["runners_up"])
    [rec] = [r for r in LearnedStore(learned["home"] / "kb").records() if r.step == "r01.optimize"]
    assert rec.method == "flat_contiguous_indexing" and rec.kb_method == "coalesced_access"
    stats = json.loads(_cli("kb", "stats", "--home", str(learned["home"]), "--json"))
    assert stats["learned"]["methods"]["coalesced_access"] == 1  # evidence for the KB's method now
    human = _cli("kb", "learn", learned["run"].id, "--home", str(learned["home"]), "--hardware", "test GPU")
    assert "r01.optimize flat_contiguous_indexing is the KB method coalesced_access: score" in human


def test_a_new_change_is_drafted_and_kb_add_accepts_the_draft_as_it_is(learned: dict) -> None:
    home, run = learned["home"], learned["run"]
    [res] = learned["out"]["runs"]
    new = next(m for m in res["mappings"] if m["step"] == "r02.optimize")
    assert new["maps_to"] is None and new["draft"] == "warp_ballot_ring_staging"
    assert new["best"]["score"] < MAP_THRESHOLD
    proposal = Path(res["proposals"])
    data = yaml.safe_load(proposal.read_text())
    [draft] = data["methods"]
    assert draft["id"] == "warp_ballot_ring_staging" and draft["name"] == "Warp ballot ring staging"
    assert draft["intent"].startswith("Warp ring staging with ballot masks.")  # the optimizer's own summary
    assert "__shfl_down_sync" in draft["guidance"] and "__ballot_sync" in draft["guidance"]  # plan + calls added
    assert draft["mechanism"].startswith("The flat loop leaves the warp scheduler idle")  # the planner's rationale
    [ev] = draft["evidence"]
    assert ev["kind"] == "run" and ev["speedup"] == pytest.approx(2.60 / 1.90, rel=1e-3)
    assert ev["after_vs_eager"] == pytest.approx(2.60) and ev["hardware"] == "test GPU" and run.id in ev["notes"]
    example = proposal.parent / draft["example"]["before"]
    assert example.read_text() == (run.path / "candidates" / "r01.optimize.py").read_text()  # parent -> before
    assert (proposal.parent / draft["example"]["after"]).read_text() == (
        run.path / "candidates" / "r02.optimize.py").read_text()
    joined = [c for c in data.get("cases", []) if c["methods"][0] == draft["id"]]
    assert joined and "learned from run" in joined[0]["rationale"].lower()
    # kb add takes the file as it is; the new method is then in the KB, with its evidence and worked example
    _cli("kb", "add", str(proposal), "--home", str(home))
    shown = json.loads(_cli("kb", "show", draft["id"], "--home", str(home), "--json"))
    assert shown["type"] == "method" and shown["evidence"][0]["kind"] == "run"
    case = json.loads(_cli("kb", "show", joined[0]["id"], "--home", str(home), "--json"))
    assert case["methods"][0] == draft["id"] and case["version"] == joined[0]["version"]
    lint = CliRunner().invoke(main, ["kb", "lint", "--home", str(home), "--json"])
    assert json.loads(lint.stdout)["errors"] == 0


@pytest.mark.slow
def test_published_no_kb_arm_maps_3xtf32_through_cublas_to_ec_tf32_library_gemm(tmp_path: Path) -> None:
    """The published H200 no-KB arm: every 3xTF32-through-cuBLAS change (named four ways by the model) is the
    KB's ec_tf32_library_gemm; the register-cached logsumexp is a new draft."""
    archive = ROOT / "benchmarks" / "results" / "suite_h200" / "none-runs.tar.gz"
    unpacked = tmp_path / "arm"
    with tarfile.open(archive) as tar:
        tar.extractall(unpacked, filter="data")
    home = tmp_path / "home"
    wanted = ["001-L1_1_Square_matrix_multiplication", "003-L1_95_CrossEntropyLoss", "007-L3_1_MLP"]
    for name in wanted:
        _cli("runs", "import", str(unpacked / f"{name}.kernelskill-run.tar.gz"), "--home", str(home))
    proc = subprocess.run([sys.executable, "-m", "kernelskill", "kb", "learn", *wanted, "--home", str(home),
                           "--hardware", "NVIDIA H200", "--dry-run", "--json"], capture_output=True, text=True,
                          timeout=1200)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = {m["run_method"]: m for r in json.loads(proc.stdout)["runs"] for m in r["mappings"]}
    for name in ("presplit_3xtf32_cublas_gemm", "cublas_tf32_presplit_3xtf32_mstacked"):
        assert found[name]["maps_to"] == "ec_tf32_library_gemm", found[name]
    assert found["ec_tf32_tensor_core_gemm"]["maps_to"] == "ec_tf32_gemm"
    for name in ("cublaslt_autotuned_presplit_3xtf32", "register_cached_two_pass_logsumexp"):
        assert found[name]["maps_to"] is None and found[name]["draft"] == name
    # cuBLASLt algorithm timing is a KB method since session 7 (library_algo_autotune, curated from the
    # no-KB arm's kb learn draft): the change named for it maps there, the stacked-split one stays a draft
    # whose nearest method it is
    assert found["cublaslt_fused_epilogue_with_algo_autotune"]["maps_to"] == "library_algo_autotune"
    assert found["cublaslt_autotuned_presplit_3xtf32"]["best"]["method"] == "library_algo_autotune"
