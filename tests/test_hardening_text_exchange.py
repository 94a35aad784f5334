"""An answer file that is not a valid answer for its step never wedges a run (issue 27, failure 7).

Placed by hand at ``exchange/<step>.answer.json``: an ``id`` but no text, text null, text of another type, a
JSON list, an ``id`` naming another step, a folder, a symbolic link to /dev/zero, a FIFO, a 3 GB file. Each is
set aside (``<name>.rejected-<n>``, one line in ``exchange/rejected.log`` saying why) and the step waits again:
``runs resume`` pauses on it (every time, no loop), ``runs pending`` shows it waiting, ``runs answer`` stores
a good answer, and the run goes on. Nothing is read before its size is known (the 3 GB file is never read).
The real CLI on a real run paused at its first LLM step; the only double is the GPU boundary."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.test_loop_helpers import TASK, fenced, kernel
from tests.test_split import PLUGINS, ks

STEP = "r00.generate.1"
GOOD = fenced(kernel("speedup=1.20", "seed"))


def _json(value: object) -> Callable[[Path], None]:
    return lambda path: path.write_text(json.dumps(value))


def _huge(path: Path) -> None:
    with path.open("wb") as fh:
        fh.truncate(3 * 2**30)  # sparse: 3 GB long, nothing on disk


BAD: dict[str, tuple[Callable[[Path], None], str]] = {
    "id_without_text": (_json({"id": STEP}), "needs a non-empty text"),
    "text_null": (_json({"id": STEP, "text": None, "answered_by": "hand"}), "needs a non-empty text"),
    "text_a_number": (_json({"id": STEP, "text": 42}), "text is a int, not a str"),
    "empty_text": (_json({"id": STEP, "text": "  "}), "needs a non-empty text"),
    "a_list": (_json([STEP, GOOD]), "not an answer record"),
    "unknown_fields": (_json({"id": STEP, "text": GOOD, "run": "x"}), "unknown fields run"),
    "another_steps_id": (_json({"id": "r01.optimize.1", "text": GOOD}), "is not this step's"),
    "not_json": (lambda p: p.write_text("{id: " + STEP), "not JSON"),
    "a_folder": (lambda p: p.mkdir(), "a folder, not a file"),
    "link_to_dev_zero": (lambda p: p.symlink_to("/dev/zero"), "a symbolic link"),
    "a_fifo": (lambda p: os.mkfifo(p), "not a regular file"),
    "three_gigabytes": (_huge, "3,221,225,472 bytes (at most"),
}


@pytest.fixture
def paused(tmp_path: Path) -> tuple[str, Path]:
    """A real run paused at its first LLM step (the exchange provider), and its home."""
    task = tmp_path / "relu2.py"
    task.write_text(TASK)
    home = tmp_path / "home"
    out = ks("optimize", str(task), "--rounds", "1", "--llm", "exchange", "--home", str(home), *PLUGINS,
             env={"OPENAI_API_KEY": "", "KERNELSKILL_LLM_API_KEY": ""})
    assert out.exit_code == 3, out.output
    return str(home), next((home / "runs").iterdir())


def _set_aside(run_dir: Path) -> list[str]:
    return sorted(p.name for p in (run_dir / "exchange").iterdir() if ".rejected-" in p.name)


@pytest.mark.parametrize("variant", sorted(BAD))
def test_an_invalid_answer_file_is_set_aside_and_the_step_waits_again(paused, tmp_path: Path, variant: str) -> None:
    home, run_dir = paused
    run_id = run_dir.name
    place, reason = BAD[variant]
    answer_path = run_dir / "exchange" / f"{STEP}.answer.json"

    for attempt in (1, 2):  # resume pauses on the step every time: it neither loops nor takes the file
        place(answer_path)
        out = ks("runs", "resume", run_id, "--home", home, *PLUGINS)
        assert out.exit_code == 3 and STEP in out.output and "Traceback" not in out.output, out.output
        assert not os.path.lexists(answer_path)
        assert _set_aside(run_dir) == [f"{STEP}.answer.json.rejected-{n}" for n in range(1, attempt + 1)]

    place(answer_path)  # `runs pending` shows the step waiting (and sets the file aside)
    out = ks("runs", "pending", run_id, "--home", home, "--json")
    assert out.exit_code == 0, out.output
    assert [p["id"] for p in json.loads(out.output)] == [STEP]
    log_lines = (run_dir / "exchange" / "rejected.log").read_text().splitlines()
    assert len(log_lines) == 3 and all(reason in line for line in log_lines), log_lines

    place(answer_path)  # `runs answer` is not told "already answered"
    good = tmp_path / "good.txt"
    good.write_text(GOOD)
    out = ks("runs", "answer", run_id, STEP, str(good), "--home", home)
    assert out.exit_code == 0, out.output
    assert len(_set_aside(run_dir)) == 4
    out = ks("runs", "resume", run_id, "--home", home, *PLUGINS)
    assert out.exit_code == 3 and "r01.plan.1" in out.output, out.output  # the run went on


def test_a_request_file_replaced_by_hand_is_never_read_whole(paused) -> None:
    """A request file turned into a link to /dev/zero or a 3 GB file: `runs pending` skips it with a warning,
    `runs answer` refuses in one line; neither reads it."""
    home, run_dir = paused
    request = run_dir / "exchange" / f"{STEP}.request.json"
    for replace in (lambda p: p.symlink_to("/dev/zero"), _huge):
        request.unlink()
        replace(request)
        out = ks("runs", "pending", run_dir.name, "--home", home, "--json")
        assert out.exit_code == 0 and "Traceback" not in out.output, out.output
        answer = run_dir.parent.parent / "a.txt"
        answer.write_text(GOOD)
        out = ks("runs", "answer", run_dir.name, STEP, str(answer), "--home", home)
        assert out.exit_code == 2, out.output
        lines = out.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and f"{STEP}.request.json" in lines[0], lines
