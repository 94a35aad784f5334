"""The second shape set: which module-level sizes vary, to what, and the no-CUDA refusal (CPU only)."""

from __future__ import annotations

import types

import pytest

from kernelskill.errors import KernelskillError
from kernelskill.pipeline.harness.shapes import eight_size, odd_size, shape_plans, task_sizes


def _task(**values):
    mod = types.ModuleType("task")
    mod.__dict__.update(values)
    return mod


def test_sizes_exclude_operator_settings():
    task = _task(batch_size=16, dim=16384, M=1024, in_channels=3, kernel_size=3, stride=2, num_heads=8,
                 reduce_dim=1, scale=2.0, use_bias=True, layer_sizes=[32, 32], num_groups=8, out_channels=64)
    assert task_sizes(task) == {"batch_size": 16, "dim": 16384, "M": 1024, "out_channels": 64}


@pytest.mark.parametrize("value", [8, 16, 32, 64, 128, 224, 1000, 1024, 4095, 4096, 393216])
def test_new_sizes_shrink_and_avoid_round_multiples(value):
    odd, eight = odd_size(value), eight_size(value)
    assert odd < value and odd % 2 == 1
    assert eight <= value and eight % 8 == 0 and (eight % 32 != 0 or eight == value)


def test_plans_vary_everything_then_fall_back_to_batch():
    plans = shape_plans(_task(batch_size=16, dim=393216))
    assert [p.sizes for p in plans] == [{"batch_size": 11, "dim": 294911}, {"batch_size": 8, "dim": 294904},
                                        {"batch_size": 8}]
    assert shape_plans(_task(batch_size=16, dim=393216), "batch_only")[0].sizes == {"batch_size": 8}
    assert shape_plans(_task(batch_size=16), "none") == []
    assert shape_plans(_task(kernel_size=3)) == []


def test_varied_task_recomputes_derived_values(tmp_path):
    path = tmp_path / "task.py"
    path.write_text("out_channels = 128\nbias_shape = (out_channels, 1, 1)\nN = 2048 * 2\n")
    base = types.ModuleType("task")
    exec(path.read_text(), base.__dict__)  # noqa: S102 - a test task
    plan = shape_plans(base)[0]
    alt = plan.task_module(path, base)
    assert alt.out_channels == 95 and alt.bias_shape == (95, 1, 1) and alt.N == 3071
    assert base.out_channels == 128  # the original module is untouched


def test_no_cuda_is_one_line_and_nothing_is_cached(tmp_path, monkeypatch):
    """A CUDA candidate on a machine without CUDA: HarnessUnavailable (exit 2 in the CLI), no build record."""
    from kernelskill.pipeline.harness import EvalConfig, HarnessUnavailable, evaluate, preflight

    monkeypatch.setattr(preflight, "cuda_problem", lambda: "no CUDA driver was found on this machine")
    cand = tmp_path / "cand.py"
    cand.write_text("from torch.utils.cpp_extension import load_inline\nclass ModelNew:\n    pass\n")
    task = tmp_path / "task.py"
    task.write_text("class Model:\n    pass\ndef get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n")
    cache = tmp_path / "cache"
    with pytest.raises(HarnessUnavailable) as exc:
        evaluate(task, cand, EvalConfig(cache_dir=str(cache)))
    assert isinstance(exc.value, KernelskillError) and exc.value.exit_code == 2
    assert str(exc.value) == "cannot evaluate a CUDA candidate here: no CUDA driver was found on this machine"
    assert not list(cache.rglob("build.json"))


def test_no_nvcc_is_not_a_compile_error(tmp_path, monkeypatch):
    from kernelskill.pipeline.harness import EvalConfig, HarnessUnavailable, build, preflight

    monkeypatch.setattr(preflight, "find_nvcc", lambda: None)
    cand = tmp_path / "cand.py"
    cand.write_text("from torch.utils.cpp_extension import load_inline\nclass ModelNew:\n    pass\n")
    with pytest.raises(HarnessUnavailable, match="nvcc"):
        build(cand, EvalConfig(cache_dir=str(tmp_path / "cache")))
    assert not list((tmp_path / "cache").rglob("build.json"))


def test_pure_torch_candidates_still_run_on_the_cpu():
    from kernelskill.pipeline.harness.preflight import needs_cuda

    assert not needs_cuda("import torch\nclass ModelNew(torch.nn.Module): ...", "python")
    assert needs_cuda("x", "cu") and needs_cuda("load_inline(...)", "python")


def test_cli_eval_without_cuda_exits_2_with_one_line(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from kernelskill.cli import main
    from kernelskill.pipeline.harness import preflight

    monkeypatch.setattr(preflight, "cuda_problem", lambda: "the NVIDIA driver on your system is too old")
    cases = __import__("pathlib").Path(__file__).parent / "harness_cases"
    home = tmp_path / "home"
    res = CliRunner().invoke(main, ["--home", str(home), "eval", str(cases / "tasks" / "add.py"),
                                    str(cases / "gpu" / "good_add_inline.py")])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert lines[-1].endswith("cannot evaluate a CUDA candidate here: the NVIDIA driver on your system is too old")
    assert not list(home.rglob("build.json"))  # nothing cached as the candidate's fault
