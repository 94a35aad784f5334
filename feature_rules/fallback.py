"""LLM fallback for the features the rules leave undecided, and its DuckDB cache.

One structured call per source (template ``prompts/feature_fallback.j2``), answers validated with a
pydantic model built for exactly the undecided features, one retry on invalid output. A decided rule
is never overruled. Answers are cached by (source hash, rule-set version, model), so a kernel gets
the same features in every round.
"""

from __future__ import annotations

import json
import logging
import threading
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from kernelskill.errors import KernelskillError

log = logging.getLogger(__name__)
MAX_SOURCE_CHARS = 24_000
_LOCK = threading.Lock()


class FeatureCache:
    """A DuckDB file holding fallback answers: key (source_hash, ruleset_version, model)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def _connect(self):
        import duckdb

        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            con = duckdb.connect(str(self.path))
        except duckdb.Error as exc:
            raise KernelskillError(f"{self.path}: cannot open the feature cache: {exc}") from exc
        con.execute(
            "CREATE TABLE IF NOT EXISTS feature_fallback (source_hash VARCHAR, ruleset_version VARCHAR, "
            "model VARCHAR, answers VARCHAR, created TIMESTAMP DEFAULT current_timestamp, "
            "PRIMARY KEY (source_hash, ruleset_version, model))")
        return con

    def get(self, source_hash: str, ruleset_version: str, model: str) -> dict[str, Any] | None:
        with _LOCK:
            con = self._connect()
            try:
                row = con.execute(
                    "SELECT answers FROM feature_fallback WHERE source_hash = ? AND ruleset_version = ? AND model = ?",
                    [source_hash, ruleset_version, model]).fetchone()
            finally:
                con.close()
        return json.loads(row[0]) if row else None

    def put(self, source_hash: str, ruleset_version: str, model: str, answers: dict[str, Any]) -> None:
        with _LOCK:
            con = self._connect()
            try:
                con.execute("INSERT OR REPLACE INTO feature_fallback (source_hash, ruleset_version, model, answers) "
                            "VALUES (?, ?, ?, ?)", [source_hash, ruleset_version, model, json.dumps(answers)])
            finally:
                con.close()

    def count(self) -> int:
        with _LOCK:
            con = self._connect()
            try:
                return int(con.execute("SELECT count(*) FROM feature_fallback").fetchone()[0])
            finally:
                con.close()


def answer_model(names: list[str]) -> type[BaseModel]:
    """A pydantic model with one field per undecided feature (+ a short reason each)."""
    fields: dict[str, Any] = {}
    for name in names:
        kind: Any = Literal[0, 1, 2, 3, 4] if name == "kernel_structure_id" else bool
        fields[name] = (kind, ...)
    fields["reasons"] = (dict[str, str], {})
    return create_model("FeatureFallbackAnswer", __config__=ConfigDict(extra="ignore"), **fields)


def _template() -> Any:  # a jinja2.Template
    import jinja2  # lazily: only an LLM fallback renders this prompt (a cold `kernelskill query` never does)

    root = Path(str(resources.files("kernelskill").joinpath("prompts")))
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(root)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, autoescape=False)
    return env.get_template("feature_fallback.j2")


def render_prompt(source: str, path: str | None, undecided: list[dict[str, Any]], decided: dict[str, Any],
                  kernels: list[str]) -> str:
    text = source if len(source) <= MAX_SOURCE_CHARS else source[:MAX_SOURCE_CHARS] + "\n... (truncated)\n"
    return _template().render(source=text, path=path or "<source>", undecided=undecided, decided=decided,
                              kernels=kernels)


def model_name(llm: Any) -> str:
    for attr in ("model",):
        value = getattr(llm, attr, None)
        if isinstance(value, str) and value:
            return value
    settings = getattr(llm, "settings", None)
    value = getattr(settings, "model", None)
    return value if isinstance(value, str) and value else type(llm).__name__


def ask(llm: Any, prompt: str, names: list[str]) -> dict[str, Any] | None:
    """One structured call, one retry on invalid output; None when both answers are invalid."""
    model = answer_model(names)
    schema = model.model_json_schema()
    message = prompt
    for attempt in (1, 2):
        try:
            raw = llm.complete_json("feature_fallback", message, schema)
            return model.model_validate(raw).model_dump()
        except KernelskillError as exc:  # the endpoint failed: keep the rule defaults
            log.warning("feature fallback call failed: %s", exc)
            return None
        except (ValidationError, ValueError, TypeError) as exc:
            log.warning("feature fallback answer %d invalid: %s", attempt, str(exc).splitlines()[0])
            message = (prompt + "\n\nYour previous answer was invalid (" + str(exc).splitlines()[0][:300]
                       + "). Answer again with JSON that matches the schema exactly.")
    return None
