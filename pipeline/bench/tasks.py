"""The tasks of a suite: files named on the command line, or KernelBench's own folder layout as it is.

KernelBench keeps its problems in ``<checkout>/KernelBench/level<N>/<id>_<Name>.py`` (``<id>`` is the
problem id, 1-based); generated solutions of its ``eval_from_generations`` job sit in one folder as
``level_<N>_problem_<id>_sample_<s>_kernel.py``. A task that cannot be used (a missing level, a
problem id with no file, a file that is not a KernelBench task) becomes a :class:`TaskRef` with an
``error``: the suite reports it as one failed line and goes on with the others.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kernelskill.errors import KernelskillError
from kernelskill.pipeline.loop import validate_task

_PROBLEM = re.compile(r"^(\d+)_(.+)\.py$")
_SOLUTION = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")


@dataclass
class TaskRef:
    name: str  # unique in the suite: "L1/19_ReLU", or the file stem for a loose file
    path: str  # absolute path of the task file on this machine ("" when there is none)
    level: int | None = None
    problem_id: int | None = None
    error: str | None = None  # why this task cannot run (a failed line in the report)
    solution: str | None = None  # bench eval: the solution file
    sample: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Selection(list):
    """Problem ids chosen with ``--tasks``: a list of the ids that apply to every level, plus ids tied to one
    level (``L2/12`` or ``2/12``), so one suite can mix problems of several levels."""

    def __init__(self, plain: list[int], by_level: dict[int, list[int]] | None = None) -> None:
        super().__init__(plain)
        self.by_level = by_level or {}

    def ids(self, level: int, *, plain: bool = True) -> list[int]:
        """The problem ids chosen for ``level`` in the order given (the untied ids only when ``plain``: they
        apply to the levels named with ``--level``)."""
        base = list(self) if plain else []
        return base + [i for i in self.by_level.get(level, []) if i not in base]

    def levels(self) -> list[int]:
        return sorted(self.by_level)


def _ids(sel: Selection | list[int] | None, level: int, levels: list[int]) -> list[int] | None:
    if sel is None:
        return None
    return sel.ids(level, plain=level in levels) if isinstance(sel, Selection) else list(sel)


def _all_levels(levels: list[int], sel: Selection | list[int] | None) -> list[int]:
    return sorted(set(levels) | set(sel.levels() if isinstance(sel, Selection) else []))


def parse_selection(text: str | None) -> Selection | None:
    """``"1-20,40"`` -> [1, ..., 20, 40] for every level; ``"1,40,L2/12,L2/30"`` also picks problems 12 and 30
    of level 2 only. None selects every problem."""
    if not text:
        return None
    plain: list[int] = []
    by_level: dict[int, list[int]] = {}
    for part in text.split(","):
        part = part.strip()
        match = re.fullmatch(r"(?:[Ll]?(\d+)/)?(\d+)(?:-(\d+))?", part)
        if not match:
            raise KernelskillError(f"--tasks: {part!r} is not a problem id, a range like 1-20 or a level's "
                                   "problem like L2/12")
        lo, hi = int(match.group(2)), int(match.group(3) or match.group(2))
        if hi < lo:
            raise KernelskillError(f"--tasks: {part!r} is an empty range")
        into = plain if match.group(1) is None else by_level.setdefault(int(match.group(1)), [])
        into.extend(i for i in range(lo, hi + 1) if i not in into)
    return Selection(plain, by_level)


def level_dir(root: Path, level: int) -> Path:
    """``<root>/KernelBench/level<N>`` (``root`` is a KernelBench checkout, or its ``KernelBench`` folder)."""
    for base in (Path(root) / "KernelBench", Path(root)):
        if (base / f"level{level}").is_dir():
            return base / f"level{level}"
    return Path(root) / "KernelBench" / f"level{level}"


def problems(root: Path, level: int) -> dict[int, Path]:
    folder = level_dir(root, level)
    if not folder.is_dir():
        return {}
    out: dict[int, Path] = {}
    for path in sorted(folder.glob("*.py")):
        match = _PROBLEM.match(path.name)
        if match:
            out[int(match.group(1))] = path
    return out


def checked(ref: TaskRef) -> TaskRef:
    """``ref`` with ``error`` set when its file is not a usable KernelBench task (nothing is run)."""
    if ref.error is None:
        try:
            validate_task(Path(ref.path))
        except (KernelskillError, OSError, UnicodeDecodeError) as exc:
            ref.error = str(exc)
    return ref


def kernelbench_tasks(root: Path, levels: list[int], selection: Selection | list[int] | None = None
                      ) -> list[TaskRef]:
    root = Path(root)
    if not root.is_dir():
        raise KernelskillError(f"--kernelbench {root}: no such folder")
    out: list[TaskRef] = []
    for level in _all_levels(levels, selection):
        found = problems(root, level)
        if not found:
            out.append(TaskRef(name=f"L{level}", path="", level=level,
                               error=f"level {level}: no problems in {level_dir(root, level)}"))
            continue
        chosen = _ids(selection, level, levels)
        for pid in sorted(found) if chosen is None else chosen:
            path = found.get(pid)
            if path is None:
                out.append(TaskRef(name=f"L{level}/{pid}", path="", level=level, problem_id=pid,
                                   error=f"level {level} has no problem {pid} in {level_dir(root, level)}"))
                continue
            out.append(checked(TaskRef(name=f"L{level}/{path.stem}", path=str(path.resolve()), level=level,
                                       problem_id=pid)))
    return out


def file_tasks(paths: list[Path]) -> list[TaskRef]:
    out: list[TaskRef] = []
    seen: set[str] = set()
    for path in paths:
        name = path.stem
        while name in seen:
            name += "_"
        seen.add(name)
        match = _PROBLEM.match(path.name)
        out.append(checked(TaskRef(name=name, path=str(Path(path).resolve()),
                                   problem_id=int(match.group(1)) if match else None)))
    return out


def solution_tasks(solutions: Path, root: Path, levels: list[int],
                   selection: Selection | list[int] | None = None) -> list[TaskRef]:
    """One task per solution file of the given levels in ``solutions`` (KernelBench's layout); a
    solution of a problem that is not there, or an unreadable one, is a failed task."""
    solutions = Path(solutions)
    if not solutions.is_dir():
        raise KernelskillError(f"{solutions}: no such folder of solutions")
    out: list[TaskRef] = []
    for level in _all_levels(levels, selection):
        found = problems(root, level)
        if not found:
            out.append(TaskRef(name=f"L{level}", path="", level=level,
                               error=f"level {level}: no problems in {level_dir(root, level)}"))
            continue
        chosen = _ids(selection, level, levels)
        files = []
        for path in sorted(solutions.iterdir()):
            match = _SOLUTION.match(path.name)
            if match and int(match.group(1)) == level:
                files.append((int(match.group(2)), int(match.group(3)), path))
        if not files:
            out.append(TaskRef(name=f"L{level}", path="", level=level,
                               error=f"{solutions}: no level_{level}_problem_<id>_sample_<s>_kernel.py files"))
        for pid, sample, path in sorted(files):
            if chosen is not None and pid not in chosen:
                continue
            task = found.get(pid)
            ref = TaskRef(name=f"L{level}/{task.stem if task else pid}/s{sample}", path=str(task.resolve()) if task
                          else "", level=level, problem_id=pid, solution=str(path.resolve()), sample=sample)
            if task is None:
                ref.error = f"{path.name}: level {level} has no problem {pid}"
            else:
                checked(ref)
                if ref.error is None:
                    try:
                        path.read_text(encoding="utf-8")
                    except (OSError, UnicodeDecodeError) as exc:
                        ref.error = f"{path}: unreadable solution: {exc}"
            out.append(ref)
    return out
