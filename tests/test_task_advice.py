"""The KB's advice for a task with no kernel yet (issue 31, item 1): ``query TASK.py`` and
``retrieval.api.task_advice`` answer from the op families of the forward under the protocol, never from a
fallback case written for kernel code. Task files under tests/data/kb31 (not KB examples); a real store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelskill.cli import main
from kernelskill.config import load_settings
from kernelskill.errors import KernelskillError
from kernelskill.retrieval.api import query, task_advice
from kernelskill.retrieval.task_routes import forward_families, is_task_only

D = Path(__file__).resolve().parent / "data" / "kb31"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from kernelskill.kb.home import open_store

    home = tmp_path_factory.mktemp("advice_home")
    open_store(load_settings(home=home)).close()
    return home


def test_task_files_are_told_from_kernels() -> None:
    assert is_task_only((D / "logsoftmax_task.py").read_text())
    assert not is_task_only((D / "scale_add_kernel.py").read_text())
    fams = [(s.family, [n for n, _ in calls]) for s, calls in forward_families(D / "linear_swish_task.py")]
    assert fams == [("gemm", ["linear"]), ("elementwise", ["sigmoid"])]
    assert [s.family for s, _ in forward_families(D / "avgpool_groupnorm_task.py")] == ["normalization", "pooling"]
    assert [s.family for s, _ in forward_families(D / "cumsum_task.py")] == ["scan"]


def test_query_on_a_softmax_task_answers_from_the_softmax_route(home: Path) -> None:
    r = query(D / "logsoftmax_task.py", settings=load_settings(home=home))
    assert r.case.id == "tr_softmax" and r.case.fallback
    assert not r.case.id.startswith("fs")  # never the static fallback written for kernel code
    assert r.permitted[0].id == "online_softmax"
    assert "kernel_fusion" in {f.id for f in r.forbidden}  # one op: nothing to fuse
    assert any(s.id == "task_family" and s.value == "softmax" for s in r.trace)


def test_query_cli_on_a_task_file(home: Path) -> None:
    out = CliRunner().invoke(main, ["query", str(D / "cumsum_task.py"), "--home", str(home), "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["case"]["id"] == "tr_scan" and data["permitted"][0]["id"] == "single_pass_scan"


def test_gemm_advice_follows_the_protocol(home: Path) -> None:
    strict = task_advice(D / "linear_swish_task.py", protocol="strict", home=home)
    bench = task_advice(D / "linear_swish_task.py", protocol="kernelbench", home=home)
    assert [f.family for f in strict.families] == ["gemm", "elementwise"] and strict.families[0].dominant
    s_gemm, b_gemm = strict.families[0], bench.families[0]
    assert s_gemm.case == b_gemm.case == "tr_gemm"
    # strict: no library, no precision downcast; the compensated hand-written route and fp32 tiles remain
    assert {"ec_tf32_library_gemm", "cublas_gemm"} <= {f.id for f in s_gemm.forbidden}
    assert s_gemm.routes[0].id == "ec_tf32_gemm"
    assert "warp_tiling_fp32_gemm" in [r.id for r in s_gemm.routes]
    # kernelbench admits cuBLAS: the library with compensation comes first
    assert b_gemm.routes[0].id == "ec_tf32_library_gemm"
    assert bench.first_routes(2)["gemm"] == ["ec_tf32_library_gemm", "cublas_gemm"]
    # guidance and the measured effect (with its eager baseline) travel with each route
    tiles = next(r for r in s_gemm.routes if r.id == "warp_tiling_fp32_gemm")
    assert tiles.guidance and tiles.measured is not None and tiles.measured.after_vs_eager is not None
    assert "of eager" in tiles.measured.summary()
    # the dominant family carries its routes' ceilings for this task's work
    by = {x.route: x for x in b_gemm.ceilings.routes}
    assert by["library_compensated"].ceiling_ms < by["hand_tiles"].ceiling_ms
    assert s_gemm.ceilings.flops == 2.0 * 1024 * 8192 * 8192


def test_normalization_and_pooling_task(home: Path) -> None:
    a = task_advice(D / "avgpool_groupnorm_task.py", home=home)
    assert a.first_routes(1) == {"normalization": ["welford_one_pass_norm"], "pooling": ["vectorized_access_16b"]}


def test_bad_task_file_is_one_line_error(tmp_path: Path, home: Path) -> None:
    with pytest.raises(KernelskillError):
        task_advice(tmp_path / "missing_task.py", home=home)
    bad = tmp_path / "bad_task.py"
    bad.write_text("class Model(:\n")
    with pytest.raises(KernelskillError):
        task_advice(bad, home=home)
