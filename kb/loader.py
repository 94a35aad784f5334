"""Load and validate the YAML skills (the KB's source of truth) into a :class:`SkillSet`.

Every problem is reported as ONE line ``file:line: message``: YAML syntax errors take the line from the
parser's mark, schema violations the line of the offending item or field (the YAML node tree is composed
so that a pydantic error location maps back to a node), duplicate ids name both places.

A skills file is untrusted input, so it is bounded before anything is built from it: at most
:data:`MAX_FILE_BYTES` bytes, at most :data:`MAX_ALIASES` alias uses, the node tree with every alias
expanded at most :data:`MAX_EXPANDED_NODES` nodes (a few hundred bytes of nested aliases otherwise expand
to billions of nodes) and at most :data:`MAX_EXPANDED_CHARS` characters of scalars (one large scalar
aliased into many objects would otherwise be stored, embedded and copied once per use), every scalar at
most :data:`MAX_SCALAR_CHARS` characters (a number of thousands of digits is refused before Python
converts it). Recursive aliases are refused. The checks run on the composed node graph, before
any Python object is constructed, so a bad file costs milliseconds.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from kernelskill.errors import KernelskillError, printable
from kernelskill.kb.schema import SCHEMA_VERSION, SECTIONS, KBObject, Method, SkillDoc
from kernelskill.yaml_load import SAFE_LOADER

log = logging.getLogger(__name__)

#: Section key -> the type name used by the store and the CLI (``--type``).
TYPE_OF_SECTION: dict[str, str] = {
    "fields": "field", "predicates": "predicate", "tiers": "tier", "bottlenecks": "bottleneck",
    "cases": "case", "vetoes": "veto", "methods": "method", "docs": "doc",
}
SECTION_OF_TYPE: dict[str, str] = {v: k for k, v in TYPE_OF_SECTION.items()}
EXAMPLES_DIR = "examples"

#: Limits on one skills file (the bundled files are far below them: the largest is ~20 kB).
MAX_FILE_BYTES = 2 * 1024 * 1024
MAX_ALIASES = 200
MAX_EXPANDED_NODES = 200_000
MAX_EXPANDED_CHARS = 4 * 1024 * 1024
#: the longest scalar (the longest bundled text is ~2.6k characters); numbers get far fewer digits
MAX_SCALAR_CHARS = 64 * 1024
MAX_NUMBER_CHARS = 40

_Loader: type = SAFE_LOADER  # the C loader is much faster on large files and keeps the same marks


@dataclass(frozen=True)
class Location:
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class LoadIssue:
    """A problem found while loading: always one line."""

    location: Location
    message: str
    code: str

    def __str__(self) -> str:
        return f"{self.location}: {self.message}"


@dataclass
class SkillSet:
    """All KB objects, one list per section, plus where each object came from."""

    fields: list = field(default_factory=list)
    predicates: list = field(default_factory=list)
    tiers: list = field(default_factory=list)
    bottlenecks: list = field(default_factory=list)
    cases: list = field(default_factory=list)
    vetoes: list = field(default_factory=list)
    methods: list = field(default_factory=list)
    docs: list = field(default_factory=list)
    locations: dict[str, Location] = field(default_factory=dict)
    #: method id -> folder its ``example:`` paths are relative to
    example_roots: dict[str, Path] = field(default_factory=dict)
    #: ids of the docs generated from methods (not written by hand; export leaves them out)
    generated: set[str] = field(default_factory=set)
    files: list[str] = field(default_factory=list)

    # -- access -------------------------------------------------------------------------------
    def sections(self) -> Iterator[tuple[str, list[KBObject]]]:
        for name in SECTIONS:
            yield name, getattr(self, name)

    def objects(self) -> Iterator[tuple[str, KBObject]]:
        for name, items in self.sections():
            for obj in items:
                yield name, obj

    def by_id(self, obj_id: str) -> KBObject | None:
        for _, obj in self.objects():
            if obj.id == obj_id:
                return obj
        return None

    def ids(self, section: str) -> set[str]:
        return {o.id for o in getattr(self, section)}

    def counts(self) -> dict[str, int]:
        return {name: len(items) for name, items in self.sections()}

    def __len__(self) -> int:
        return sum(self.counts().values())

    def content_hash(self) -> str:
        return content_hash(self.objects())

    def add(self, section: str, obj: KBObject, location: Location) -> None:
        getattr(self, section).append(obj)
        self.locations[obj.id] = location


def canonical_json(obj: KBObject) -> str:
    return json.dumps(obj.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def object_hash(obj: KBObject) -> str:
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()


def content_hash(objects: Iterable[tuple[str, KBObject]]) -> str:
    """sha256 over the sorted canonical JSON of every object: independent of file and list order."""
    rows = sorted(f"{section}\x1f{obj.id}\x1f{canonical_json(obj)}" for section, obj in objects)
    h = hashlib.sha256(f"schema:{SCHEMA_VERSION}\n".encode())
    for row in rows:
        h.update(row.encode())
        h.update(b"\n")
    return h.hexdigest()


# --------------------------------------------------------------------------------------------------
# files


def iter_yaml_files(paths: Iterable[Path]) -> Iterator[tuple[Path, Path]]:
    """``(file, skills root)`` for every ``*.yaml``/``*.yml`` under ``paths``, sorted, without
    ``<root>/examples/``. A file given directly is its own root's member (root = its folder)."""
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            yield path, path.parent
        elif path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
            for p in found:
                rel = p.relative_to(path)
                if rel.parts and rel.parts[0] == EXAMPLES_DIR:
                    continue
                if any(part.startswith(".") for part in rel.parts):
                    continue
                yield p, path
        else:
            raise KernelskillError(f"{path}: no such file or folder")


def _node_line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def _locate(node: yaml.Node, loc: tuple[Any, ...]) -> yaml.Node:
    """Follow a pydantic error location through the YAML node tree as far as it goes."""
    current = node
    for part in loc:
        if isinstance(current, yaml.MappingNode):
            nxt = next((v for k, v in current.value if isinstance(k, yaml.ScalarNode) and k.value == str(part)),
                       None)
            if nxt is None:
                key = next((k for k, _ in current.value if isinstance(k, yaml.ScalarNode) and k.value == str(part)),
                           None)
                return key or current
            current = nxt
        elif isinstance(current, yaml.SequenceNode) and isinstance(part, int) and part < len(current.value):
            current = current.value[part]
        else:
            break
    return current


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _scalar_problem(node: yaml.ScalarNode) -> str | None:
    value = node.value
    if len(value) > MAX_SCALAR_CHARS:
        return f"a value of {len(value):,} characters (at most {MAX_SCALAR_CHARS:,}; refused)"
    if (len(value) > MAX_NUMBER_CHARS and node.style not in ("'", "\"", "|", ">")
            and value.lstrip("+-")[:1].isdigit() and value.replace("_", "").lstrip("+-").isdigit()):
        return f"a number of {len(value):,} digits (at most {MAX_NUMBER_CHARS}; refused)"
    return None


def _check_bounds(root: yaml.Node) -> tuple[yaml.Node, str] | None:
    """``(node, problem)`` when the node graph uses too many aliases, is recursive, expands (aliases
    substituted) to more than :data:`MAX_EXPANDED_NODES` nodes or :data:`MAX_EXPANDED_CHARS` characters of
    scalars, or holds a scalar over its limit; ``None`` when it is within bounds.

    Iterative (no recursion on the depth of the document) and linear in the number of distinct nodes:
    the expanded size of each node is memoized, so shared (aliased) subtrees are counted, never walked twice.
    """
    size: dict[int, tuple[int, int]] = {}  # id -> (expanded nodes, expanded scalar characters)
    state: dict[int, int] = {}  # 1 = on the current path, 2 = done
    aliases = 0
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, leaving = stack.pop()
        key = id(node)
        if leaving:
            kids = [size[id(c)] for c in _children(node)]
            own = len(node.value) if isinstance(node, yaml.ScalarNode) else 0
            total = (1 + sum(k[0] for k in kids), own + sum(k[1] for k in kids))
            if total[0] > MAX_EXPANDED_NODES:
                return node, (f"the document expands to more than {MAX_EXPANDED_NODES:,} nodes through YAML "
                              "aliases (refused)")
            if total[1] > MAX_EXPANDED_CHARS:
                return node, (f"the document expands to more than {MAX_EXPANDED_CHARS:,} characters through "
                              "YAML aliases (refused)")
            size[key] = total
            state[key] = 2
            continue
        seen = state.get(key)
        if seen == 1:
            return node, "recursive YAML alias (refused)"
        if seen == 2:
            aliases += 1
            if aliases > MAX_ALIASES:
                return node, f"more than {MAX_ALIASES} YAML alias uses (refused)"
            continue
        if isinstance(node, yaml.ScalarNode):
            problem = _scalar_problem(node)
            if problem is not None:
                return node, problem
        state[key] = 1
        stack.append((node, True))
        for child in reversed(_children(node)):
            if state.get(id(child)) == 1:
                return child, "recursive YAML alias (refused)"
            stack.append((child, False))
    return None


def _duplicate_keys(node: yaml.Node) -> Iterator[yaml.Node]:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, yaml.MappingNode):
            seen: set[str] = set()
            for k, v in n.value:
                if isinstance(k, yaml.ScalarNode):
                    if k.value in seen:
                        yield k
                    seen.add(k.value)
                stack.append(v)
        elif isinstance(n, yaml.SequenceNode):
            stack.extend(n.value)


def _format_validation(exc: ValidationError) -> tuple[tuple[Any, ...], str]:
    err = exc.errors()[0]
    loc = tuple(err.get("loc", ()))
    where = ".".join(str(p) for p in loc)
    msg = str(err.get("msg", "invalid")).replace("Value error, ", "")
    value = err.get("input")
    if err.get("type") == "extra_forbidden":
        msg = "unknown key"
    elif err.get("type") == "missing":
        msg = "required field missing"
    elif value is not None and not isinstance(value, dict | list):
        msg = f"{msg} (got {value!r})"
    return loc, f"{where}: {msg}" if where else msg


def _parse_file(path: Path, root: Path, out: SkillSet, issues: list[LoadIssue],
                seen: dict[str, Location]) -> None:
    name = str(path)
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            issues.append(LoadIssue(Location(name, 1), f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB "
                                                       "(a skills file is a few kB)", "size"))
            return
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        issues.append(LoadIssue(Location(name, 1), f"cannot read: {' '.join(str(exc).split())}", "read"))
        return
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            bad = _check_bounds(node)
            if bad is not None:
                issues.append(LoadIssue(Location(name, _node_line(bad[0])), bad[1], "bounds"))
                return
        data = loader.construct_document(node) if node is not None else None
    except (RecursionError, MemoryError):
        issues.append(LoadIssue(Location(name, 1), "YAML nested too deeply to load (refused)", "bounds"))
        return
    except (ValueError, OverflowError) as exc:  # a value the constructor cannot build (a huge number, a bad date)
        issues.append(LoadIssue(Location(name, 1), f"invalid value: {' '.join(str(exc).split())[:200]}", "yaml"))
        return
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        problem = " ".join(str(exc.problem or exc.context or "syntax error").split())
        issues.append(LoadIssue(Location(name, line), f"YAML syntax error: {problem}", "yaml"))
        return
    except yaml.YAMLError as exc:
        issues.append(LoadIssue(Location(name, 1), f"YAML error: {' '.join(str(exc).split())}", "yaml"))
        return
    finally:
        loader.dispose()
    out.files.append(name)
    if node is None or data is None:
        return
    if not isinstance(data, dict) or not isinstance(node, yaml.MappingNode):
        issues.append(LoadIssue(Location(name, _node_line(node)),
                                f"a skills file is a mapping of {', '.join(SECTIONS)} to lists", "shape"))
        return
    for key in _duplicate_keys(node):
        issues.append(LoadIssue(Location(name, _node_line(key)), f"duplicate key {key.value!r}", "duplicate_key"))
    for key_node, value_node in node.value:
        section = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node)
        if section not in SECTIONS:
            issues.append(LoadIssue(Location(name, _node_line(key_node)),
                                    f"unknown section {section!r} (expected one of {', '.join(SECTIONS)})",
                                    "unknown_section"))
            continue
        items = data.get(section)
        if items is None:
            continue
        if not isinstance(items, list) or not isinstance(value_node, yaml.SequenceNode):
            issues.append(LoadIssue(Location(name, _node_line(value_node)),
                                    f"section {section!r} must be a list", "shape"))
            continue
        model = SECTIONS[section]
        for index, (item, item_node) in enumerate(zip(items, value_node.value, strict=True)):
            label = f"{section}[{index}]"
            if isinstance(item, dict) and isinstance(item.get("id"), str):
                label += f" ({printable(item['id'][:100])})"
            if not isinstance(item, dict):
                issues.append(LoadIssue(Location(name, _node_line(item_node)),
                                        f"{label}: each item must be a mapping", "shape"))
                continue
            try:
                obj = model.model_validate(item)
            except ValidationError as exc:
                loc, msg = _format_validation(exc)
                where = _locate(item_node, loc)
                issues.append(LoadIssue(Location(name, _node_line(where)), f"{label}: {msg}", "schema"))
                continue
            location = Location(name, _node_line(item_node))
            if obj.id in seen:
                issues.append(LoadIssue(location, f"duplicate id {obj.id!r} (also defined at {seen[obj.id]})",
                                        "duplicate_id"))
                continue
            seen[obj.id] = location
            out.add(section, obj, location)
            if isinstance(obj, Method):
                out.example_roots[obj.id] = root


def load_group(paths: Iterable[Path]) -> tuple[SkillSet, list[LoadIssue]]:
    """Parse and validate files without generating docs or checking examples (see :func:`finalize`)."""
    out = SkillSet()
    issues: list[LoadIssue] = []
    seen: dict[str, Location] = {}
    for path, root in iter_yaml_files(paths):
        _parse_file(path, root, out, issues, seen)
    return out, issues


def merge(groups: list[SkillSet]) -> tuple[SkillSet, list[LoadIssue]]:
    """Union of several source groups (bundled, user, new files).

    The same id in two groups is accepted when the objects are identical (kept once) or when the later
    group carries a higher ``version`` (it replaces the earlier one); anything else is a duplicate.
    """
    out = SkillSet()
    issues: list[LoadIssue] = []
    index: dict[str, tuple[str, int]] = {}
    for group in groups:
        out.files.extend(group.files)
        for section, obj in group.objects():
            loc = group.locations[obj.id]
            if obj.id in index:
                prev_section, pos = index[obj.id]
                prev = getattr(out, prev_section)[pos]
                if prev_section == section and canonical_json(prev) == canonical_json(obj):
                    continue
                if prev_section == section and obj.version > prev.version:
                    getattr(out, section)[pos] = obj
                    out.locations[obj.id] = loc
                    if obj.id in group.example_roots:
                        out.example_roots[obj.id] = group.example_roots[obj.id]
                    continue
                issues.append(LoadIssue(loc, f"duplicate id {obj.id!r} (also defined at {out.locations[obj.id]}; "
                                             "raise 'version' to replace it)", "duplicate_id"))
                continue
            index[obj.id] = (section, len(getattr(out, section)))
            out.add(section, obj, loc)
            if obj.id in group.example_roots:
                out.example_roots[obj.id] = group.example_roots[obj.id]
    return out, issues


def method_doc_text(method: Method) -> str:
    """The text of the guidance doc generated for a method (what vector search ranks)."""
    parts = [method.name, method.intent.strip(), method.mechanism.strip(),
             f"Preconditions: {method.preconditions.strip()}", f"Guidance: {method.guidance.strip()}"]
    if method.pitfalls:
        parts.append("Pitfalls: " + " ".join(f"- {p.strip()}" for p in method.pitfalls))
    return "\n".join(p for p in parts if p)


def finalize(skills: SkillSet) -> list[LoadIssue]:
    """Check worked-example files and add one generated guidance doc per method (``doc.<method>``)."""
    issues: list[LoadIssue] = []
    for method in skills.methods:
        if method.example is None:
            continue
        roots = [skills.example_roots.get(method.id)]
        loc = skills.locations[method.id]
        roots.append(Path(loc.file).parent)
        for attr in ("task", "before", "after"):
            rel = getattr(method.example, attr)
            if Path(rel).is_absolute() or ".." in Path(rel).parts:
                issues.append(LoadIssue(loc, f"methods ({method.id}): example.{attr}: path must be relative "
                                             f"to the skills folder (got {rel!r})", "example"))
                continue
            found = next((r for r in roots if r is not None and (r / rel).is_file()), None)
            if found is None:
                issues.append(LoadIssue(loc, f"methods ({method.id}): example.{attr}: file not found: {rel} "
                                             f"(relative to {roots[0]})", "example"))
            elif attr == "task":
                skills.example_roots[method.id] = found
    existing = skills.ids("docs")
    taken = {o.id for _, o in skills.objects()}
    for method in skills.methods:
        doc_id = f"doc.{method.id}"
        if doc_id in existing:
            continue
        if doc_id in taken:
            issues.append(LoadIssue(skills.locations[method.id],
                                    f"generated doc id {doc_id!r} is taken by another object", "duplicate_id"))
            continue
        try:
            doc = SkillDoc(id=doc_id, method=method.id, title=method.name, text=method_doc_text(method),
                           kind="guidance", bottlenecks=list(method.bottlenecks),
                           structures=list(method.structures), version=method.version,
                           provenance=method.provenance.model_copy())
        except ValidationError as exc:
            issues.append(LoadIssue(skills.locations[method.id], f"generated doc: {_format_validation(exc)[1]}",
                                    "schema"))
            continue
        skills.add("docs", doc, skills.locations[method.id])
        skills.generated.add(doc_id)
    return issues


def raise_first(issues: list[LoadIssue]) -> None:
    if issues:
        more = f" (and {len(issues) - 1} more)" if len(issues) > 1 else ""
        raise KernelskillError(f"{issues[0]}{more}")


def load_report(groups: list[list[Path]]) -> tuple[SkillSet, list[LoadIssue]]:
    """Load several groups of paths, merge them and finalize; return every issue instead of raising."""
    loaded: list[SkillSet] = []
    issues: list[LoadIssue] = []
    for paths in groups:
        group, group_issues = load_group(paths)
        loaded.append(group)
        issues.extend(group_issues)
    merged, merge_issues = merge(loaded)
    issues.extend(merge_issues)
    issues.extend(finalize(merged))
    return merged, issues


def load_skills(paths: list[Path]) -> SkillSet:
    """Validate every YAML under ``paths`` (one group); raise a one-line ``file:line`` error on the first
    problem (the message says how many more there are)."""
    skills, issues = load_report([list(paths)])
    raise_first(issues)
    log.debug("loaded %d objects from %d files", len(skills), len(skills.files))
    return skills
