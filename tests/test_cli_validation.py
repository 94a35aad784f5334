"""Bad input to the CLI is refused with one line on stderr (``error: ...``) and exit code 2, never click's
usage text or made-up output: non-kernel files to ``features``, a non-task ``--task``, swapped ``eval``
arguments, unknown ``--context`` keys and filter values, an empty search, a directory for a file."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelskill.cli import main

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"
SMALL = Path(__file__).parent / "data" / "skills_small"
KERNEL = EX / "kernels" / "naive_gemm.py"
TASK = EX / "tasks" / "naive_gemm_task.py"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def refused(*args: str) -> str:
    """The one-line error of a refused command."""
    code, out, err = run(*args)
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Usage:" not in err and "Traceback" not in out + err
    return lines[0]


@pytest.fixture(scope="module")
def small_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("small_home")
    code, out, err = run("kb", "init", "--home", str(home), "--skills", str(SMALL))
    assert code == 0, err
    return home


@pytest.mark.parametrize("name,content,says", [
    ("plain.py", "import torch\n\n\ndef f(x):\n    return torch.relu(x)\n", "no kernel found"),
    ("empty.py", "", "no kernel found"),
    ("table.csv", "kernel,time\nk,1.0\n", "not a kernel source"),
])
def test_features_refuses_what_is_not_a_kernel(tmp_path: Path, name: str, content: str, says: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    line = refused("features", str(path), "--no-llm", "--home", str(tmp_path / "h"))
    assert f"{path}: {says}" in line
    code, out, _ = run("features", str(KERNEL), "--no-llm", "--json", "--home", str(tmp_path / "h"))
    assert code == 0 and '"is_naive_gemm": true' in out  # a kernel file is still fine


def test_a_directory_where_a_file_belongs_is_one_line(tmp_path: Path) -> None:
    assert refused("features", str(tmp_path)) == f"error: {tmp_path}: is a directory, expected a file"
    assert refused("query", str(tmp_path)) == f"error: {tmp_path}: is a directory, expected a file"
    assert refused("query", str(KERNEL), "--profile", str(tmp_path)).startswith(f"error: --profile {tmp_path}: is")
    assert refused("eval", str(tmp_path), str(KERNEL)) == f"error: {tmp_path}: is a directory, expected a file"
    assert "no such kernel file" in refused("query", str(tmp_path / "missing.py"))


def test_task_option_must_be_a_task(tmp_path: Path) -> None:
    line = refused("query", str(KERNEL), "--task", str(KERNEL), "--home", str(tmp_path / "h"))
    assert "--task" in line and "not a KernelBench task" in line and "ModelNew" in line
    csv = tmp_path / "t.csv"
    csv.write_text("a,b\n")
    assert "not a KernelBench task" in refused("query", str(KERNEL), "--task", str(csv), "--home", str(tmp_path))
    assert not (tmp_path / "h").exists()  # refused before the KB is built


def test_eval_with_swapped_arguments_says_so(tmp_path: Path) -> None:
    line = refused("eval", str(KERNEL), str(TASK), "--home", str(tmp_path / "h"))
    assert "did you swap TASK and KERNEL?" in line and str(KERNEL) in line
    plain = tmp_path / "plain.py"
    plain.write_text("x = 1\n")
    line = refused("eval", str(plain), str(KERNEL), "--home", str(tmp_path / "h"))
    assert "not a KernelBench task (no class Model and no get_inputs)" in line and "did you swap" not in line


def test_context_keys_and_values_are_checked(small_home: Path) -> None:
    line = refused("query", str(KERNEL), "--context", "nosuchfield=3", "--home", str(small_home))
    assert line.startswith("error: --context nosuchfield: unknown context field (valid: ") and "task_dtype" in line
    line = refused("query", str(KERNEL), "--context", "task_dtype=fp64", "--home", str(small_home))
    assert "task_dtype=fp64" in line and "fp32" in line


def test_kb_filters_and_search_text_are_checked(small_home: Path) -> None:
    line = refused("kb", "list", "--bottleneck", "nope", "--home", str(small_home))
    assert line.startswith("error: --bottleneck nope: unknown (valid: ") and "memory_bandwidth" in line
    assert "search text is empty" in refused("kb", "search", "", "--home", str(small_home))
    assert "search text is empty" in refused("kb", "search", "   ", "--home", str(small_home))
    assert "--method nope: unknown" in refused("kb", "search", "tiles", "--method", "nope", "--home", str(small_home))
    assert "--bottleneck nope" in refused("kb", "search", "tiles", "--bottleneck", "nope", "--home", str(small_home))
    code, out, _ = run("kb", "list", "--bottleneck", "memory_bandwidth", "--type", "case", "--home", str(small_home))
    assert code == 0 and "case.mem_any" in out
