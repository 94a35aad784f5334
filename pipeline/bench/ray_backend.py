"""Beyond one host: builds and evaluations as Ray tasks (optional extra: ``pip install -e ".[ray]"``).

:class:`RayEvaluator` is the harness's ``Evaluator`` protocol (``submit(jobs) -> list[EvalResult]``) on a
Ray cluster: each job is one Ray task (``num_gpus=1`` for GPU work, ``num_cpus=1`` in CPU mode) that
writes the task and candidate sources it was sent into a scratch folder of its node and calls the same
``kernelskill.pipeline.harness.evaluate`` the local evaluator calls, so the results are the local
evaluator's (the files travel as text: no shared filesystem is needed). :class:`RayBackend` serves the
suite's :class:`~kernelskill.pipeline.bench.gpu_pool.GPUPool` with one slot per GPU of the cluster (per
CPU in CPU mode). Profiles run as Ray tasks too (``ncu`` must be on the GPU nodes).

``ray`` is imported lazily (it is an optional, heavy dependency).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kernelskill.errors import KernelskillError
from kernelskill.pipeline.bench.gpu_pool import GPUJob

log = logging.getLogger(__name__)


def _import_ray() -> Any:
    try:
        import ray  # lazy: optional extra
    except ImportError as exc:
        raise KernelskillError('--evaluator ray: Ray is not installed (pip install -e ".[ray]")') from exc
    return ray


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
        if kind == "profile":
            return profile(task, cand, cfg).to_dict()
        out = evaluate(task, cand, cfg).to_dict()
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

    @property
    def slots(self) -> int:
        return self.gpus if self.gpus_per_job else max(1, self.cpus)

    def _ref(self, kind: str, task: Path, candidate: Path, config: Any) -> Any:
        opts = {"num_gpus": self.gpus_per_job, "num_cpus": 1, "max_retries": 0}
        return self._fn.options(**opts).remote(kind, Path(task).name, Path(task).read_text(), Path(candidate).name,
                                               Path(candidate).read_text(), config.to_dict())

    def submit(self, jobs: Sequence[Any]) -> list[Any]:
        """``EvalJob``s -> ``EvalResult``s, all in flight at once (Ray queues them on its GPUs)."""
        from kernelskill.pipeline.harness import EvalConfig, EvalResult

        refs = [self._ref("eval", Path(j.task), Path(j.candidate), j.config or EvalConfig()) for j in jobs]
        out = []
        for job, ref in zip(jobs, refs, strict=True):
            data = self.ray.get(ref)
            data.update(task=str(job.task), candidate=str(job.candidate))
            data.setdefault("details", {})["tag"] = job.tag
            out.append(EvalResult.from_dict(data))
        return out

    def profile(self, task: Path, candidate: Path, config: Any) -> dict[str, Any]:
        return self.ray.get(self._ref("profile", task, candidate, config))

    def shutdown(self) -> None:
        self.ray.shutdown()


class RayBackend:
    """The suite's GPU pool on a Ray cluster: a slot per cluster GPU; no local build ahead (each Ray task
    builds on its own node, into that node's cache)."""

    def __init__(self, config: Any, evaluator: RayEvaluator) -> None:
        self.config = config  # (run_dir, seed) -> EvalConfig
        self.evaluator = evaluator
        self.name = f"ray: {evaluator.gpus} GPU" if evaluator.gpus else f"ray: CPU mode ({evaluator.cpus} CPUs)"

    def slots(self) -> list[Any]:
        return list(range(self.evaluator.slots))

    def prepare(self, job: GPUJob) -> None:
        return None

    def run(self, job: GPUJob, slot: Any) -> dict[str, Any]:
        from kernelskill.pipeline.harness import EvalJob

        cfg = self.config(job.run_dir, job.seed)
        if job.kind == "profile":
            return self.evaluator.profile(job.task, job.candidate, cfg)
        [result] = self.evaluator.submit([EvalJob(task=str(job.task), candidate=str(job.candidate), config=cfg,
                                                  tag=job.tag)])
        return result.to_dict()
