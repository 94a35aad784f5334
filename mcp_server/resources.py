"""The MCP resources: one markdown document per KB method, ``kernelskill://methods/<id>``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernelskill.errors import KernelskillError

SCHEME = "kernelskill://methods/"


@dataclass(frozen=True)
class MethodResource:
    uri: str
    name: str
    title: str
    description: str


def method_uri(method_id: str) -> str:
    return SCHEME + method_id


def list_methods(store: Any) -> list[MethodResource]:
    return [MethodResource(uri=method_uri(m.id), name=m.id, title=m.name, description=" ".join(m.intent.split()))
            for m in store.methods()]


def _section(title: str, body: str | list[str]) -> list[str]:
    if not body:
        return []
    if isinstance(body, list):
        return [f"## {title}", "", *[f"- {item}" for item in body], ""]
    return [f"## {title}", "", " ".join(body.split()), ""]


def method_markdown(store: Any, uri: str) -> str:
    """The method ``uri`` names as markdown: what it does, when it applies, how, what to avoid, its docs."""
    if not uri.startswith(SCHEME):
        raise KernelskillError(f"{uri}: not a kernelskill method resource (expected {SCHEME}<method id>)")
    method_id = uri[len(SCHEME):]
    found = store.methods([method_id])
    if not found:
        raise KernelskillError(f"{uri}: no method {method_id!r} in the knowledge base")
    m = found[0]
    lines = [f"# {m.name} (`{m.id}`)", "", f"category: {m.category}; bottlenecks: {', '.join(m.bottlenecks) or '-'}; "
             f"source: {store.location(m.id)}", ""]
    lines += _section("Intent", m.intent) + _section("Mechanism", m.mechanism)
    lines += _section("Preconditions", m.preconditions) + _section("Guidance", m.guidance)
    lines += _section("Pitfalls", m.pitfalls) + _section("Risks", m.risks)
    lines += _section("Forbidden patterns", m.forbidden_patterns)
    measured = m.latest_measurement()
    if measured is not None:
        lines += _section("Latest measurement", [str(measured.model_dump(exclude_none=True))])
    docs = [d for d in store.docs() if d.method == m.id]
    for doc in docs:
        lines += [f"## Doc: {doc.title} ({doc.kind})", "", doc.text.strip(), ""]
    return "\n".join(lines)
