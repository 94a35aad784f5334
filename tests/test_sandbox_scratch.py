"""A scratch folder among the paths the worker must read (``/tmp`` on ``sys.path``: pytest puts it there for a
checkout under ``/tmp``, whose repository root is a package) must not be bound back over the sandbox's own
empty ``/tmp``: it left ``/tmp`` read-only inside, and every worker then failed its setup (exit 125). Stop 26
saw it as a whole-suite failure of a checkout under ``/tmp`` only."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kernelskill.pipeline.harness import isolation, sandbox

PROBLEM = isolation._probe()
pytestmark = pytest.mark.skipif(PROBLEM is not None, reason=f"user namespaces are not available here: {PROBLEM}")


@pytest.mark.parametrize("kept", ["argument", "sys.path"])
def test_a_scratch_folder_to_keep_leaves_the_sandbox_its_own_writable_tmp(tmp_path, monkeypatch, kept):
    tmp = tempfile.gettempdir()
    if not tmp_path.resolve().is_relative_to(Path(tmp).resolve()) or os.path.realpath(tmp) not in \
            {os.path.realpath(p) for p in isolation.SCRATCH}:
        pytest.skip("the test needs its folder under a scratch folder of the sandbox (/tmp)")
    if kept == "sys.path":
        monkeypatch.syspath_prepend(tmp)
    work = tmp_path / "work"
    work.mkdir()
    script = tmp_path / "writes.py"
    script.write_text("import os\nopen('out.txt', 'w').write('ok')\nprint(sorted(os.listdir('/tmp')))\n")
    env = sandbox.scrub_env()
    with tempfile.NamedTemporaryFile(dir=tmp, prefix="ks-host-only-") as marker:
        cmd = isolation.wrap([sys.executable, "-I", "-S", str(script)], workdir=work, env=env,
                             read_only=[str(script), *([tmp] if kept == "argument" else [])], writable=[])
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=work, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert (work / "out.txt").read_text() == "ok"
        # the sandbox's /tmp is its own: a file of the host's /tmp outside the kept paths is not there
        assert Path(marker.name).name not in proc.stdout
