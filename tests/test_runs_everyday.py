"""Everyday use of the run commands: a suite's run found by its id, an exchange run that names no model it
never asked, and ``runs answer`` storing a text file without loading the GPU stack."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from kernelskill.cli import main
from kernelskill.config import load_settings
from kernelskill.pipeline.runs import RunStore
from tests.test_loop_helpers import TASK, fenced, kernel

ROOT = Path(__file__).resolve().parents[1]
HELPERS = Path(__file__).with_name("test_loop_helpers.py")
PLUGINS = ["--evaluator", f"{HELPERS}:ScriptedEvaluator", "--retriever", f"{HELPERS}:StandInRetriever"]
NO_KEY = {"OPENAI_API_KEY": "", "KERNELSKILL_LLM_API_KEY": ""}


def ks(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, list(args), env=env or {})


def _exchange_run(tmp_path: Path) -> tuple[str, str]:
    task = tmp_path / "relu2.py"
    task.write_text(TASK)
    home = str(tmp_path / "home")
    first = ks("optimize", str(task), "--rounds", "1", "--llm", "exchange", "--model", "some-model",
               "--home", home, *PLUGINS, env=NO_KEY)
    assert first.exit_code == 3, first.output
    return home, next((tmp_path / "home" / "runs").iterdir()).name


def test_an_exchange_run_names_the_exchange_not_a_model_it_never_asked(tmp_path: Path) -> None:
    home, run_id = _exchange_run(tmp_path)
    manifest = json.loads((Path(home) / "runs" / run_id / "run.json").read_text())
    assert (manifest["provider"], manifest["model"]) == ("exchange", "exchange")
    shown = json.loads(ks("runs", "show", run_id, "--home", home, "--json").output)
    assert shown["model"] == "exchange" and "some-model" not in json.dumps(shown)
    assert load_settings(overrides={"llm": {"provider": "openai", "model": "m"}}).llm.model_used == "m"


def test_a_suites_run_is_found_by_its_id(tmp_path: Path) -> None:
    home = tmp_path / "home"
    task = tmp_path / "relu2.py"
    task.write_text(TASK)
    run = RunStore(home / "suites" / "optimize-l1-abc" / "runs").create(task, {"model": "m", "provider": "openai"})
    out = ks("runs", "report", run.id, "--home", str(home))
    assert out.exit_code == 0, out.output
    assert out.output == ks("runs", "report", str(run.path), "--home", str(home)).output
    assert ks("runs", "show", run.id, "--home", str(home), "--json").exit_code == 0
    missing = ks("runs", "report", "20990101-000000-nothing-here", "--home", str(home))
    assert missing.exit_code == 2 and len(missing.output.strip().splitlines()) == 1
    assert str(home / "suites") in missing.output and str(home / "runs") in missing.output


def test_runs_answer_stores_the_answer_without_importing_torch(tmp_path: Path) -> None:
    """A fresh process (as a user or an agent calls it): the answer is checked and stored, and neither torch
    nor the harness is imported on the way."""
    home, run_id = _exchange_run(tmp_path)
    answer = tmp_path / "seed.txt"
    answer.write_text(fenced(kernel("speedup=1.20", "seed")))
    args = ["runs", "answer", run_id, "r00.generate.1", str(answer), "--home", home]
    body = ("import sys\nfrom kernelskill.cli import main\n"
            f"try:\n    main({args!r})\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
            "finally:\n    print(sorted(m for m in ('torch', 'kernelskill.pipeline.harness') if m in sys.modules))\n")
    env = {**os.environ, **NO_KEY}
    proc = subprocess.run([sys.executable, "-c", body], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "stored the generator answer for r00.generate.1" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stdout
    assert (Path(home) / "runs" / run_id / "exchange" / "r00.generate.1.answer.json").is_file()
