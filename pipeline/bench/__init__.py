"""Suites: many optimize runs (or existing solutions) driven together, and what they add up to.

Owns the suite folder and its manifest (``suite``), reading KernelBench's own folder layout
(``tasks``), the Ray backend of the GPU pool (the pool itself is ``pipeline.runs.gpu_pool``) (``ray_backend``, optional extra ``ray``), the LLM gate that bounds and
slows concurrent requests (``llm_gate``), the driver (``driver``), evaluating existing solutions
(``solutions``), the suite report (``report``) and its self-contained HTML page (``html``).

Layout of a suite folder::

    suite.json     the manifest: tasks (name, level, problem id, run id or the error that failed it),
                   options, protocol, created; written atomically, rewritten only to add facts
    runs/<id>/     one run folder per task (see ``kernelskill.pipeline.runs``): the runs' own event logs
                   are the record; a suite keeps nothing that a run does not

This ``__init__`` imports nothing. The GPU pool lives in ``pipeline.runs.gpu_pool``, below this package, because
the GPU side of a split run uses it on a bare box (standard library + the harness).
"""
