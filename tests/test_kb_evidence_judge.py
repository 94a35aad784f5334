"""``benchmarks/kb_evidence.py`` judges worked examples with the project's harness, on CPU: the harness's
CPU mode evaluates pure-PyTorch files in real isolated workers, with the same checks as candidates. A method
whose example passes gets a record with the protocol, the speedup of after over before and each variant's
speedup over eager PyTorch; one whose after file is the reference's own torch op is caught as a cheat and
gets none. ``--write-yaml`` stores the record, and the KB's schema reads it back."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kernelskill.kb.schema import Method

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "kb_evidence.py"

TASK = '''import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a + b


def get_inputs():
    return [torch.rand(64, 256), torch.rand(64, 256)]


def get_init_inputs():
    return []
'''
#: pure-PyTorch stand-ins for kernels (the harness runs them on the CPU device): other ops than the reference's
BEFORE = '''import torch


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        return torch.sub(a, torch.neg(b)).clone()
'''
AFTER = '''import torch


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        return torch.sub(a, torch.neg(b))
'''
CHEAT = '''import torch


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        return a + b
'''


def _method_yaml(mid: str) -> str:
    return (f"methods:\n  - id: {mid}\n    name: toy {mid}\n    category: memory\n    intent: one pass\n"
            f"    mechanism: fewer ops\n    preconditions: none\n    guidance: do less\n    example:\n"
            f"      task: examples/{mid}/task.py\n      before: examples/{mid}/before.py\n"
            f"      after: examples/{mid}/after.py\n")


def _module():
    spec = importlib.util.spec_from_file_location("kb_evidence_judge", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("kb_evidence_judge", module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("evidence")
    skills = root / "skills"
    for mid, after in (("toy_fewer_ops", AFTER), ("toy_torch_fallback", CHEAT)):
        folder = skills / "examples" / mid
        folder.mkdir(parents=True)
        (folder / "task.py").write_text(TASK)
        (folder / "before.py").write_text(BEFORE)
        (folder / "after.py").write_text(after)
        (skills / "methods").mkdir(exist_ok=True)
        (skills / "methods" / f"{mid}.yaml").write_text(_method_yaml(mid))
    out = root / "evidence.json"
    ev = _module()
    # In a fresh interpreter: in a long session whose checkout is under /tmp, a worker started from this
    # process after earlier tests failed to import the package (known issue, see the closing note).
    done = subprocess.run([sys.executable, str(SCRIPT), "--skills", str(skills), "--trials", "5", "--jobs", "2",
                           "--protocol", "strict", "--cache-dir", str(root / "cache"), "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return {"ev": ev, "skills": skills, "out": out, "report": json.loads(out.read_text())}


def test_the_harness_judges_both_variants_under_the_protocol(measured: dict) -> None:
    report = measured["report"]
    assert report["protocol"] == "strict" and "harness" in report["judge"] and report["hardware"] == "cpu"
    assert "partial" not in report
    rows = {r["method"]: r for r in report["results"]}
    ok = rows["toy_fewer_ops"]
    assert ok["status"] == "ok" and ok["protocol"] == "strict"
    for w in ("before", "after"):
        res = ok[f"{w}_result"]
        assert res["status"] == "ok" and res["correct"] and res["trials"] == 5
        assert ok[f"{w}_ms"] > 0 and ok[f"{w}_vs_eager"] == pytest.approx(res["eager_ms"] / res["ms"], rel=1e-3)
    assert ok["speedup"] == pytest.approx(ok["before_ms"] / ok["after_ms"], rel=1e-3)
    assert ok["eager_ms"] == pytest.approx(ok["after_result"]["eager_ms"], rel=1e-3)
    # the same anti-cheat check a candidate gets: the reference's own torch op is not a kernel
    cheat = rows["toy_torch_fallback"]
    assert cheat["status"] == "failed" and cheat["after_result"]["status"] == "cheat"
    assert cheat["after_result"]["cheat_check"] == "torch_compute" and "after: cheat" in cheat["message"]


def test_write_yaml_stores_protocol_and_speedups_against_eager(measured: dict) -> None:
    ev, skills = measured["ev"], measured["skills"]
    assert ev.main(["--write-yaml", str(measured["out"]), "--skills", str(skills)]) == 0
    row = next(r for r in measured["report"]["results"] if r["method"] == "toy_fewer_ops")
    method = Method(**yaml.safe_load((skills / "methods" / "toy_fewer_ops.yaml").read_text())["methods"][0])
    [rec] = method.evidence
    assert rec.protocol == "strict" and rec.hardware == "cpu" and rec.kind == "measured"
    assert (rec.before_ms, rec.after_ms, rec.speedup) == (row["before_ms"], row["after_ms"], row["speedup"])
    assert (rec.eager_ms, rec.before_vs_eager, rec.after_vs_eager) == (row["eager_ms"], row["before_vs_eager"],
                                                                       row["after_vs_eager"])
    assert "judged by the harness under protocol strict" in rec.notes
    assert rec.command.startswith("python benchmarks/kb_evidence.py --skills")
    cheat = yaml.safe_load((skills / "methods" / "toy_torch_fallback.yaml").read_text())["methods"][0]
    assert "evidence" not in cheat  # a variant that fails the candidate checks is no evidence
