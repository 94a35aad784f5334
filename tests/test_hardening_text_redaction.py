"""Secrets never leave through text (issue 27, failures 4 and 11): a candidate that reads the secrets beside
the run (the ``--home`` kernelskill.toml's key, the ``./kernelskill.toml``'s key, a ``.env`` in the starting
folder, the key of the variable ``llm.api_key_env`` names) and raises them in its error, raw, in base64 (whole
file, URL-safe, wrapped at 76 columns) and in hex, gets none of them into ``events.jsonl``, the candidates, the
reports or the next diagnose/repair request the LLM endpoint receives; a key the LLM echoes into its code is
redacted in ``candidates/*.py``; ``runs export`` refuses a run folder holding a configured key of any shape.

Real components: the CLI (``optimize``, ``runs export``), the real run store and loop, the real ``openai``
client against the local test server. Doubles at the true boundaries only: the LLM's answers, and the GPU (the
evaluator reports what the harness reports when a candidate raises: its message and output)."""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import kernelskill
from kernelskill.cli import main
from kernelskill.pipeline.runs import redact
from tests.openai_test_server import ScriptedOpenAI
from tests.test_loop_helpers import DIAGNOSIS, TASK, fenced, kernel

THIS = Path(__file__)
PLUGINS = ["--evaluator", f"{THIS}:LeakyEvaluator", "--retriever",
           f"{THIS.with_name('test_loop_helpers.py')}:StandInRetriever"]

HOME_KEY = "home-toml-key-Q7w8e9r0"  # no sk- shape: only the configured value can find it
CWD_KEY = "cwd-toml-key-Z1x2c3v4b5"
DOTENV_PASS = "dotenv-pass-M4n5b6v7"
DOTENV_PLAIN = "plainvalue-from-dotenv-4242"  # its name says nothing about a secret
NAMED_KEY = "named-var-cred-P0o9i8u7"  # the value of the variable llm.api_key_env names
SECRETS = (HOME_KEY, CWD_KEY, DOTENV_PASS, DOTENV_PLAIN, NAMED_KEY)


class LeakyEvaluator:
    """The GPU boundary as a candidate that carries secrets out would leave it: the candidate read the files
    beside the run and raised their text, encoded every way, in its error, its stdout, its stderr and the
    build log. A candidate without the ``leak`` marker measures 1.2x."""

    def check(self) -> None:
        return None

    def evaluate(self, task: Path, candidate: Path, *, seed: int | None = None) -> dict[str, Any]:
        if "# harness: leak" not in candidate.read_text():
            return {"status": "ok", "correct": True, "speedup": 1.2, "baseline_ms": 3.0, "candidate_ms": 2.5,
                    "candidate_iqr_ms": 0.01, "baseline_iqr_ms": 0.01, "message": "", "build_log": ""}
        loot = "\n".join(Path(p).read_text() for p in (os.environ["KS_TEST_HOME_TOML"], ".env", "kernelskill.toml"))
        loot += "\nenv " + os.environ.get("ENDPOINT_VALUE", "")
        raw = loot.encode()
        text = (f"RuntimeError: {loot}\nb64 {base64.b64encode(raw).decode()}\n"
                f"wrapped {base64.encodebytes(b'xy' + raw).decode()}\nurl {base64.urlsafe_b64encode(raw).decode()}\n"
                f"hex {raw.hex()} HEX {raw.hex().upper()}")
        return {"status": "runtime_error", "correct": False, "message": text, "stdout": text, "stderr": text,
                "build_log": text, "details": {"traceback": text.splitlines()}}

    def profile(self, task: Path, candidate: Path) -> dict[str, Any]:
        return {"ok": False, "message": "no ncu here", "csv": ""}


def decoded_views(text: str) -> list[str]:
    """``text`` and every decoding of its base64 and hex runs (at every alignment, line breaks removed):
    found independently of the redactor, so a secret in any of these forms is seen."""
    views = [text]
    for run in re.findall(r"[A-Za-z0-9+/_\-=\n]{12,}", text):
        run = run.replace("\n", "")
        for alphabet in (run, run.replace("-", "+").replace("_", "/")):
            for cut in range(4):
                part = alphabet[cut:].rstrip("=")
                part = part[: len(part) - len(part) % 4]
                try:
                    views.append(base64.b64decode(part, validate=False).decode("latin-1"))
                except (binascii.Error, ValueError):
                    pass
    for run in re.findall(r"[0-9A-Fa-f]{12,}", text):
        for cut in range(2):
            part = run[cut:]
            part = part[: len(part) - len(part) % 2]
            views.append(bytes.fromhex(part).decode("latin-1"))
    return views


def leaks(text: str) -> list[str]:
    views = decoded_views(text)
    return [s for s in SECRETS if any(s in v for v in views)]


@pytest.fixture
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """No secret registered by an earlier test in this process: the command must find them itself."""
    monkeypatch.setattr(redact, "_registered", set())
    monkeypatch.setattr(redact, "_scanned", set())


@pytest.fixture
def beside_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_registry: None) -> dict[str, str]:
    """A home with a key in its toml, a starting folder with its own toml key and a .env; returns the env."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "kernelskill.toml").write_text(f'[llm]\napi_key = "{HOME_KEY}"\n')
    work = tmp_path / "work"
    work.mkdir()
    (work / "kernelskill.toml").write_text(f'[llm]\napi_key = "{CWD_KEY}"\napi_key_env = "ENDPOINT_VALUE"\n')
    (work / ".env").write_text(f"# local secrets\nDB_PASSWORD={DOTENV_PASS}\nexport GREETING=\"{DOTENV_PLAIN}\"\n")
    (work / "relu2.py").write_text(TASK)
    monkeypatch.chdir(work)
    return {"KS_TEST_HOME_TOML": str(home / "kernelskill.toml"), "ENDPOINT_VALUE": NAMED_KEY,
            "OPENAI_API_KEY": "", "KERNELSKILL_LLM_API_KEY": "", "KERNELSKILL_LLM_TIMEOUT_S": "5",
            "KERNELSKILL_LLM_MODEL": "test-model"}


def ks(*args: str, env: dict[str, str]) -> Any:
    return CliRunner().invoke(main, list(args), env=env)


def echoing_kernel() -> str:
    """A candidate whose comments echo two keys (raw and base64), as an LLM that saw them might write."""
    return kernel("leak=1", "seed").replace(
        "import torch\n", f"import torch\n# api key for the bench: {HOME_KEY}\n"
                          f"# b64: {base64.b64encode(CWD_KEY.encode()).decode()}\n", 1)


def test_a_candidate_leaking_every_secret_leaves_none_in_the_run_or_the_requests(
        tmp_path: Path, beside_the_run: dict[str, str]) -> None:
    script = {"r00.generate.1": [fenced(echoing_kernel())], "r01.diagnose.1": [DIAGNOSIS],
              "r01.repair.1": [fenced(kernel("speedup=1.20", "fixed"))]}
    with ScriptedOpenAI(script) as server:
        out = ks("optimize", "relu2.py", "--rounds", "1", "--home", str(tmp_path / "home"), "--base-url",
                 server.base_url, *PLUGINS, env=beside_the_run)
    assert out.exit_code == 0, out.output
    run_dir = next((tmp_path / "home" / "runs").iterdir())
    events = (run_dir / "events.jsonl").read_text()
    failed = [json.loads(line) for line in events.splitlines() if '"runtime_error"' in line]
    assert failed and "[redacted]" in events  # the leak was recorded, redacted
    for path in sorted(p for p in run_dir.rglob("*") if p.is_file() and p.name != ".lock"):
        assert leaks(path.read_text(errors="replace")) == [], path.relative_to(run_dir)
    candidate = (run_dir / "candidates" / "r00.generate.py").read_text()
    assert "# api key for the bench: [redacted]" in candidate and "# b64: [redacted]" in candidate
    asked = [json.dumps(r) for r in server.requests]
    assert any("diagnose" in r for r in asked)  # the failure went into the next request...
    assert all(leaks(r) == [] for r in asked)  # ...without any secret


def test_runs_export_refuses_a_configured_key_of_any_shape(tmp_path: Path, beside_the_run: dict[str, str]) -> None:
    script = {"r00.generate.1": [fenced(kernel("speedup=1.20", "seed"))]}
    home = str(tmp_path / "home")
    with ScriptedOpenAI(script) as server:
        out = ks("optimize", "relu2.py", "--rounds", "0", "--home", home, "--base-url", server.base_url, *PLUGINS,
                 env=beside_the_run)
    assert out.exit_code == 0, out.output
    run_dir = next((tmp_path / "home" / "runs").iterdir())
    clean = ks("runs", "export", run_dir.name, "-o", str(tmp_path / "ok.tar.gz"), "--home", home, env=beside_the_run)
    assert clean.exit_code == 0, clean.output  # nothing configured is in it: it travels
    plants = {"notes.txt": f"the key is {HOME_KEY}\n", "candidates/extra.py": f"# {DOTENV_PLAIN}\n",
              "profiles/p.csv": base64.b64encode(f"api_key={CWD_KEY}".encode()).decode() + "\n",
              "blob.bin": b"\x00\x01" + NAMED_KEY.encode().hex().encode()}
    for name, content in plants.items():
        target = run_dir / name
        target.parent.mkdir(exist_ok=True)
        target.write_bytes(content if isinstance(content, bytes) else content.encode())
        redact._registered.clear()  # the command itself finds the configured secrets
        archive = tmp_path / f"{target.stem}.tar.gz"
        refused = ks("runs", "export", run_dir.name, "-o", str(archive), "--home", home, env=beside_the_run)
        assert refused.exit_code == 2, (name, refused.output)
        line = refused.output.strip()
        assert "\n" not in line and name in line and "configured secret" in line, line
        assert leaks(refused.output) == [] and not archive.exists()
        target.unlink()


def test_an_unknown_kernelskill_variable_is_ignored_with_one_warning(tmp_path: Path) -> None:
    """``KERNELSKILL_HARNESS_HIDE`` is read by the harness itself and names no setting; an unknown
    ``KERNELSKILL_*`` warns once and the command works; a bad value of a real setting is still an error.
    The real command in a subprocess: its stderr as a user sees it."""
    root = Path(kernelskill.__file__).parent  # not resolved: the package may be a link named kernelskill
    base = {k: v for k, v in os.environ.items() if not k.startswith("KERNELSKILL_")}
    env = {**base, "PYTHONPATH": str(root.parent), "KERNELSKILL_HARNESS_HIDE": "/x",
           "KERNELSKILL_HARNESS_ISOLATION": "none", "KERNELSKILL_HARNESS_NOT_A_SETTING_EVER": "1",
           "KERNELSKILL_LLM": "whole-section"}

    def run(extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "kernelskill", "runs", "resume", "--all",
                               str(tmp_path / "none"), "--stop-before", "llm", "--home", str(tmp_path / "home"),
                               "--json"], env={**env, **extra}, capture_output=True, text=True, timeout=300)

    out = run({})
    assert out.returncode == 0, out.stderr
    warnings = [ln for ln in out.stderr.splitlines() if ln.startswith("WARNING")]
    assert len(warnings) == 1, out.stderr  # one, though the command loads the settings more than once
    assert "KERNELSKILL_HARNESS_NOT_A_SETTING_EVER" in warnings[0] and "KERNELSKILL_LLM:" in warnings[0]
    assert "HIDE" not in warnings[0] and "ISOLATION" not in warnings[0]
    bad = run({"KERNELSKILL_LLM_TIMEOUT_S": "soon"})
    assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr
    assert [ln for ln in bad.stderr.splitlines() if ln.startswith("error:")] == [
        "error: settings: llm.timeout_s: Input should be a valid number, unable to parse string as a number"]

