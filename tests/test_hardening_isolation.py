"""A candidate looks for the user's secrets and the network from inside the harness worker (CPU mode).

It scans ``/proc/*/environ`` and ``/proc/*/cmdline`` of every process it can see, its own environment,
the real home folder (a planted ``~/.ssh/id_rsa`` and a ``kernelskill.toml`` with an ``api_key``), a file
left in the shared ``/tmp``, and connects to a socket the test listens on at 127.0.0.1. Where user namespaces work (this machine), it
must find nothing and connect nowhere, and the result says ``isolation: namespaces``; where they do not,
the result carries the ``process-only`` warning.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kernelskill.pipeline.harness import isolation

ADD = Path(__file__).parent / "harness_cases" / "tasks" / "add_small.py"
SECRETS = {"OPENAI_API_KEY": "sk-probe-env-7d1f0c", "AWS_SECRET_ACCESS_KEY": "aws-probe-2b9e44",
           "DATABASE_URL": "postgres://u:dbpass-probe-93aa@db/x"}
SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nssh-probe-5c0d1e\n-----END OPENSSH PRIVATE KEY-----\n"
TOML_KEY = "toml-probe-a1b2c3"

PROBE = '''
import glob, json, os, socket
import torch

SECRETS = {secrets!r}
HOME = {home!r}
PORT = {port!r}
PLANTED = {planted!r}


def _read(path):
    try:
        with open(path, "rb") as fh:
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return None


def _probe():
    found = []
    pids = [p for p in glob.glob("/proc/[0-9]*")]
    for pid in pids:
        for name in ("environ", "cmdline"):
            text = _read(pid + "/" + name) or ""
            found += [pid + "/" + name for s in SECRETS if s in text]
    found += ["os.environ" for s in SECRETS if any(s in v for v in os.environ.values())]
    for rel in (".ssh/id_rsa", ".kernelskill/kernelskill.toml"):
        text = _read(os.path.join(HOME, rel))
        if text and any(s in text for s in SECRETS):
            found.append(rel)
    text = _read(PLANTED)  # a file another program left in the shared /tmp
    if text and any(s in text for s in SECRETS):
        found.append("tmp")
    try:
        listing = os.listdir(HOME)
    except OSError:
        listing = []
    connected = False
    try:
        sock = socket.create_connection(("127.0.0.1", PORT), timeout=2)
        sock.close()
        connected = True
    except OSError:
        pass
    return {{"found": found, "home": sorted(listing), "connected": connected, "pids": len(pids)}}


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        raise RuntimeError("PROBE " + json.dumps(_probe()))
'''


def _findings(message: str) -> dict:
    start = message.index("PROBE ") + len("PROBE ")
    return json.JSONDecoder().raw_decode(message[start:])[0]


@pytest.fixture
def planted(tmp_path: Path):
    """A home folder with a private key and a config holding an API key; secrets in the environment;
    the candidate lives in a run folder inside that home, as the optimize loop writes it."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(SSH_KEY)
    ks_home = home / ".kernelskill"
    ks_home.mkdir()
    (ks_home / "kernelskill.toml").write_text(f'[llm]\napi_key = "{TOML_KEY}"\n')
    env = dict(os.environ) | SECRETS | {"HOME": str(home), "KERNELSKILL_HOME": str(ks_home),
                                        # a home folder on PATH must not undo its hiding
                                        "PATH": os.environ.get("PATH", "") + os.pathsep + str(home)}
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.setblocking(False)
    run = ks_home / "runs" / "r1"
    run.mkdir(parents=True)
    secrets = [*SECRETS.values(), "ssh-probe-5c0d1e", TOML_KEY, "tmp-probe-77aa"]
    planted = tmp_path / "left-in-tmp.txt"
    planted.write_text("token: tmp-probe-77aa\n")
    candidate = run / "candidate.py"
    candidate.write_text(PROBE.format(secrets=secrets, home=str(home), port=listener.getsockname()[1],
                                      planted=str(planted)))
    yield {"candidate": candidate, "listener": listener, "cache": tmp_path / "cache", "env": env}
    listener.close()


def _accepted(listener: socket.socket) -> bool:
    try:
        conn, _ = listener.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


EVALUATE = """
import sys
from kernelskill.pipeline.harness import EvalConfig, evaluate
cfg = EvalConfig(cache_dir=sys.argv[3], time=False, correctness_trials=1, alt_shapes=False)
print(evaluate(sys.argv[1], sys.argv[2], cfg).to_json())
"""


def _evaluate(planted: dict, **env: str) -> tuple[dict, dict]:
    """Evaluate in a kernelskill process that was started with the secrets in its environment (so they
    are in its /proc/<pid>/environ, as for a user who exported an API key)."""
    proc = subprocess.run([sys.executable, "-c", EVALUATE, str(ADD), str(planted["candidate"]),
                           str(planted["cache"])], env=planted["env"] | env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["status"] == "runtime_error" and "PROBE " in res["message"], res["message"]
    return _findings(res["message"]), res["details"]


def test_candidate_finds_no_secret_and_reaches_no_network(planted) -> None:
    if isolation.available() != isolation.NAMESPACES:  # probed in this process as in the child
        findings, details = _evaluate(planted)
        assert details["isolation"] == "process-only" and "process-only" in details["isolation_warning"]
        pytest.skip("user namespaces are not available on this machine: process-only isolation")
    findings, details = _evaluate(planted)
    assert details["isolation"] == "namespaces" and "isolation_warning" not in details
    assert findings["found"] == [], findings
    # the real home is an empty tmpfs, but for the path down to the kept candidate file
    assert findings["home"] in ([], [".kernelskill"]), findings
    assert findings["connected"] is False and not _accepted(planted["listener"])
    assert findings["pids"] <= 3, findings  # the launcher and the worker, nothing of the session


def test_process_only_fallback_is_visible_in_every_result(planted) -> None:
    """Forced off (as on a machine without user namespaces): the result says so, and the same probe shows
    why it matters (the parent's environment and the home folder are readable, the socket answers)."""
    findings, details = _evaluate(planted, **{isolation.ENV_FORCE: "process"})
    assert details["isolation"] == "process-only"
    assert details["isolation_warning"].startswith("isolation: process-only")
    assert any(f.startswith("/proc/") for f in findings["found"]) and ".ssh/id_rsa" in findings["found"], findings
    assert "tmp" in findings["found"]
    assert findings["connected"] is True


GOOD = Path(__file__).parent / "harness_cases" / "cpu" / "good_add.py"
DEFAULT_CACHE = """
import sys
from kernelskill.pipeline.harness import EvalConfig, evaluate
print(evaluate(sys.argv[1], sys.argv[2], EvalConfig(time=False, correctness_trials=1, alt_shapes=False)).to_json())
"""


def test_build_cache_under_the_hidden_home_still_works(planted) -> None:
    """The default build cache lives under the home folder the sandbox hides: it is bound back writable."""
    proc = subprocess.run([sys.executable, "-c", DEFAULT_CACHE, str(ADD), str(GOOD)], env=planted["env"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["status"] == "ok" and res["correct"], res["message"]
    assert (Path(planted["env"]["HOME"]) / ".cache" / "kernelskill" / "builds").is_dir()
