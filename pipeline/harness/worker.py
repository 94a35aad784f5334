"""The harness worker: ``python -m kernelskill.pipeline.harness.worker [--ready WORKDIR] --result-fd N``.

Started by :mod:`.sandbox` in its own process group. The job (with its nonce) arrives as one JSON line
on stdin; the verdict leaves through the inherited descriptor N (:mod:`.channel`): stage lines, then
one record. No file is written as a verdict. Modes:

* ``build``: import the candidate with the GPU hidden, so load_inline / fast-path builds run on the
  CPU and land in the build folder of the candidate's source hash;
* ``evaluate``: the GPU phase (correctness, anti-cheat checks, timing) of one candidate;
* ``profile``: one forward between cudaProfilerStart/Stop, for ``ncu --profile-from-start off``.

``worker --ready WORKDIR`` is a worker started before its job (see ``sandbox.run_worker(ready_key=...)``):
it imports torch and the evaluation code, brings CUDA up when the parent says no timing is running (a
``cuda`` line on stdin), and waits for the job's line. Python, torch and the CUDA context then cost the
next candidate nothing.

The result is one JSON object. A sticky CUDA error ends the process right after the record is
written (the context is unusable); the exit is always ``os._exit`` so a stray non-daemon thread
cannot keep the worker alive.
"""

from __future__ import annotations

import fcntl
import json
import os
import resource
import select
import stat
import sys
import time
import traceback
from typing import Any

from .channel import WORKER_LOG, Writer
from .failures import Stage, classify_exception


class ChannelStage(Stage):
    """The stage of the worker, streamed to the parent on the result channel (never to a file)."""

    def __init__(self, writer: Writer) -> None:
        super().__init__(None)
        self.writer = writer

    def __call__(self, name: str) -> None:
        super().__call__(name)
        self.writer.stage(name)


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


def _read_line(fd: int, buf: bytearray, timeout: float | None) -> bytes | None:
    """One line from ``fd`` (None on timeout); raises EOFError when the parent closed it first."""
    while b"\n" not in buf:
        if timeout is not None and not select.select([fd], [], [], timeout)[0]:
            return None
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            raise EOFError("the parent closed the job channel")
        buf.extend(chunk)
    i = buf.index(b"\n")
    line = bytes(buf[:i])
    del buf[: i + 1]
    return line


def wait_ready() -> dict[str, Any]:
    """A ready worker: torch and the evaluation code imported (and CUDA up once the parent says so) before
    the candidate is known; returns the job when its line arrives on stdin.

    It never runs candidate code before its one job, so each candidate still gets a fresh process.
    """
    import torch

    from .checks import OpRecorder
    from .evaluation import Evaluation  # noqa: F401 - torch's dispatch machinery, the checks and timing

    with torch.no_grad(), OpRecorder(), torch.device("cpu"):  # their first use loads lazily: on the CPU now
        torch.zeros(2).add_(1).sum()
    buf = bytearray()
    while True:
        line = _read_line(0, buf, None)
        if line is None or not line.strip():
            continue
        if line.strip() == b"cuda":
            if torch.cuda.is_available():
                torch.zeros(1, device="cuda").add_(1)  # the context and the elementwise kernels load now
                torch.cuda.synchronize()
            continue
        req = json.loads(line)
        for name, value in (req.get("env") or {}).items():  # the job's build folders
            os.environ[name] = str(value)
        return req


def _parse_args(argv: list[str]) -> tuple[bool, int]:
    """``(ready, channel fd)``; the channel is moved to a high descriptor that the candidate's children do
    not inherit (-1 when it is not the pipe the parent passed: then no record is written)."""
    ready = "--ready" in argv
    fd = int(argv[argv.index("--result-fd") + 1])
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return ready, -1
    except OSError:
        return ready, -1
    try:
        high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 200)
    except OSError:  # a low descriptor limit: the channel stays where it is, closed on exec all the same
        os.set_inheritable(fd, False)
        return ready, fd
    os.close(fd)
    return ready, high


def _close_stdin() -> None:
    """The job has arrived: nothing more is read, and the candidate finds no pipe to the parent there."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)


def main(argv: list[str]) -> None:
    ready, fd = _parse_args(argv)
    _die_with_parent()
    try:
        req = wait_ready() if ready else json.loads(_read_line(0, bytearray(), None) or b"{}")
    except (EOFError, ValueError):
        os._exit(5)  # no job: nothing to report
    _close_stdin()
    writer = Writer(fd, str(req.pop("nonce", "")))
    stage = ChannelStage(writer)
    _set_limits(req)
    if req.get("mode") == "profile":  # the profiler's output is ours: the candidate's prints go elsewhere
        log_fd = os.open(WORKER_LOG, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(log_fd)
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
        if getattr(exc, "harness_failure", False):  # the harness's own failure (no GPU in the worker)
            result["details"]["harness_failure"] = True
        result["build_log"] = build_log
    result.setdefault("details", {})
    if isinstance(result["details"], dict):
        result["details"].setdefault("stage", stage.name)
        result["details"]["stage_times_s"] = stage.times | {"end": round(time.perf_counter() - stage.t0, 3)}
    try:
        writer.record(result)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(3 if sticky else 0)


if __name__ == "__main__":
    main(sys.argv)

