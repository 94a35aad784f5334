"""Edits of a skills file's text and of a loaded :class:`SkillSet` that ``kb remove`` makes: the items of
some ids cut out of the YAML text with the rest of the text (comments, layout) left as it was."""

from __future__ import annotations

import yaml

from kernelskill.kb.loader import SkillSet
from kernelskill.yaml_load import SAFE_LOADER


def item_lines(text: str, ids: set[str]) -> tuple[list[tuple[int, int]], bool, int]:
    """``(line ranges [start, end) of the items with these ids, block layout?, items left)`` of a skills
    file's text. Ranges cover an item from its ``-`` line to the line before the next item."""
    loader = SAFE_LOADER(text)
    try:
        root = loader.get_single_node()
    finally:
        loader.dispose()
    lines = text.splitlines(keepends=True)
    ranges: list[tuple[int, int]] = []
    block = True
    left = 0
    if not isinstance(root, yaml.MappingNode):
        return ranges, block, left
    for _key, seq in root.value:
        if not isinstance(seq, yaml.SequenceNode):
            continue
        block = block and not seq.flow_style
        for item in seq.value:
            item_id = next((v.value for k, v in item.value if isinstance(k, yaml.ScalarNode) and k.value == "id"
                            and isinstance(v, yaml.ScalarNode)), None) if isinstance(item, yaml.MappingNode) else None
            if item_id not in ids:
                left += 1
                continue
            block = block and not item.flow_style
            start = item.start_mark.line
            while start > 0 and not lines[start].lstrip().startswith("-"):
                start -= 1  # "-" alone on the line above the item's first key
            end = item.end_mark.line
            if end < len(lines) and lines[end][:item.end_mark.column].strip():
                end += 1  # the item ends inside its last line (no newline at the end of the file)
            ranges.append((start, end))
    return ranges, block, left


def text_without(text: str, ids: set[str]) -> str | None:
    """The skills file's text without the items of ``ids`` (the rest of the text as it was, comments
    included), or ``None`` when no object is left in it (the file goes)."""
    ranges, block, left = item_lines(text, ids)
    if left == 0:
        return None
    if not block:  # a flow-style list: written again from its data (its comments are lost)
        data = yaml.load(text, Loader=SAFE_LOADER)  # noqa: S506 - a safe loader
        for section, items in list(data.items()):
            if isinstance(items, list):
                data[section] = [i for i in items if not (isinstance(i, dict) and i.get("id") in ids)]
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=110)
    lines = text.splitlines(keepends=True)
    drop = {n for start, end in ranges for n in range(start, end)}
    return "".join(line for n, line in enumerate(lines) if n not in drop)


def without(skills: SkillSet, ids: set[str]) -> SkillSet:
    """``skills`` less ``ids`` and the docs generated from them."""
    out = SkillSet(files=list(skills.files), generated=set(skills.generated),
                   example_roots=dict(skills.example_roots))
    gone = ids | {f"doc.{i}" for i in ids if f"doc.{i}" in skills.generated}
    for section, obj in skills.objects():
        if obj.id not in gone:
            out.add(section, obj, skills.locations[obj.id])
    out.generated -= gone
    return out


__all__ = ["item_lines", "text_without", "without"]
