"""GPU check of the issue-31 test kernels (tests/data/kb31): they build and match their tasks under the
harness, so the diagnoses the CPU tests make are about real, correct kernels. Run on a CUDA machine:

    mkdir -p /tmp/pp && ln -sfn "$PWD" /tmp/pp/kernelskill && PYTHONPATH=/tmp/pp python3 -m pytest -q \\
        tests/test_kb31_kernels_gpu.py
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():  # pragma: no cover - CPU machines
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from kernelskill.pipeline.harness import EvalConfig, EvalJob, LocalEvaluator  # noqa: E402

D = Path(__file__).parent / "data" / "kb31"
PAIRS = {"tiled_gemm_cp_async": "gemm_task.py", "scale_add": "scale_add_task.py"}


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory):
    cache = str(tmp_path_factory.mktemp("kb31_builds"))
    jobs = [EvalJob(str(D / task), str(D / f"{name}_kernel.py"), EvalConfig(cache_dir=cache, timing_trials=20), tag=name)
            for name, task in PAIRS.items()]
    return dict(zip(PAIRS, LocalEvaluator().submit(jobs), strict=True))


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_kernel_is_correct(results, name):
    r = results[name]
    assert r.status == "ok" and r.correct, (r.status, r.message)
