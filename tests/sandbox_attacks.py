"""Attack candidates and host fixtures shared by the CPU and GPU sandbox tests (issue 27).

Imports only the standard library: the GPU box runs these attacks with torch and the harness alone.
Every candidate is written from a template into a run folder; the probe reports what it managed in a
``PROBE {json}`` line (printed at import, and raised from ``forward`` so that the result's message
carries it).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import secrets
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the package (the repository root)
CASES = Path(__file__).parent / "harness_cases"
ADD = CASES / "tasks" / "add_small.py"
FAKE_NCU = CASES / "sandbox" / "fake_ncu"
#: package files a candidate tries to append to (failure 1: the next kernelskill command would run them)
PACKAGE_FILES = [ROOT / "__init__.py", ROOT / "pipeline" / "harness" / "results.py"]
#: host folders a root candidate once wrote into (failure 5)
HOST_DIRS = ["/etc", "/opt", "/srv", "/usr/local"]
#: a root-only file of the host that every Linux has (read by a candidate when kernelskill runs as root)
SHADOW = "/etc/shadow"
#: what the test's root-only file holds (not one of SECRETS: when the suite runs as an ordinary user that
#: file is the user's own, which the sandbox does not hide)
ROOT_ONLY_TEXT = "root-only-file-6b1d"

SECRETS = {"cwd_toml": "toml-cwd-secret-4f1e", "home_toml": "toml-home-secret-9a0b", "dotenv": "dotenv-secret-77c3",
           "dotenv_local": "dotenv-local-secret-12de", "passphrase": "cuda-passphrase-secret-5e5e",
           "api_key": "sk-sandbox-env-secret-3131"}

PROBE = r'''
import errno, glob, json, os, socket
import torch

TARGETS = {targets!r}
READS = {reads!r}
SECRETS = {secrets!r}
SOCKET = {sock!r}
CACHE = {cache!r}


def _err(exc):
    return errno.errorcode.get(exc.errno, str(exc.errno))


def _try_write(path):
    try:
        with open(path, "a") as fh:
            fh.write("\n# written by a candidate\n")
        return "written"
    except OSError as exc:
        return _err(exc)


def _try_read(path):
    try:
        with open(path, "rb") as fh:
            text = fh.read().decode("utf-8", "replace")
    except OSError as exc:
        return "unreadable:" + _err(exc)
    return "secret" if any(s in text for s in SECRETS) else "no secret"


def _probe():
    out = {{"write": {{k: _try_write(v) for k, v in TARGETS.items()}},
           "read": {{k: _try_read(v) for k, v in READS.items()}},
           "env": sorted(k for k, v in os.environ.items() if k == "CUDA_PASSPHRASE" or any(s in v for s in SECRETS))}}
    out["uid"] = [os.getuid(), os.getgid()]
    out["cwd"] = os.getcwd()
    out["work_file"] = _try_write(os.path.join(os.getcwd(), "ks-owner-probe.txt"))
    out["cache"] = {{os.path.relpath(p, CACHE): _try_write(p) for p in glob.glob(os.path.join(CACHE, "*", "build.json"))}}
    out["cache"]["<root>"] = _try_write(os.path.join(CACHE, "planted.json"))
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(SOCKET)
            out["unix"] = "connected"
        except OSError as exc:
            out["unix"] = "connect:" + _err(exc)
        sock.close()
    except OSError as exc:
        out["unix"] = "socket:" + _err(exc)
    try:
        a, b = socket.socketpair()
        a.send(b"x")
        out["socketpair"] = b.recv(1).decode()
        a.close()
        b.close()
    except OSError as exc:
        out["socketpair"] = "error:" + _err(exc)
    return out


FINDINGS = _probe()
print("PROBE " + json.dumps(FINDINGS), flush=True)


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        raise RuntimeError("PROBE " + json.dumps(FINDINGS))
'''

#: the correct body (a - (-b)): a forging candidate that also computes right must still never pass
CORRECT = "torch.sub(a, torch.neg(b))"

#: what a forging candidate may do before it ends, and how it may end (the property tests sample these).
#: Descriptors from 100 up: where the worker keeps its channel (a blunter attack on every descriptor would
#: also hit the CUDA driver's own pipes on a GPU, which tests nothing of the harness)
FORGE_ACTIONS = {
    "result_file": ('with open("result.json", "w") as fh:\n'
                    '    json.dump({"status": "ok", "correct": True, "speedup": 1000.0, "candidate_ms": 0.001}, fh)'),
    "result_tmp": ('with open("result.json.tmp", "w") as fh:\n'
                   '    json.dump({"status": "ok", "correct": True, "speedup": 1000.0}, fh)\n'
                   'os.replace("result.json.tmp", "result.json")'),
    "print_result": 'print(json.dumps({"status": "ok", "correct": True, "speedup": 1000.0}), flush=True)',
    "print_record": ('payload = json.dumps({"nonce": "0" * 32, "stages": [], "result": {"status": "ok"}}).encode()\n'
                     'print("R %d %s" % (len(payload), hashlib.sha256(payload).hexdigest()), flush=True)\n'
                     'print(payload.decode(), flush=True)'),
    "write_pipes": ('stages = ["load_task", "import_candidate", "first_forward", "correctness_trial_0", "timing"]\n'
                    'payload = json.dumps({"nonce": secrets.token_hex(16), "stages": stages, "result": '
                    '{"status": "ok", "correct": True, "speedup": 1000.0}}).encode()\n'
                    'fake = b"".join(b"S " + s.encode() + b"\\n" for s in stages)\n'
                    'fake += b"R %d %s\\n" % (len(payload), hashlib.sha256(payload).hexdigest().encode()) + payload\n'
                    'for fd in range(100, 1024):\n'
                    '    try:\n'
                    '        if stat.S_ISFIFO(os.fstat(fd).st_mode):\n'
                    '            os.write(fd, fake)\n'
                    '    except OSError:\n'
                    '        pass'),
}
FORGE_ENDINGS = {
    "exit0": "os._exit(0)",
    "exit3": "os._exit(3)",
    "sigkill": "os.kill(os.getpid(), signal.SIGKILL)",
    "sigterm": "os.kill(os.getpid(), signal.SIGTERM)",
    "sys_exit": "sys.exit(0)",
    "close_fds_return": "os.closerange(100, 1024)\nreturn " + CORRECT,
    "return_correct": "return " + CORRECT,
}

FORGE = '''
import hashlib, json, os, secrets, signal, stat, sys
import torch

{module_level}


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
{body}
'''


def _indent(text: str, n: int) -> str:
    return "\n".join(" " * n + line if line else line for line in text.splitlines())


def forging_candidate(actions: list[str], ending: str, *, at_import: bool) -> str:
    """A candidate that does ``actions`` (at import or in forward), then ends by ``ending`` in forward."""
    code = "\n".join(FORGE_ACTIONS[a] for a in actions)
    module_level = code if at_import else ""
    body = (code + "\n" if not at_import else "") + FORGE_ENDINGS[ending]
    return FORGE.format(module_level=module_level, body=_indent(body, 8))


def sampled_misbehaviours(n: int, seed: int = 27) -> list[tuple[str, list[str], str, bool]]:
    """``n`` (name, actions, ending, at_import) combinations: each either ends abnormally or forges a verdict
    (so none of them may pass). Seeded: the same sample every run."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        actions = rng.sample(sorted(FORGE_ACTIONS), rng.randint(0, 3))
        endings = sorted(FORGE_ENDINGS) if actions else [e for e in sorted(FORGE_ENDINGS) if e != "return_correct"]
        ending = rng.choice(endings)
        if ending == "close_fds_return" and not actions:
            ending = "exit0"
        out.append((f"sampled_{i}", actions, ending, rng.random() < 0.3))
    return out


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "absent"


class World:
    """The host around a run: a starting folder with settings and .env files, a --home outside the home
    folder, a build cache, a Unix socket listening outside /tmp and /run, and host files to protect."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.project = base / "project"
        self.home = base / "outside-home"
        self.cache = base / "cache"
        self.runs = self.project / "runs"
        for folder in (self.project, self.home, self.cache, self.runs):
            folder.mkdir(parents=True, exist_ok=True)
        (self.project / "kernelskill.toml").write_text(f'[llm]\napi_key = "{SECRETS["cwd_toml"]}"\n')
        (self.project / ".env").write_text(f"OPENAI_API_KEY={SECRETS['dotenv']}\n")
        (self.project / ".env.local").write_text(f"TOKEN={SECRETS['dotenv_local']}\n")
        (self.home / "kernelskill.toml").write_text(f'[llm]\nbase_url = "http://x"\napi_key = "{SECRETS["home_toml"]}"\n')
        self.token = secrets.token_hex(4)
        # a listener outside /tmp and /run (which the sandbox replaces anyway): beside this file
        self.sock_dir = Path(__file__).parent / f".ks-sock-{os.getpid()}-{self.token}"
        self.sock_dir.mkdir()
        self.sock_path = str(self.sock_dir / "s")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.sock_path)
        self.listener.listen(4)
        self.listener.setblocking(False)
        self.host_targets = {d.strip("/").replace("/", "_"): f"{d}/ks-sandbox-probe-{self.token}" for d in HOST_DIRS}
        # outside every hidden and scratch folder (the sandbox shows it, read-only): a file only root may read,
        # and a folder the sandbox's own user may write on the host (only the read-only world stops a plant)
        self.root_only = self.sock_dir / "root-only.txt"
        self.root_only.write_text(ROOT_ONLY_TEXT + "\n")
        self.root_only.chmod(0o600)
        self.own_dir = self.sock_dir / "sandbox-owned"
        self.own_dir.mkdir()
        if os.geteuid() == 0:  # the sandbox's root is the unprivileged id on the host
            from kernelskill.pipeline.harness.isolation import outer_id

            os.chown(self.own_dir, outer_id(), outer_id())
        self.before = self.snapshot()

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a kernelskill process started by a user with secrets exported; ``import
        kernelskill`` finds this checkout (the harness's own link folder when the folder has another name)."""
        from kernelskill.pipeline.harness.sandbox import package_pythonpath

        path = os.pathsep.join(p for p in (package_pythonpath(), os.environ.get("PYTHONPATH", "")) if p)
        return dict(os.environ) | {"CUDA_PASSPHRASE": SECRETS["passphrase"], "OPENAI_API_KEY": SECRETS["api_key"],
                                   "PYTHONPATH": path} | extra

    def probe(self, name: str = "probe.py") -> Path:
        targets = {"package_init": str(PACKAGE_FILES[0]), "package_module": str(PACKAGE_FILES[1]),
                   "cwd_toml": str(self.project / "kernelskill.toml"), "home_toml": str(self.home / "kernelskill.toml"),
                   "home_plant": str(self.home / "planted.toml"), "own_plant": str(self.own_dir / "planted.txt"),
                   **self.host_targets}
        reads = {"dotenv": str(self.project / ".env"), "dotenv_local": str(self.project / ".env.local"),
                 "cwd_toml": str(self.project / "kernelskill.toml"), "home_toml": str(self.home / "kernelskill.toml"),
                 "root_only": str(self.root_only), "shadow": SHADOW}
        path = self.runs / name
        path.write_text(PROBE.format(targets=targets, reads=reads, secrets=list(SECRETS.values()),
                                     sock=self.sock_path, cache=str(self.cache)))
        return path

    def write(self, name: str, source: str) -> Path:
        path = self.runs / name
        path.write_text(source)
        return path

    def snapshot(self) -> dict[str, str]:
        files = [*PACKAGE_FILES, self.project / "kernelskill.toml", self.home / "kernelskill.toml",
                 self.home / "planted.toml", self.cache / "planted.json", *self.cache.glob("*/build.json"),
                 self.root_only, self.own_dir / "planted.txt",
                 *(Path(p) for p in self.host_targets.values())]
        return {str(f): digest(f) for f in files}

    def unchanged(self) -> bool:
        """Every protected file is as it was, nothing was planted, and every build record the parent wrote
        meanwhile still carries a valid seal (no worker rewrote one)."""
        from kernelskill.pipeline.harness.build import read_record
        from kernelskill.pipeline.harness.sandbox import ENTRY_PARTS

        after = self.snapshot()
        records = [read_record(r, r.parent, parts=ENTRY_PARTS)[0] for r in self.cache.glob("*/build.json")]
        return {k: after[k] for k in self.before} == self.before and all(r is not None for r in records)

    def accepted(self) -> bool:
        try:
            conn, _ = self.listener.accept()
        except BlockingIOError:
            return False
        conn.close()
        return True

    def close(self) -> None:
        self.listener.close()
        shutil.rmtree(self.sock_dir)
        for path in self.host_targets.values():  # only if a sandbox failed: never leave a probe file behind
            Path(path).unlink(missing_ok=True)


def restore(before: dict[str, str], contents: dict[str, bytes]) -> None:
    """Put a package file back if an attack changed it (the test fails all the same)."""
    for path, data in contents.items():
        if digest(Path(path)) != before[path]:
            Path(path).write_bytes(data)


def denied(details: dict) -> tuple[str, ...]:
    """How a write outside the work folder fails: EROFS (the read-only world) as the caller's own uid; as the
    unprivileged uid (kernelskill runs as root) EACCES may come first, where that uid may not write anyway."""
    if str(details.get("sandbox_identity", "")).startswith("unprivileged"):
        return ("EROFS", "EACCES")
    return ("EROFS",)


def findings(message: str) -> dict:
    start = message.index("PROBE ") + len("PROBE ")
    return json.JSONDecoder().raw_decode(message[start:])[0]


#: evaluates jobs in a fresh kernelskill process (started with the secrets in its environment, in the
#: starting folder), the --home registered as the CLI does; prints one JSON list of results
EVALUATE_MANY = """
import json, sys
from kernelskill.pipeline.harness import EvalConfig, EvalJob, LocalEvaluator
from kernelskill.pipeline.harness.isolation import protect
spec = json.loads(sys.argv[1])
protect(spec["home"])
cfg = EvalConfig(cache_dir=spec["cache"], time=spec.get("time", False), correctness_trials=1, alt_shapes=False,
                 timing_trials=3, warmup=1, min_timing_trials=3, run_timeout_s=spec.get("timeout", 120),
                 baseline=spec.get("baseline", "eager"), keep_workdir=spec.get("keep_workdir", False))
jobs = [EvalJob(spec["task"], c, cfg, tag=t) for t, c in spec["jobs"]]
out = LocalEvaluator(gpus=spec.get("gpus"), slots_per_gpu=spec.get("slots", 2)).submit(jobs)
print(json.dumps([r.to_dict() for r in out]))
"""

PROFILE_ONE = """
import json, sys
from kernelskill.pipeline.harness import EvalConfig, profile
from kernelskill.pipeline.harness.isolation import protect
spec = json.loads(sys.argv[1])
protect(spec["home"])
res = profile(spec["task"], spec["candidate"], EvalConfig(cache_dir=spec["cache"], run_timeout_s=120))
print(json.dumps(res.to_dict()))
"""


def world_for(tmp_path: Path) -> Iterator[World]:
    """A world for a test module's ``world`` fixture: the package's files put back as they were afterwards."""
    w = World(tmp_path)
    contents = {str(p): p.read_bytes() for p in PACKAGE_FILES}
    yield w
    restore(w.before, contents)
    w.close()


def run_script(script: str, spec: dict, world: World, *, timeout: int = 900, **env: str) -> object:
    """Run a harness driver script (``EVALUATE_MANY``, ``PROFILE_ONE``) in the world; its last line is JSON."""
    proc = subprocess.run([sys.executable, "-c", script, json.dumps(spec)], cwd=world.project,
                          env=world.env(**env), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
