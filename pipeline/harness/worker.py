"""The harness worker: ``python -m kernelskill.pipeline.harness.worker REQUEST.json RESULT.json``.

Started by :mod:`.sandbox` in its own process group. Modes:

* ``build``: import the candidate with the GPU hidden, so load_inline / fast-path builds run on the
  CPU and land in the build folder of the candidate's source hash;
* ``evaluate``: the GPU phase (correctness, anti-cheat checks, timing) of one candidate;
* ``profile``: one forward between cudaProfilerStart/Stop, for ``ncu --profile-from-start off``.

``worker --ready WORKDIR`` is a worker started before its job (see ``sandbox.run_worker(ready_key=...)``):
it imports torch and the evaluation code, brings CUDA up when the parent says no timing is running, and
waits for ``WORKDIR/request.json``. Python, torch and the CUDA context then cost the next candidate nothing.

The result is one JSON object. A sticky CUDA error ends the process right after the result is
written (the context is unusable); the exit is always ``os._exit`` so a stray non-daemon thread
cannot keep the worker alive.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from .failures import Stage, classify_exception


def _die_with_parent() -> None:
    """Linux: SIGKILL this worker when the process that started it goes away (no orphans on the GPU)."""
    try:
        import ctypes
        import signal

        parent = os.getppid()  # in the sandbox's PID namespace the parent (its launcher) is PID 1
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent went away before the request took effect
            os._exit(4)
    except (OSError, AttributeError):
        pass


def _set_limits(req: dict[str, Any]) -> None:
    _die_with_parent()
    mb = int(req.get("config", {}).get("max_file_mb", 2048))
    try:
        resource.setrlimit(resource.RLIMIT_FSIZE, (mb * 2**20, mb * 2**20))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ValueError, OSError):
        pass


def _write(path: str, data: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        json.dump(data, fh, default=str)
    os.replace(tmp, path)


def do_build(req: dict[str, Any], stage: Stage) -> dict[str, Any]:
    from .build import BUILD_EVENTS, install_build_hooks
    from .fastpath import BUILD_STATS
    from .loader import load_candidate

    stage("build_import")
    install_build_hooks(fast_headers=bool(req["config"].get("fast_headers", True)))
    start = time.perf_counter()
    try:
        load_candidate(req["candidate"], req["kind"])
    except BaseException as exc:  # noqa: BLE001 - classify everything the candidate raises
        status, message, _sticky, build_log = classify_exception(exc)
        seconds = time.perf_counter() - start
        if status == "compile_error":
            return {"ok": False, "status": status, "message": message, "log": build_log,
                    "seconds": seconds, "events": BUILD_EVENTS, "fastpath": BUILD_STATS}
        # the import needs something the CPU-only build phase lacks (a GPU): build in the GPU phase
        return {"ok": True, "deferred": True, "status": "ok", "seconds": seconds,
                "message": f"import deferred to the GPU phase: {message.splitlines()[0][:300]}",
                "events": BUILD_EVENTS, "fastpath": BUILD_STATS, "log": ""}
    return {"ok": True, "status": "ok", "seconds": time.perf_counter() - start, "events": BUILD_EVENTS,
            "fastpath": BUILD_STATS, "log": "", "message": ""}


def _fail(status: str, message: str, **details: Any) -> dict[str, Any]:
    return {"status": status, "correct": False, "message": message, "details": details}


#: how a ready worker learns its job (``--ready WORKDIR``): the parent renames the request into place
READY_REQUEST = "request.json"
READY_CUDA = "cuda.go"  # the parent's sign that no timed run is going on: bring CUDA up now


def wait_ready(workdir: str) -> list[str]:
    """A ready worker: torch and the evaluation code imported (and CUDA up once the parent says so) before
    the candidate is known; returns the ``[prog, REQUEST, RESULT]`` argv of the job when it arrives.

    It never runs candidate code before its one job, so each candidate still gets a fresh process.
    """
    import torch

    from .checks import OpRecorder
    from .evaluation import Evaluation  # noqa: F401 - torch's dispatch machinery, the checks and timing

    with torch.no_grad(), OpRecorder(), torch.device("cpu"):  # their first use loads lazily: on the CPU now
        torch.zeros(2).add_(1).sum()
    folder = Path(workdir)
    cuda_up = False
    while not (folder / READY_REQUEST).is_file():
        if not cuda_up and (folder / READY_CUDA).is_file() and torch.cuda.is_available():
            torch.zeros(1, device="cuda").add_(1)  # the context and the elementwise kernels load now
            torch.cuda.synchronize()
            cuda_up = True
        time.sleep(0.02)
    req = json.loads((folder / READY_REQUEST).read_text())
    for name, value in (req.get("env") or {}).items():  # the job's build folders
        os.environ[name] = str(value)
    return [sys.argv[0], str(folder / READY_REQUEST), str(folder / "result.json")]


def main(argv: list[str]) -> None:
    if len(argv) == 3 and argv[1] == "--ready":
        _die_with_parent()
        argv = wait_ready(argv[2])
    req = json.loads(Path(argv[1]).read_text())
    out_path = argv[2]
    stage = Stage(req.get("stage_file"))
    _set_limits(req)
    sticky = False
    try:
        mode = req["mode"]
        if mode == "build":
            result = do_build(req, stage)
        elif mode == "evaluate":
            from .evaluation import Evaluation

            ev = Evaluation(req, stage)
            result = ev.run()
            sticky = ev.sticky
        elif mode == "profile":
            from .evaluation import profile_target

            result = profile_target(req, stage)
        else:
            result = _fail("runtime_error", f"unknown worker mode {mode!r}")
    except BaseException as exc:  # noqa: BLE001 - the worker reports, it does not crash
        status, message, sticky, build_log = classify_exception(exc)
        result = _fail(status, f"{message} (during {stage.name})", stage=stage.name,
                       traceback=traceback.format_exc()[-3000:])
        result["build_log"] = build_log
    result.setdefault("details", {})
    if isinstance(result["details"], dict):
        result["details"].setdefault("stage", stage.name)
        result["details"]["stage_times_s"] = stage.times | {"end": round(time.perf_counter() - stage.t0, 3)}
    try:
        _write(out_path, result)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(3 if sticky else 0)


if __name__ == "__main__":
    main(sys.argv)

