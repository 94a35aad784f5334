"""``--precision`` through the front ends: a bad value is one line and exit 2 on every command that takes it; the
settings key and its environment variable; ``eval`` in bf16 (on the CPU device) records it; ``query --precision
bf16`` lifts the fp32-only vetoes of the real KB; an optimize run records it in its manifest, states it in its
prompts and shows it in ``runs list`` and its report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kernelskill.cli import main
from kernelskill.config import load_settings
from kernelskill.errors import KernelskillError
from tests.test_loop_helpers import TASK

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "harness_cases"
MIX_TASK, MIX_CAND = str(CASES / "tasks" / "precision_mix.py"), str(CASES / "cpu" / "precision_fp32_math.py")
GEMM_TASK = str(ROOT / "examples" / "tasks" / "naive_gemm_task.py")
GEMM = str(ROOT / "examples" / "kernels" / "naive_gemm.py")
GEMM_PROFILE = str(ROOT / "examples" / "profiles" / "naive_gemm.csv")
HELPERS = ROOT / "tests" / "test_loop_helpers.py"
PLUGINS = ["--evaluator", f"{HELPERS}:ScriptedEvaluator", "--retriever", f"{HELPERS}:StandInRetriever"]
NO_KEY = {"OPENAI_API_KEY": "", "KERNELSKILL_LLM_API_KEY": ""}


def ks(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(main, list(args), env=env or {})


@pytest.mark.parametrize("command", [["eval", MIX_TASK, MIX_CAND], ["optimize", MIX_TASK], ["bench", "run", MIX_TASK],
                                     ["query", GEMM, "--task", GEMM_TASK], ["prompts", "render", GEMM_TASK]],
                         ids=["eval", "optimize", "bench-run", "query", "prompts-render"])
def test_a_bad_precision_is_one_line_and_exit_2(tmp_path: Path, command: list[str]) -> None:
    home = tmp_path / "home"
    res = ks(*command, "--precision", "fp8", "--home", str(home), env=NO_KEY)
    assert res.exit_code == 2, res.output
    assert res.output.strip().splitlines() == ["error: --precision: 'fp8' is not a precision; one of fp32, bf16, fp16"]
    assert not (home / "runs").exists() and not (home / "suites").exists()  # nothing was started


def test_the_settings_key_and_its_variable(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    assert load_settings(home=home, environ={}, cwd=tmp_path).harness.precision == "fp32"  # the default
    (home / "kernelskill.toml").write_text('[harness]\nprecision = "bf16"\n')
    assert load_settings(home=home, environ={}, cwd=tmp_path).harness.precision == "bf16"
    env = {"KERNELSKILL_HARNESS_PRECISION": "fp16"}
    assert load_settings(home=home, environ=env, cwd=tmp_path).harness.precision == "fp16"
    (home / "kernelskill.toml").write_text('[harness]\nprecision = "fp64"\n')
    with pytest.raises(KernelskillError, match="settings: harness.precision"):
        load_settings(home=home, environ={}, cwd=tmp_path)
    with pytest.raises(KernelskillError, match="'int8' is not a precision"):
        load_settings(home=tmp_path / "other", environ={}, cwd=tmp_path).under_precision("int8")


def test_eval_in_bf16_records_the_precision(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    args = ["eval", MIX_TASK, MIX_CAND, "--precision", "bf16", "--protocol", "kernelbench", "--trials", "3",
            "--home", home]
    res = ks(*args, "--json")
    assert res.exit_code == 0, res.output
    result = json.loads(res.stdout)["result"]
    assert result["status"] == "ok" and result["precision"] == "bf16"
    assert result["details"]["task_dtype"] == "bf16" and result["details"]["tolerance"]["atol"] == 1e-2
    shown = ks(*args)  # the table names the precision and the dtype the task ran in
    assert shown.exit_code == 0 and "bf16 (task dtype bf16)" in shown.stdout, shown.output


@pytest.fixture(scope="module")
def kb_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from kernelskill.kb.home import open_store

    home = tmp_path_factory.mktemp("precision_home")
    open_store(load_settings(home=home)).close()  # the bundled KB, built once for the module
    return home


def test_query_precision_lifts_the_fp32_only_vetoes(kb_home: Path) -> None:
    def ask(*extra: str) -> dict[str, Any]:
        res = ks("query", GEMM, "--task", GEMM_TASK, "--profile", GEMM_PROFILE, "--json", "--home", str(kb_home),
                 *extra)
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout)

    fp32, bf16 = ask(), ask("--precision", "bf16")
    assert fp32["context"]["task_dtype"] == "fp32" and bf16["context"]["task_dtype"] == "bf16"
    assert fp32["context"]["tolerance_atol"] == 1e-4 and bf16["context"]["tolerance_atol"] == 1e-2
    vetoes = [{v["id"] if isinstance(v, dict) else v for v in d["vetoes"]} for d in (fp32, bf16)]
    assert "no_precision_downcast_fp32" in vetoes[0] and "no_precision_downcast_fp32" not in vetoes[1]
    assert "tensor_core_mma" in {f["id"] for f in fp32["forbidden"]}
    assert "tensor_core_mma" in {m["id"] for m in bf16["permitted"]}
    assert "tensor_core_mma" not in {f["id"] for f in bf16["forbidden"]}


def test_the_loops_retriever_and_task_advice_follow_the_precision(kb_home: Path) -> None:
    from kernelskill.pipeline.loop import KBRetriever
    from kernelskill.retrieval.api import task_advice

    settings = load_settings(home=kb_home)
    assert settings.harness.precision == "fp32"
    raw = KBRetriever(settings).query(Path(GEMM), task=Path(GEMM_TASK), profile=Path(GEMM_PROFILE),
                                      protocol="strict", precision="bf16")
    assert raw["context"]["task_dtype"] == "bf16" and "tensor_core_mma" in {m["id"] for m in raw["permitted"]}
    assert task_advice(GEMM_TASK, settings=settings.under_precision("fp16")).dtype == "fp16"
    assert task_advice(GEMM_TASK, settings=settings).dtype == "fp32"


def test_an_optimize_run_records_states_and_shows_its_precision(tmp_path: Path) -> None:
    home = tmp_path / "home"
    task = tmp_path / "relu2.py"
    task.write_text(TASK)
    first = ks("optimize", str(task), "--rounds", "1", "--llm", "exchange", "--precision", "bf16",
               "--home", str(home), *PLUGINS, env=NO_KEY)
    assert first.exit_code == 3, first.output  # paused at the seed's LLM step
    run_dir = next((home / "runs").iterdir())
    assert json.loads((run_dir / "run.json").read_text())["harness"]["precision"] == "bf16"
    pending = ks("runs", "pending", run_dir.name, "--home", str(home), "--json")
    [step] = json.loads(pending.output)
    prompt = (run_dir / step["prompt"]).read_text()
    assert "(protocol `strict`, precision bf16)" in prompt and "Precision of this task: bf16" in prompt
    assert "no fp16/bf16 inputs or accumulators" not in prompt  # the fp32 contract is not stated
    listed = ks("runs", "list", "--home", str(home), "--json")
    assert [r["precision"] for r in json.loads(listed.output)] == ["bf16"]
    table = ks("runs", "list", "--home", str(home))
    assert "precision" in table.output and "bf16" in table.output
    report = ks("runs", "report", run_dir.name, "--home", str(home))
    assert "precision: bf16" in report.output
    again = ks("optimize", "--resume", run_dir.name, "--precision", "fp16", "--home", str(home), *PLUGINS, env=NO_KEY)
    assert again.exit_code == 2 and "keeps the precision it started with" in again.output


def test_a_suite_records_its_precision_and_fp32_suites_keep_their_names(tmp_path: Path) -> None:
    from kernelskill.pipeline.bench.report import markdown, suite_report
    from kernelskill.pipeline.bench.suite import Suite, default_name
    from kernelskill.pipeline.bench.tasks import file_tasks
    from tests.test_bench_helpers import task_source

    task = tmp_path / "t.py"
    task.write_text(task_source("t"))
    refs = file_tasks([task])
    old = {"protocol": "strict", "baseline": "compile"}  # a suite made before the precision existed
    assert default_name("optimize", refs, old) == default_name("optimize", refs, old | {"precision": "fp32"})
    assert default_name("optimize", refs, old) != default_name("optimize", refs, old | {"precision": "bf16"})
    Suite.create_or_resume(tmp_path / "old", "optimize", refs, old)
    Suite.create_or_resume(tmp_path / "old", "optimize", refs, old | {"precision": "fp32"})  # resumes: it ran in fp32
    with pytest.raises(KernelskillError, match="other precision"):
        Suite.create_or_resume(tmp_path / "old", "optimize", refs, old | {"precision": "bf16"})

    suite = Suite.create_or_resume(tmp_path / "bf16", "optimize", refs, old | {"precision": "bf16"})
    assert suite.manifest["options"]["precision"] == "bf16"
    [entry] = suite.tasks
    suite.run_for(entry, {"model": "m", "harness": {"protocol": "strict", "precision": "bf16"}})
    report = suite_report(suite)
    assert report["tasks"][0]["precision"] == "bf16" and report["labels"]["precision"] == "bf16"
    assert "Protocol strict; precision bf16;" in markdown(report)


def test_a_resumed_run_is_judged_as_it_started_whatever_this_machine_s_settings_say(tmp_path: Path) -> None:
    """``runs resume`` / ``optimize --resume`` on a machine whose settings differ: the run's own protocol,
    precision, tolerances and trials (from its manifest) judge its next candidates; build_jobs stays local."""
    from kernelskill.commands.optimize import resumed_options
    from kernelskill.pipeline.loop import HarnessEvaluator
    from kernelskill.pipeline.runs import RunStore

    home = tmp_path / "home"
    task = tmp_path / "relu2.py"
    task.write_text(TASK)
    started = ks("optimize", str(task), "--rounds", "1", "--llm", "exchange", "--precision", "bf16", "--protocol",
                 "kernelbench", "--home", str(home), *PLUGINS, env=NO_KEY)
    assert started.exit_code == 3, started.output
    run = RunStore(home / "runs").list()[0]
    assert run.manifest["harness"]["protocol"] == "kernelbench"
    here = load_settings(home=tmp_path / "other")  # this machine: strict, fp32, its own trials and build jobs
    here.harness.timing_trials, here.harness.build_jobs = 17, 5
    evaluator = HarnessEvaluator(here.harness)  # made before the options, as `runs resume` makes it
    resumed_options(run, here, ["gpu"])
    cfg = evaluator._config()
    assert (cfg.protocol, cfg.precision) == ("kernelbench", "bf16")
    assert here.harness.timing_trials == run.manifest["harness"]["timing_trials"] != 17
    assert here.harness.build_jobs == 5


@pytest.mark.parametrize("protocol, first", [("kernelbench", "cublas_gemm"), ("strict", "wgmma_hopper")])
def test_a_bf16_gemm_task_is_not_offered_fp32_only_error_compensation(kb_home: Path, protocol: str, first: str) -> None:
    """A bf16 operand is exact in TF32: the compensated-TF32 methods (fp32-only guidance) leave the answer, and
    the tensor-core route lists only the methods that may take it."""
    def ask(precision: str) -> dict[str, Any]:
        out = ks("query", GEMM_TASK, "--precision", precision, "--protocol", protocol, "--home", str(kb_home), "--json")
        assert out.exit_code == 0, out.output
        return json.loads(out.output)

    fp32, bf16 = ask("fp32"), ask("bf16")
    compensated = {"ec_tf32_gemm", "ec_tf32_library_gemm"}
    assert compensated & {m["id"] for m in fp32["permitted"]}
    assert not compensated & {m["id"] for m in bf16["permitted"]}
    assert {f["id"]: f["veto"] for f in bf16["forbidden"] if f["id"] in compensated} == \
        dict.fromkeys(compensated, "no_error_compensation_in_half_precision")
    assert bf16["permitted"][0]["id"] == first
    on_kernel = ks("query", GEMM, "--task", GEMM_TASK, "--profile", GEMM_PROFILE, "--precision", "bf16", "--protocol",
                   protocol, "--home", str(kb_home), "--json")
    assert on_kernel.exit_code == 0, on_kernel.output
    [tc] = [r for r in json.loads(on_kernel.output)["routes"]["routes"] if r["route"] == "tensor_core"]
    assert tc["allowed"] and tc["methods"] and "ec_tf32_gemm" not in tc["methods"]
