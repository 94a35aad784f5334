import json
import tarfile
from pathlib import Path

import pytest

from kernelskill.pipeline.runs.exchange import Answer, Exchange, ExchangeError, Request
from kernelskill.pipeline.runs.portable import PortabilityError, check_portable, export_run, import_run


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "runs" / "run-1"
    (run / "candidates").mkdir(parents=True)
    (run / "candidates" / "seed.py").write_text("class ModelNew: pass\n")
    (run / "log.jsonl").write_text(json.dumps({"step": 1, "path": "candidates/seed.py"}) + "\n")
    return run


def test_post_pending_answer_roundtrip(tmp_path: Path) -> None:
    ex = Exchange(_run(tmp_path))
    ex.post(Request(id="r1.plan", kind="llm", role="planner", expects={"schema": {}}), prompt="pick one")
    ex.post(Request(id="r1.eval", kind="gpu", role="evaluate", payload={"candidate": "candidates/seed.py"}))
    assert [r.id for r in ex.pending()] == ["r1.eval", "r1.plan"]
    assert [r.id for r in ex.pending("llm")] == ["r1.plan"]
    assert ex.prompt("r1.plan") == "pick one"
    # re-posting keeps the first request
    ex.post(Request(id="r1.plan", kind="llm", role="other"))
    assert ex.request("r1.plan").role == "planner"
    with pytest.raises(ExchangeError, match="needs text"):
        ex.put_answer(Answer(id="r1.plan", result={}))
    ex.put_answer(Answer(id="r1.plan", text="method: x", answered_by="test"))
    assert ex.answer_for("r1.plan").text == "method: x"
    with pytest.raises(ExchangeError, match="already answered"):
        ex.put_answer(Answer(id="r1.plan", text="again"))
    assert [r.id for r in ex.pending()] == ["r1.eval"]
    with pytest.raises(ExchangeError, match="no request"):
        ex.request("nope")
    with pytest.raises(ExchangeError, match="must be letters"):
        ex.request("../etc")


def test_export_import_roundtrip(tmp_path: Path) -> None:
    run = _run(tmp_path)
    archive = export_run(run, tmp_path / "r.tgz")
    dest = import_run(archive, tmp_path / "elsewhere")
    assert (dest / "candidates" / "seed.py").read_text() == "class ModelNew: pass\n"
    with pytest.raises(PortabilityError, match="exists already"):
        import_run(archive, tmp_path / "elsewhere")


def test_not_portable_is_refused(tmp_path: Path) -> None:
    run = _run(tmp_path)
    (run / "state.json").write_text(json.dumps({"task": str(run.resolve() / "task.py")}))
    (run / "notes.md").write_text('api_key = "abcdefghijklmnopqrstuvwxyz"\n')
    problems = {(f.path, f.problem.split(" ")[0]) for f in check_portable(run)}
    assert ("state.json", "names") in problems and ("notes.md", "looks") in problems
    with pytest.raises(PortabilityError, match="not portable"):
        export_run(run, tmp_path / "r.tgz")
    assert not (tmp_path / "r.tgz").exists()


def test_import_rejects_unsafe_archive(tmp_path: Path) -> None:
    evil = tmp_path / "evil.tgz"
    payload = tmp_path / "x.txt"
    payload.write_text("x")
    with tarfile.open(evil, "w:gz") as tar:
        tar.add(payload, arcname="../escape.txt")
    with pytest.raises(PortabilityError, match="unsafe member"):
        import_run(evil, tmp_path / "runs")
    assert not (tmp_path / "escape.txt").exists()
