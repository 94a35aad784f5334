"""Beyond one host: builds and evaluations as Ray tasks (optional extra: ``pip install -e ".[ray]"``).

:class:`RayEvaluator` is the harness's ``Evaluator`` protocol (``submit(jobs) -> list[EvalResult]``) on a
Ray cluster. Each job is two Ray tasks: a build (``num_cpus=1``, no GPU) that compiles the candidate into its
node's build cache (keyed by the source's hash), then the evaluation (``num_gpus=1``; no GPU in CPU mode)
pinned to the node that built it, which calls the same ``kernelskill.pipeline.harness.evaluate`` as the
local evaluator and finds the build there, so the results are the local evaluator's and a GPU never waits
for a compiler. Files travel as text (no shared filesystem is needed): each task writes the task and
candidate into a scratch folder of its node. :class:`RayBackend` serves the suite's
:class:`~kernelskill.pipeline.runs.gpu_pool.GPUPool` with one slot per GPU of the cluster (per CPU in CPU
mode), its build-ahead stage being the build task. Profiles run as Ray tasks too (``ncu`` on the GPU nodes).

Each result names the node and the GPU ids Ray gave its task (``details.device``). A task whose worker or node
dies is not retried by Ray (``max_retries=0``): the pool runs it again (its ``worker_died``), so every try is
counted in the result's ``details.attempts``.

``ray`` is imported lazily (it is an optional, heavy dependency).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kernelskill.errors import KernelskillError
from kernelskill.pipeline.runs.gpu_pool import GPUJob

log = logging.getLogger(__name__)


def _import_ray() -> Any:
    try:
        import ray  # lazy: optional extra
    except ImportError as exc:
        raise KernelskillError('--evaluator ray: Ray is not installed (pip install -e ".[ray]")') from exc
    return ray


#: seconds to wait for a cluster's address to answer before saying it cannot be reached
CONNECT_TIMEOUT_S = 5.0


def check_address(address: str | None, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """One line, exit 2, when a ``HOST:PORT`` cluster address does not answer (Ray itself would retry for a
    minute and end in a traceback). ``auto``, ``local`` and ``ray://`` addresses are left to Ray."""
    if not address or address in ("auto", "local") or "://" in address:
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise KernelskillError(f"--ray-address: {address!r} is not HOST:PORT, auto or ray://HOST:PORT")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        raise KernelskillError(f"--ray-address: no Ray cluster answers at {address} ({exc.strerror or exc}); "
                               "start one with `ray start --head` (docs/scaling.md)") from exc


def _where() -> dict[str, Any]:
    """The node and GPU ids Ray gave the running task, and the GPU's name."""
    import ray  # lazy: optional extra (this runs on a Ray worker)

    ctx = ray.get_runtime_context()
    try:
        gpu_ids = [str(g) for g in ray.get_gpu_ids()]
    except Exception:  # noqa: BLE001 - a label only
        gpu_ids = []
    try:
        import torch

        name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    except Exception:  # noqa: BLE001 - the name is a label only
        name = "cpu"
    node = str(ctx.get_node_id())
    where = f"GPU {','.join(gpu_ids)} {name}" if gpu_ids else name
    return {"gpu_name": name, "ray_node": node, "ray_gpu_ids": gpu_ids, "device": f"ray node {node[:12]}: {where}",
            "ray_worker_pid": os.getpid()}


def _no_ready_workers() -> None:
    """A Ray worker process may be killed between tasks (``ray.shutdown``, a scale-down), which no exit hook
    sees: the harness's workers started ahead for a next job would outlive it. None is left running."""
    from kernelskill.pipeline.harness.sandbox import stop_ready_workers

    stop_ready_workers()


def _remote_build(cand_name: str, cand_src: str, config: dict[str, Any]) -> str:
    """Runs on a Ray worker: build the candidate into this node's cache; returns this node's id."""
    import tempfile

    import ray  # lazy: optional extra (this runs on a Ray worker)

    from kernelskill.pipeline.harness import EvalConfig, build

    with tempfile.TemporaryDirectory(prefix="ks-ray-build-") as tmp:
        cand = Path(tmp) / cand_name
        cand.write_text(cand_src)
        try:
            build(cand, EvalConfig.from_dict(config))
        except Exception:  # noqa: BLE001 - a candidate that does not build: its evaluation reports why
            pass
        finally:
            _no_ready_workers()
    return str(ray.get_runtime_context().get_node_id())


def _remote_job(kind: str, task_name: str, task_src: str, cand_name: str, cand_src: str,
                config: dict[str, Any]) -> dict[str, Any]:
    """Runs on a Ray worker: evaluate (or profile) one candidate from its sources."""
    import tempfile

    from kernelskill.pipeline.harness import EvalConfig, evaluate, profile

    cfg = EvalConfig.from_dict(config)
    with tempfile.TemporaryDirectory(prefix="ks-ray-") as tmp:
        task, cand = Path(tmp) / task_name, Path(tmp) / "candidates" / cand_name
        cand.parent.mkdir()
        task.write_text(task_src)
        cand.write_text(cand_src)
        try:
            out = (profile(task, cand, cfg) if kind == "profile" else evaluate(task, cand, cfg)).to_dict()
        finally:
            _no_ready_workers()
    out.setdefault("details", {}).update(_where())
    return out


class RayEvaluator:
    """The harness ``Evaluator`` protocol on a Ray cluster (``address=None``: ``RAY_ADDRESS`` or a local
    instance; ``num_cpus`` bounds a local instance)."""

    def __init__(self, address: str | None = None, *, gpus_per_job: float | None = None,
                 num_cpus: int | None = None) -> None:
        self.ray = _import_ray()
        self.address = address or os.environ.get("RAY_ADDRESS") or None
        check_address(address)  # named here: it must answer, whether or not Ray is started already
        if not self.ray.is_initialized():
            check_address(self.address)
            kwargs: dict[str, Any] = {"address": address, "include_dashboard": False, "log_to_driver": False}
            if address is None and num_cpus is not None:
                kwargs["num_cpus"] = num_cpus
            try:
                self.ray.init(**kwargs)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
                raise KernelskillError(f"--ray-address: cannot connect to the Ray cluster at "
                                       f"{self.address or 'a new local instance'}: {first}") from exc
        resources = self.ray.cluster_resources()
        self.gpus = int(resources.get("GPU", 0))
        self.cpus = int(resources.get("CPU", 1))
        self.gpus_per_job = (1.0 if self.gpus else 0.0) if gpus_per_job is None else gpus_per_job
        self._fn = self.ray.remote(_remote_job)
        self._build = self.ray.remote(_remote_build)

    @property
    def slots(self) -> int:
        return self.gpus if self.gpus_per_job else max(1, self.cpus)

    def build(self, candidate: Path, config: Any) -> str:
        """Build on some node (a CPU task); returns the node id the evaluation should run on."""
        ref = self._build.options(num_cpus=1, num_gpus=0, max_retries=0).remote(
            Path(candidate).name, Path(candidate).read_text(), config.to_dict())
        return str(self.ray.get(ref))

    def _ref(self, kind: str, task: Path, candidate: Path, config: Any, node: str | None = None) -> Any:
        opts: dict[str, Any] = {"num_gpus": self.gpus_per_job, "num_cpus": 1, "max_retries": 0}
        if node is not None:  # where the build is cached
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # lazy: optional extra

            opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id=node, soft=True)
        return self._fn.options(**opts).remote(kind, Path(task).name, Path(task).read_text(), Path(candidate).name,
                                               Path(candidate).read_text(), config.to_dict())

    def submit(self, jobs: Sequence[Any], nodes: Sequence[str | None] | None = None) -> list[Any]:
        """``EvalJob``s -> ``EvalResult``s: every build in flight at once on the CPUs, each evaluation queued
        on a GPU of the node that built it as soon as its build is done. ``nodes`` (one per job): built
        already, on that node."""
        from kernelskill.pipeline.harness import EvalConfig, EvalResult

        cfgs = [j.config or EvalConfig() for j in jobs]
        if nodes is None:
            builds = [self._build.options(num_cpus=1, num_gpus=0, max_retries=0).remote(
                Path(j.candidate).name, Path(j.candidate).read_text(), c.to_dict()) for j, c in zip(jobs, cfgs,
                                                                                                   strict=True)]
            nodes = [str(self.ray.get(b)) for b in builds]
        refs = [self._ref("eval", Path(j.task), Path(j.candidate), c, node)
                for j, c, node in zip(jobs, cfgs, nodes, strict=True)]
        out = []
        for job, ref in zip(jobs, refs, strict=True):
            data = self.ray.get(ref)
            data.update(task=str(job.task), candidate=str(job.candidate))
            data.setdefault("details", {})["tag"] = job.tag
            out.append(EvalResult.from_dict(data))
        return out

    def profile(self, task: Path, candidate: Path, config: Any, node: str | None = None) -> dict[str, Any]:
        return self.ray.get(self._ref("profile", task, candidate, config, node))

    def shutdown(self) -> None:
        self.ray.shutdown()


class RayBackend:
    """The suite's GPU pool on a Ray cluster: a slot per cluster GPU; the pool's build-ahead stage runs the
    build as a CPU Ray task and the evaluation then goes to the node that built it."""

    def __init__(self, config: Any, evaluator: RayEvaluator) -> None:
        self.config = config  # (run_dir, seed) -> EvalConfig
        self.evaluator = evaluator
        self.name = f"ray: {evaluator.gpus} GPU" if evaluator.gpus else f"ray: CPU mode ({evaluator.cpus} CPUs)"
        self.spec = "ray"

    def slots(self) -> list[Any]:
        return list(range(self.evaluator.slots))

    def device(self, slot: Any) -> str:  # a result names its node and GPU itself; this is the fallback
        return f"{self.name} (slot {slot})"

    def info(self) -> dict[str, Any]:
        return {"ray_address": self.evaluator.address or "local instance", "cluster_gpus": self.evaluator.gpus,
                "cluster_cpus": self.evaluator.cpus}

    def prepare(self, job: GPUJob) -> None:
        try:
            job.extra["node"] = self.evaluator.build(job.candidate, self.config(job.run_dir, job.seed))
        except Exception as exc:  # noqa: BLE001 - the evaluation builds (and reports) it again
            log.info("%s: build task failed (%s); the evaluation builds it", job.tag, exc)

    def run(self, job: GPUJob, slot: Any) -> dict[str, Any]:
        from kernelskill.pipeline.harness import EvalJob

        cfg = self.config(job.run_dir, job.seed)
        node = job.extra.get("node")
        if job.kind == "profile":
            return self.evaluator.profile(job.task, job.candidate, cfg, node)
        [result] = self.evaluator.submit([EvalJob(task=str(job.task), candidate=str(job.candidate), config=cfg,
                                                  tag=job.tag)], nodes=[node])
        return result.to_dict()
