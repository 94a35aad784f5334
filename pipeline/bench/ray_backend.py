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

``ray`` is imported lazily (it is an optional, heavy dependency).
"""

from __future__ import annotations

import logging
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
            if kind == "profile":
                return profile(task, cand, cfg).to_dict()
            out = evaluate(task, cand, cfg).to_dict()
        finally:
            _no_ready_workers()
    try:
        import torch

        name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    except Exception:  # noqa: BLE001 - the name is a label only
        name = "cpu"
    out.setdefault("details", {})["gpu_name"] = name
    return out


class RayEvaluator:
    """The harness ``Evaluator`` protocol on a Ray cluster (``address=None``: ``RAY_ADDRESS`` or a local
    instance; ``num_cpus`` bounds a local instance)."""

    def __init__(self, address: str | None = None, *, gpus_per_job: float | None = None,
                 num_cpus: int | None = None) -> None:
        self.ray = _import_ray()
        if not self.ray.is_initialized():
            kwargs: dict[str, Any] = {"address": address, "include_dashboard": False, "log_to_driver": False}
            if address is None and num_cpus is not None:
                kwargs["num_cpus"] = num_cpus
            self.ray.init(**kwargs)
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

    def slots(self) -> list[Any]:
        return list(range(self.evaluator.slots))

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
