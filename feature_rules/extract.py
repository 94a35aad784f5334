"""``extract``: rules first, then (optionally) the LLM for what they leave undecided."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from kernelskill.errors import KernelskillError

from .engine import apply_rules, default_rules
from .fallback import FeatureCache, ask, model_name, render_prompt
from .models import EvidenceLine, FeatureSet

log = logging.getLogger(__name__)


def extract(source: str, *, path: str | None = None, llm: Any = None,
            cache: FeatureCache | str | Path | None = None) -> FeatureSet:
    """The 18 features of ``source`` (a Python file with load_inline/Triton kernels, or CUDA C++).

    With ``llm`` (any object with ``complete_json(role, prompt, schema)``) the undecided features
    are asked once and the answer cached in ``cache`` (a :class:`FeatureCache` or a DuckDB path);
    decided features are never changed by the LLM.
    """
    if not isinstance(source, str):
        raise KernelskillError(f"{path or '<source>'}: expected source text, got {type(source).__name__}")
    rules = default_rules()
    fs = apply_rules(source, path, rules)
    undecided = fs.undecided()
    if llm is None or not undecided:
        return fs
    store = FeatureCache(cache) if isinstance(cache, (str, Path)) else cache
    model = model_name(llm)
    answers = store.get(fs.source_hash, fs.ruleset_version, model) if store else None
    if answers is None:
        by_name = {r.name: r for r in rules.features}
        prompt = render_prompt(
            source, path,
            undecided=[{"name": n, "description": by_name[n].description, "rule_value": fs.values[n],
                        "type": "integer 0-4" if n == "kernel_structure_id" else "boolean"} for n in undecided],
            decided={n: v for n, v in fs.values.items() if fs.decided[n]},
            kernels=fs.kernels)
        answers = ask(llm, prompt, undecided)
        if answers is None:
            log.warning("%s: feature fallback gave no valid answer; keeping rule defaults", path or "<source>")
            return fs
        if store:
            store.put(fs.source_hash, fs.ruleset_version, model, answers)
    reasons = answers.get("reasons") or {}
    for name in undecided:  # only undecided features: a decided rule is never overruled
        if name in answers:
            fs.values[name] = answers[name]
            fs.evidence[name] = [EvidenceLine(line=0, text=str(reasons.get(name, ""))[:160], rule="llm")]
    fs.llm_model = model
    return fs


def kernel_features(source: str, *, path: str | None = None) -> dict[str, dict[str, bool | int]]:
    """Per kernel of ``source``, its 18 features as if the forward launched that kernel alone (rules
    only, no LLM): what each kernel computes on its own, where ``extract`` gives the union."""
    rules = default_rules()
    names = apply_rules(source, path, rules).kernels
    return {name: dict(apply_rules(source, path, rules, as_kernel=name).values) for name in names}


def extract_file(path: str | Path, **kwargs: Any) -> FeatureSet:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise KernelskillError(f"{p}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise KernelskillError(f"{p}: not UTF-8 text (byte {exc.start})") from exc
    return extract(text, path=str(p), **kwargs)
