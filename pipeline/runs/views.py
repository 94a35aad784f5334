"""Analysis of a run's event log with DuckDB: the ``events`` table and its convenience views."""

from __future__ import annotations

import logging
from typing import Any

from kernelskill.errors import KernelskillError
from kernelskill.pipeline.runs.events import EVENTS
from kernelskill.pipeline.runs.store import Run

log = logging.getLogger(__name__)


# Analysis with DuckDB -------------------------------------------------------------------------
EVENT_COLUMNS = {"seq": "BIGINT", "ts": "VARCHAR", "kind": "VARCHAR", "type": "VARCHAR",
                 "step": "VARCHAR", "round": "INTEGER", "data": "JSON"}

VIEWS = {
    "llm_calls": """select seq, ts, step, round, data->>'$.role' as role, data->>'$.model' as model,
        cast(data->>'$.usage.prompt_tokens' as bigint) as prompt_tokens,
        cast(data->>'$.usage.completion_tokens' as bigint) as completion_tokens,
        cast(data->>'$.cost_usd' as double) as cost_usd, cast(data->>'$.latency_s' as double) as latency_s,
        cast(data->>'$.attempts' as integer) as attempts, data->>'$.provider' as provider
        from events where kind = 'llm' and type = 'llm_call'""",
    "evals": """select seq, ts, step, round, data->>'$.candidate' as candidate,
        data->>'$.result.status' as status, cast(data->>'$.result.correct' as boolean) as correct,
        cast(data->>'$.result.speedup' as double) as speedup,
        cast(data->>'$.result.candidate_ms' as double) as candidate_ms,
        cast(data->>'$.result.baseline_ms' as double) as baseline_ms
        from events where kind = 'gpu' and type = 'eval'""",
    "attempts": """select seq, round, step, data->>'$.candidate' as candidate, data->>'$.parent' as parent,
        data->>'$.branch' as branch, data->>'$.method' as method, data->>'$.result_class' as result_class,
        cast(data->>'$.speedup' as double) as speedup, cast(data->>'$.accepted' as boolean) as accepted
        from events where type = 'attempt'""",
}


def connect(run: Run):
    """An in-memory DuckDB connection with ``events`` and the convenience views over a run's log."""
    import duckdb

    con = duckdb.connect(":memory:")
    path = str(run.path / EVENTS).replace("'", "''")
    cols = ", ".join(f"'{k}': '{v}'" for k, v in EVENT_COLUMNS.items())
    if (run.path / EVENTS).exists() and (run.path / EVENTS).stat().st_size:
        con.execute(f"create view events as select * from read_json('{path}', format='newline_delimited', "
                    f"columns={{{cols}}}, ignore_errors=true)")
    else:
        con.execute("create table events (" + ", ".join(f"{k} {v}" for k, v in EVENT_COLUMNS.items()) + ")")
    for name, sql in VIEWS.items():
        con.execute(f"create view {name} as {sql}")
    return con


def sql(run: Run, query: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    import duckdb

    con = connect(run)
    try:
        cur = con.execute(query)
    except duckdb.Error as exc:
        raise KernelskillError(f"sql: {str(exc).splitlines()[0]}") from exc
    names = [d[0] for d in cur.description or []]
    return names, cur.fetchall()


