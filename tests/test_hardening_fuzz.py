"""Property-based fuzzing (hypothesis) of the four doors untrusted input comes through: ``kb add``, profile
CSVs, ``runs answer`` and run archives. Whatever comes in: no traceback, either accepted or refused with
one ``error:`` line, and a refusal writes nothing (KB content hash and skills folder, exchange folder and
event log, runs folder all unchanged). Bounded (few examples, no deadline) so the suite stays fast."""

from __future__ import annotations

import io
import json
import math
import shutil
import tarfile
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernelskill.cli import main
from kernelskill.errors import KernelskillError
from kernelskill.pipeline.runs.portable import PortabilityError, import_run
from kernelskill.retrieval.profile import PCT_TOLERANCE, load_field_map, parse_csv_text
from tests.test_loop_helpers import TASK, fenced, kernel
from tests.test_split import PLUGINS, ks

SMALL = Path(__file__).parent / "data" / "skills_small"
FUZZ = settings(max_examples=12, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _refused_in_one_line(result) -> bool:
    """Exit 2 with exactly one ``error:`` line, or exit 0; never a traceback."""
    assert result.exit_code in (0, 2), (result.exit_code, result.output)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    if result.exit_code == 2:
        errors = [ln for ln in result.output.splitlines() if ln.startswith("error: ")]
        assert len(errors) == 1, result.output
        return True
    return False


# kb add --------------------------------------------------------------------------------------------
SECTIONS = ["fields", "predicates", "tiers", "bottlenecks", "cases", "vetoes", "methods", "docs", "other"]
scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=True),
                    st.text(max_size=30), st.sampled_from(["case.x", "memory_bandwidth", "a+" * 600 + "a",
                                                           "dram_throughput_pct > 80", "tier.high"]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(st.text(max_size=10), inner, max_size=4)),
                      max_leaves=20)
items = st.dictionaries(st.sampled_from(["id", "title", "bottleneck", "methods", "rationale", "expr", "when",
                                         "description", "kind", "type", "version", "example", "x"]),
                        values, max_size=7)
structured = st.dictionaries(st.sampled_from(SECTIONS), st.lists(items, max_size=3), max_size=3).map(
    lambda d: yaml.safe_dump(d, allow_unicode=True))
hostile = st.sampled_from([
    "a: &a [x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b]\n"
    "d: &d [*c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d]\nmethods: [*e, *e]\n",
    "cases: &c [*c]\n", "cases: " + "[" * 500 + "]" * 500 + "\n", "\x00\x01binary", "cases:\n  - id: [oops\n",
    "predicates:\n  - id: p\n    description: d\n    expr: \"" + "not " * 400 + "x\"\n",
])
kb_files = st.one_of(structured, hostile, st.text(max_size=300))


@pytest.fixture(scope="module")
def kb_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("fuzz-kb") / "home"
    assert CliRunner().invoke(main, ["kb", "init", "--home", str(home), "--skills", str(SMALL)]).exit_code == 0
    return home


def _kb_state(home: Path) -> tuple[str, list[tuple[str, bytes]]]:
    stats = CliRunner().invoke(main, ["kb", "stats", "--home", str(home), "--json"])
    skills = home / "skills"
    files = sorted((p.relative_to(skills).as_posix(), p.read_bytes()) for p in skills.rglob("*") if p.is_file()) \
        if skills.exists() else []
    return json.loads(stats.stdout)["content_hash"], files


@FUZZ
@given(body=kb_files)
def test_fuzz_kb_add(kb_home: Path, tmp_path_factory: pytest.TempPathFactory, body: str) -> None:
    before = _kb_state(kb_home)
    path = tmp_path_factory.mktemp("in") / "fuzz.yaml"
    path.write_text(body, encoding="utf-8", errors="surrogatepass")
    result = CliRunner().invoke(main, ["kb", "add", str(path), "--home", str(kb_home)])
    if _refused_in_one_line(result):
        assert _kb_state(kb_home) == before
        assert not (kb_home / "kb" / "pending-write.json").exists()


# profile CSVs --------------------------------------------------------------------------------------
FMAP = load_field_map()
COLUMNS = [spec["raw"][0] for spec in FMAP.fields.values()]
cells = st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr), st.integers(-10**9, 10**12).map(str),
                  st.sampled_from(["inf", "-inf", "NaN", "1e999", "-0", "1,2,3,4", "1,980,000", "12.5%", "n/a", "",
                                   "0", "5000", "100.5", "(!) fast", "1e-320", "--1"]),
                  st.text(max_size=12))


@settings(max_examples=80, deadline=None, derandomize=True, database=None)
@given(rows=st.lists(st.lists(cells, min_size=len(COLUMNS), max_size=len(COLUMNS)), min_size=1, max_size=3),
       units=st.booleans())
def test_fuzz_profile_csv(rows: list[list[str]], units: bool) -> None:
    out = io.StringIO()
    import csv

    writer = csv.writer(out)
    writer.writerow(["ID", "Kernel Name", *COLUMNS])
    if units:
        writer.writerow(["", "", *["ns" if c.startswith("gpu__time") else "" for c in COLUMNS]])
    for i, row in enumerate(rows):
        writer.writerow([str(i), f"k{i % 2}(float*)", *row])
    try:
        profile = parse_csv_text(out.getvalue(), source="fuzz.csv")
    except KernelskillError as exc:
        assert "\n" not in str(exc)
        return
    units_of = {f: spec.get("unit") for f, spec in FMAP.all_fields().items()}
    for k in profile.kernels:
        for field, value in k.fields.items():
            if value is None:
                continue
            assert math.isfinite(value) and value >= 0, (field, value)
            if units_of[field] == "pct":
                assert value <= 100 + PCT_TOLERANCE, (field, value)


# runs answer ---------------------------------------------------------------------------------------
answers = st.one_of(
    st.binary(max_size=400),
    st.text(max_size=400).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.sampled_from(["[" * 3000, "{" * 2000 + "}" * 2000, "-" * 200_000 + "1", "```python\n" + "(" * 500 + "\n```",
                     "```python\nclass ModelNew:\n    pass\n```", "\ufeff```python\nimport torch\n```"]).map(str.encode),
    st.binary(max_size=50).map(lambda b: b"\xff\xfe" + b),
)


@pytest.fixture(scope="module")
def paused_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    tmp = tmp_path_factory.mktemp("fuzz-run")
    task = tmp / "relu2.py"
    task.write_text(TASK)
    home = tmp / "home"
    out = ks("optimize", str(task), "--rounds", "1", "--llm", "exchange", "--home", str(home), *PLUGINS,
             env={"OPENAI_API_KEY": "", "KERNELSKILL_LLM_API_KEY": ""})
    assert out.exit_code == 3, out.output
    return str(home), next((home / "runs").iterdir())


@FUZZ
@given(data=answers)
def test_fuzz_runs_answer(paused_run: tuple[str, Path], tmp_path_factory: pytest.TempPathFactory,
                          data: bytes) -> None:
    home, run_dir = paused_run
    exchange = run_dir / "exchange"
    before = (sorted(p.name for p in exchange.iterdir()), (run_dir / "events.jsonl").read_bytes())
    path = tmp_path_factory.mktemp("answer") / "answer.txt"
    path.write_bytes(data)
    result = ks("runs", "answer", run_dir.name, "r00.generate.1", str(path), "--home", home)
    if _refused_in_one_line(result):
        assert (sorted(p.name for p in exchange.iterdir()), (run_dir / "events.jsonl").read_bytes()) == before
    else:  # accepted: take it back so the next example answers the same step
        (exchange / "r00.generate.1.answer.json").unlink()


def test_fuzz_runs_answer_accepts_a_good_answer(paused_run: tuple[str, Path], tmp_path: Path) -> None:
    """The fuzzed door still opens for a usable answer."""
    home, run_dir = paused_run
    path = tmp_path / "good.txt"
    path.write_text(fenced(kernel("speedup=1.20", "seed")))
    assert ks("runs", "answer", run_dir.name, "r00.generate.1", str(path), "--home", home).exit_code == 0
    (run_dir / "exchange" / "r00.generate.1.answer.json").unlink()


# run archives --------------------------------------------------------------------------------------
names = st.one_of(st.sampled_from(["run.json", "events.jsonl", "task.py", "candidates/a.py", "exchange/x.answer.json",
                                   "../escape", "/abs", "a/../../b", "ok\x1b[31m", "new\nline", "", ".", "deep/" * 30]),
                  st.text(min_size=1, max_size=20))
contents = st.one_of(st.binary(max_size=200), st.sampled_from([
    b'{"id": "r"}', b'{"type": "run_started", "data": {}}\n', b'{"type": 1}\n', b"[" * 3000 + b"]" * 3000,
    b'{"a": NaN}', b"\xff\xfe", b'{"type": "x", "data": {}}\n{"cut', b'{"type": "x", "data": {}}\n{"cut\n']))
members = st.lists(st.tuples(names, contents, st.sampled_from(["file", "file", "dir", "symlink"])), max_size=6)
tops = st.sampled_from(["r1", "run-2", "bad top", "x\x1b", ".hidden", "..", "a/b"])


def _make_archive(path: Path, top: str, entries: list[tuple[str, bytes, str]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data, kind in entries:
            info = tarfile.TarInfo(f"{top}/{name}" if top else name)
            if kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif kind == "symlink":
                info.type = tarfile.SYMTYPE
                info.linkname = "/etc/passwd"
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(top=tops, entries=members, with_manifest=st.booleans())
def test_fuzz_run_archives(tmp_path_factory: pytest.TempPathFactory, top: str,
                           entries: list[tuple[str, bytes, str]], with_manifest: bool) -> None:
    tmp = tmp_path_factory.mktemp("archive")
    if with_manifest:
        entries = [("run.json", b'{"id": "r"}', "file"), *entries]
    archive = _make_archive(tmp / "in.tar.gz", top, entries)
    runs_dir = tmp / "home" / "runs"
    try:
        dest = import_run(archive, runs_dir, require=("run.json",))
    except PortabilityError as exc:
        assert "\n" not in str(exc) and "\x1b" not in str(exc)
        assert not (tmp / "home").exists()  # no trace: not even the runs folder
        return
    assert dest.parent == runs_dir and (dest / "run.json").is_file()
    assert [p.name for p in runs_dir.iterdir()] == [dest.name]  # no staging folder left behind
    shutil.rmtree(tmp / "home")
