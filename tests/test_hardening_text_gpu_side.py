"""The GPU side redacts what the real harness reports (issue 27, failure 4, on the evaluation path).

The GPU side loads no settings: it still knows the secret files of the folder it runs in (``.env``,
``kernelskill.toml``) and of ``$KERNELSKILL_HOME``. The real harness runs a candidate that raises their values,
raw, in base64 and in hex (however it got them: the sandbox may hide the files themselves, so the candidate
carries them reversed, which no redactor reads); the event the GPU side records holds none of them.
Runs on the CPU here (``allow_cpu``) and on a CUDA device with the ``gpu`` mark; imports only the standard
library, torch and the run package, as a bare GPU box has them."""

from __future__ import annotations

import base64
import binascii
import json
import re
from pathlib import Path

import pytest

from kernelskill.pipeline.runs import RunStore, gpu_request, gpu_side, redact
from tests.test_loop_helpers import ADD_TASK

HOME_KEY = "home-toml-key-Q7w8e9r0"
DOTENV_PASS = "dotenv-pass-M4n5b6v7"
DOTENV_PLAIN = "plainvalue-from-dotenv-4242"
SECRETS = (HOME_KEY, DOTENV_PASS, DOTENV_PLAIN)

LEAKING_CANDIDATE = """import base64, torch
# the secrets, as a candidate that got hold of them might carry them (written reversed: no redactor reads that)
loot = " ".join(s[::-1] for s in {reversed_secrets!r})
raw = loot.encode()
print(loot, base64.b64encode(raw).decode(), flush=True)


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        raise RuntimeError(loot + " " + base64.b64encode(raw).decode() + " " + raw.hex())
"""


def leaks(text: str) -> list[str]:
    """The secrets found in ``text`` raw, or in any base64 or hex run of it decoded (at every alignment)."""
    views = [text]
    for run in re.findall(r"[A-Za-z0-9+/_\-=]{12,}", text):
        for cut in range(4):
            part = run[cut:].rstrip("=")
            try:
                views.append(base64.b64decode(part[: len(part) - len(part) % 4]).decode("latin-1"))
            except (binascii.Error, ValueError):
                pass
    for run in re.findall(r"[0-9A-Fa-f]{12,}", text):
        for cut in range(2):
            part = run[cut:]
            views.append(bytes.fromhex(part[: len(part) - len(part) % 2]).decode("latin-1"))
    return [s for s in SECRETS if any(s in v for v in views)]


def _leak_through_the_harness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, allow_cpu: bool) -> dict:
    monkeypatch.setattr(redact, "_registered", set())  # nothing registered by an earlier test
    monkeypatch.setattr(redact, "_scanned", set())
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "kernelskill.toml").write_text(f'[llm]\napi_key = "{HOME_KEY}"\n')
    (work / ".env").write_text(f"DB_PASSWORD={DOTENV_PASS}\nGREETING={DOTENV_PLAIN}\n")
    monkeypatch.chdir(work)
    monkeypatch.setenv("KERNELSKILL_HOME", str(home))
    (work / "add.py").write_text(ADD_TASK)
    run = RunStore(work / "runs").create(work / "add.py", {"model": "m", "options": {}, "harness": {
        "timing_trials": 5, "correctness_trials": 1}}, run_id="leak-run")
    source = LEAKING_CANDIDATE.format(reversed_secrets=[s[::-1] for s in SECRETS])
    rel = run.write_candidate("r00.generate", source)
    assert (run.path / rel).read_text() == source  # nothing in it to redact
    run.log.append("loop", "run_paused", {"before": "r00.eval", "side": "gpu",
                                          "request": gpu_request("eval", "r00.eval", rel) | {"round": 0}})
    [row] = gpu_side.evaluate_pending([run], gpu_side.HarnessGPU(allow_cpu=allow_cpu))
    assert row["status"] == "runtime_error", row
    events = (run.path / "events.jsonl").read_text()
    [event] = [e for e in map(json.loads, events.splitlines()) if e["type"] == "eval"]
    message = event["data"]["result"]["message"]
    assert "RuntimeError" in message and "[redacted]" in message, message  # it raised, and what it raised is gone
    assert leaks(events) == []
    return event["data"]["result"]


def test_the_gpu_side_redacts_what_the_real_harness_reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _leak_through_the_harness(tmp_path, monkeypatch, allow_cpu=True)


@pytest.mark.gpu
def test_the_gpu_side_redacts_what_the_real_harness_reports_on_the_gpu(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    result = _leak_through_the_harness(tmp_path, monkeypatch, allow_cpu=False)
    assert result["details"].get("gpu_name") not in (None, "cpu"), result["details"]
