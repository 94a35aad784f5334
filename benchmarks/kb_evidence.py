"""Measure every curated method's worked example on a GPU and store the result as evidence.

Mode 1 (on the GPU box; torch + the standard library only)::

    python benchmarks/kb_evidence.py [--skills kb/skills] [--methods a,b] [--jobs 14]
                                     [--trials 50] [--build-mode merged|separate] [--out FILE]

For each method YAML under ``<skills>/methods/`` whose ``example:`` names a task, a before and an after
file (paths relative to ``<skills>``), it builds before and after (``load_inline``, many builds at a
time, ``TORCH_EXTENSIONS_DIR`` per example), checks both against ``Model`` on 5 fresh seeds
(atol = rtol = 1e-2, every output element compared), then times ``Model`` eager, before and after with
CUDA events (256 MB L2 flush and a device sync before each call, 3 warm-ups, ``--trials`` timed calls,
medians and IQRs). It prints a table and writes JSON (to ``$OUT/kb_evidence.json`` when ``$OUT`` is set).

Build modes. ``separate`` builds each file's extension on its own, exactly as the file asks.
``merged`` (default) collects the ``load_inline`` requests of several files that share the same compiler
flags, wraps each file's sources in a namespace of its own and builds them as one extension: the
kernels, host functions and flags are the files' own, only the cost of parsing the torch headers is
paid once per group instead of once per file. A group that fails to build falls back to ``separate``
for its members. Timing is unaffected by the mode (the same kernels, compiled with the same flags).

Mode 2 (on a development machine, may use pyyaml)::

    python benchmarks/kb_evidence.py --write-yaml kb_evidence.json [--skills kb/skills]

writes one ``evidence`` record per measured method into its YAML, replacing only the ``evidence:``
block of that method (comments and key order elsewhere are kept).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import dataclasses
import hashlib
import importlib.util
import json
import os
import queue
import re
import shlex
import statistics
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SKILLS = REPO / "kb" / "skills"
SEEDS = (0, 1, 2, 3, 4)
TOL = 1e-2
EVIDENCE_DATE = "2026-12-02"
HARDWARE = "NVIDIA H200"
FLUSH_BYTES = 256 * 1024 * 1024


# --------------------------------------------------------------------------------------------------
# discovery (regex over the YAML text: pyyaml may be missing on the GPU box)
# --------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Example:
    method: str
    yaml_path: str
    task: str
    before: str
    after: str

    def variant(self, which: str) -> str:
        return self.before if which == "before" else self.after


_ID_RE = re.compile(r"^\s*-\s*id:\s*['\"]?([a-z][a-z0-9_.\-]+)['\"]?\s*$")
_EX_KEY_RE = re.compile(r"^(\s*)example:\s*$")
_EX_FIELD_RE = re.compile(r"^\s*(task|before|after):\s*['\"]?([^'\"#]+?)['\"]?\s*(#.*)?$")


def discover(skills: Path, only: set[str] | None = None) -> tuple[list[Example], list[str]]:
    """Examples named by the method YAMLs, plus messages for methods without a usable example."""
    examples: list[Example] = []
    problems: list[str] = []
    for path in sorted((skills / "methods").glob("*.yaml")):
        lines = path.read_text().splitlines()
        method = None
        fields: dict[str, str] = {}
        in_example = False
        ex_indent = -1
        for line in lines:
            m = _ID_RE.match(line)
            if m and (method is None):
                method = m.group(1)
            m = _EX_KEY_RE.match(line)
            if m:
                in_example, ex_indent = True, len(m.group(1))
                continue
            if in_example:
                if line.strip() and (len(line) - len(line.lstrip())) <= ex_indent:
                    in_example = False
                    continue
                m = _EX_FIELD_RE.match(line)
                if m:
                    fields[m.group(1)] = m.group(2).strip()
        if method is None:
            problems.append(f"{path.name}: no method id found")
            continue
        if only and method not in only:
            continue
        if not {"task", "before", "after"} <= fields.keys():
            problems.append(f"{method}: no example (task/before/after) in {path.name}")
            continue
        paths = {k: skills / v for k, v in fields.items()}
        missing = [str(p.relative_to(skills)) for p in paths.values() if not p.is_file()]
        if missing:
            problems.append(f"{method}: example files missing: {', '.join(missing)}")
            continue
        examples.append(
            Example(method, str(path), str(paths["task"]), str(paths["before"]), str(paths["after"]))
        )
    return examples, problems


# --------------------------------------------------------------------------------------------------
# load_inline interception (merged builds)
# --------------------------------------------------------------------------------------------------


def _as_list(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return list(value)


_INCLUDE_RE = re.compile(r"^\s*#\s*include\b.*$", re.M)
_DEFINE_RE = re.compile(r"^\s*#\s*define\s+([A-Za-z_]\w*)", re.M)


def _wrap(source: str, ns: str) -> tuple[list[str], str]:
    """(hoisted include lines, the rest wrapped in ``namespace ns``, with its macros undefined after)."""
    includes = [m.group(0).strip() for m in _INCLUDE_RE.finditer(source)]
    body = _INCLUDE_RE.sub("", source)
    undefs = "".join(f"#undef {name}\n" for name in dict.fromkeys(_DEFINE_RE.findall(body)))
    return includes, f"namespace {ns} {{\n{body}\n}} // namespace {ns}\n{undefs}"


@dataclasses.dataclass
class InlineRequest:
    """One ``load_inline`` call made by one example file (the ``index``-th call of that file)."""

    file: str
    index: int
    name: str
    cpp: list[str]
    cuda: list[str]
    functions: list[str]
    flags: dict

    @property
    def key(self) -> str:
        return f"{self.file}#{self.index}"

    def flag_key(self) -> str:
        return json.dumps(self.flags, sort_keys=True)


def _request_from_call(file: str, index: int, kwargs: dict) -> InlineRequest:
    functions = kwargs.get("functions")
    if isinstance(functions, dict):
        functions = list(functions)
    flags = {
        "extra_cflags": _as_list(kwargs.get("extra_cflags")),
        "extra_cuda_cflags": _as_list(kwargs.get("extra_cuda_cflags")),
        "extra_ldflags": _as_list(kwargs.get("extra_ldflags")),
        "extra_include_paths": _as_list(kwargs.get("extra_include_paths")),
        "with_cuda": kwargs.get("with_cuda"),
    }
    return InlineRequest(
        file=file,
        index=index,
        name=str(kwargs.get("name")),
        cpp=_as_list(kwargs.get("cpp_sources")),
        cuda=_as_list(kwargs.get("cuda_sources")),
        functions=_as_list(functions),
        flags=flags,
    )


def merged_sources(requests: list[InlineRequest]) -> tuple[str, str, str]:
    """(extension name, cpp source, cuda source) of one merged extension."""
    cpp_inc: dict[str, None] = {}
    cuda_inc: dict[str, None] = {}
    cpp_body, cuda_body, binds = [], [], []
    for i, req in enumerate(requests):
        ns = f"kbv{i}"
        inc, body = _wrap("\n".join(req.cpp), ns)
        cpp_inc.update(dict.fromkeys(inc))
        cpp_body.append(body)
        if req.cuda:
            inc, body = _wrap("\n".join(req.cuda), ns)
            cuda_inc.update(dict.fromkeys(inc))
            cuda_body.append(body)
        for fn in req.functions:
            binds.append(f'  m.def("{ns}__{fn}", torch::wrap_pybind_function({ns}::{fn}), "{fn}");')
    cpp = "\n".join(cpp_inc) + "\n" + "\n".join(cpp_body)
    cpp += "\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n" + "\n".join(binds) + "\n}\n"
    cuda = "\n".join(cuda_inc) + "\n" + "\n".join(cuda_body) if cuda_body else ""
    digest = hashlib.sha1((cpp + cuda).encode()).hexdigest()[:12]
    return f"kbmerged_{digest}", cpp, cuda


class _MergedModule:
    """Stands in for one file's extension; attribute ``f`` is ``kbv<i>__f`` of the merged module."""

    def __init__(self, module, ns: str):
        self._module, self._ns = module, ns

    def __getattr__(self, item):
        return getattr(self._module, f"{self._ns}__{item}")


class _Recorder:
    """A ``load_inline`` replacement that records requests and returns lazy stand-ins."""

    def __init__(self):
        self.requests: list[InlineRequest] = []
        self.current_file = ""
        self.counts: dict[str, int] = {}

    def __call__(self, *args, **kwargs):
        names = ["name", "cpp_sources", "cuda_sources", "sycl_sources", "functions"]
        for name, value in zip(names, args, strict=False):
            kwargs.setdefault(name, value)
        index = self.counts.get(self.current_file, 0)
        self.counts[self.current_file] = index + 1
        req = _request_from_call(self.current_file, index, kwargs)
        self.requests.append(req)
        return _Lazy()


class _Lazy:
    def __getattr__(self, item):
        def call(*a, **k):
            raise RuntimeError("extension not built (recording pass)")

        return call


def import_file(path: str, tag: str):
    spec = importlib.util.spec_from_file_location(f"kbev_{tag}_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(Path(path).parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    return module


def record_requests(path: str, task_path: str = "") -> list[InlineRequest]:
    """The ``load_inline`` calls a file makes on import, or else when its ``ModelNew`` is built."""
    import torch.utils.cpp_extension as ce

    rec = _Recorder()
    rec.current_file = path
    original = ce.load_inline
    ce.load_inline = rec
    try:
        module = import_file(path, "rec")
        if not rec.requests and task_path:  # lazy builders: load_inline runs in ModelNew.__init__
            task = import_file(task_path, "rectask")
            module.ModelNew(*task.get_init_inputs())
    finally:
        ce.load_inline = original
    return rec.requests


def install_merged_loader(plan: dict[str, dict]) -> None:
    """Route ``load_inline`` calls of planned files to their (already built) merged extension."""
    import torch.utils.cpp_extension as ce

    original = ce.load_inline
    counts = _FILE_CALLS
    cache: dict[str, object] = {}

    def patched(*args, **kwargs):
        names = ["name", "cpp_sources", "cuda_sources", "sycl_sources", "functions"]
        for name, value in zip(names, args, strict=False):
            kwargs.setdefault(name, value)
        file = _CURRENT_FILE[0]
        index = counts.get(file, 0)
        counts[file] = index + 1
        entry = plan.get(f"{file}#{index}")
        if entry is None:
            return original(**kwargs)
        group = entry["group"]
        if group["name"] not in cache:
            prev = os.environ.get("TORCH_EXTENSIONS_DIR")
            os.environ["TORCH_EXTENSIONS_DIR"] = group["ext_dir"]
            try:
                cache[group["name"]] = original(
                    name=group["name"],
                    cpp_sources=group["cpp"],
                    cuda_sources=group["cuda"] or None,
                    functions=None,
                    verbose=False,
                    **{k: v for k, v in group["flags"].items() if v},
                )
            finally:
                if prev is None:
                    os.environ.pop("TORCH_EXTENSIONS_DIR", None)
                else:
                    os.environ["TORCH_EXTENSIONS_DIR"] = prev
        return _MergedModule(cache[group["name"]], entry["ns"])

    ce.load_inline = patched


_CURRENT_FILE = [""]
_FILE_CALLS: dict[str, int] = {}


def _begin_file(path: str) -> None:
    """Attribute the next ``load_inline`` calls to ``path``, counting from its first call again."""
    _CURRENT_FILE[0] = path
    _FILE_CALLS[path] = 0


# --------------------------------------------------------------------------------------------------
# worker: build one file, or one merged group
# --------------------------------------------------------------------------------------------------


def worker_build_file(path: str, ext_dir: str, task_path: str = "") -> dict:
    """Build one file's extension(s) the way the file asks (import it; instantiate ``ModelNew`` too when
    the file calls ``load_inline`` lazily)."""
    import torch.utils.cpp_extension as ce

    os.environ["TORCH_EXTENSIONS_DIR"] = ext_dir
    original, calls = ce.load_inline, [0]

    def counting(*a, **k):
        calls[0] += 1
        return original(*a, **k)

    ce.load_inline = counting
    t0 = time.perf_counter()
    try:
        module = import_file(path, "build")
        if not calls[0] and task_path:
            task = import_file(task_path, "task")
            module.ModelNew(*task.get_init_inputs())
    except BaseException as exc:  # noqa: BLE001 - report any build failure
        return {"ok": False, "seconds": time.perf_counter() - t0, "error": _tail(exc)}
    finally:
        ce.load_inline = original
    return {"ok": True, "seconds": time.perf_counter() - t0}


def worker_build_group(group: dict) -> dict:
    import torch.utils.cpp_extension as ce

    os.environ["TORCH_EXTENSIONS_DIR"] = group["ext_dir"]
    t0 = time.perf_counter()
    try:
        ce.load_inline(
            name=group["name"],
            cpp_sources=group["cpp"],
            cuda_sources=group["cuda"] or None,
            functions=None,
            verbose=False,
            **{k: v for k, v in group["flags"].items() if v},
        )
    except BaseException as exc:  # noqa: BLE001
        return {"ok": False, "seconds": time.perf_counter() - t0, "error": _tail(exc)}
    return {"ok": True, "seconds": time.perf_counter() - t0}


def _tail(exc: BaseException, limit: int = 1500) -> str:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return text[-limit:]


# --------------------------------------------------------------------------------------------------
# worker: check and time (one long-lived process; JSON lines on stdin/stdout)
# --------------------------------------------------------------------------------------------------


def _to_device(obj, device):
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_device(o, device) for o in obj)
    return obj


def _flatten(obj) -> list:
    if isinstance(obj, (list, tuple)):
        out = []
        for o in obj:
            out.extend(_flatten(o))
        return out
    return [obj]


def compare(ref, out) -> tuple[bool, float, str]:
    """(all close, max abs diff, message), every element of every output compared."""
    import torch

    refs, outs = _flatten(ref), _flatten(out)
    if len(refs) != len(outs):
        return False, float("inf"), f"{len(outs)} outputs, expected {len(refs)}"
    worst = 0.0
    for i, (r, o) in enumerate(zip(refs, outs, strict=True)):
        if not isinstance(r, torch.Tensor):
            continue
        if not isinstance(o, torch.Tensor):
            return False, float("inf"), f"output {i} is {type(o).__name__}, not a tensor"
        if tuple(o.shape) != tuple(r.shape):
            return False, float("inf"), f"output {i} shape {tuple(o.shape)}, expected {tuple(r.shape)}"
        if o.dtype != r.dtype:
            return False, float("inf"), f"output {i} dtype {o.dtype}, expected {r.dtype}"
        rf, of = r.detach().double(), o.detach().double()
        if not torch.isfinite(of).all() and torch.isfinite(rf).all():
            return False, float("inf"), f"output {i} has non-finite values"
        diff = (rf - of).abs()
        worst = max(worst, float(diff.max()) if diff.numel() else 0.0)
        if not torch.allclose(of, rf, atol=TOL, rtol=TOL, equal_nan=True):
            bad = int((diff > TOL + TOL * rf.abs()).sum())
            return False, worst, f"output {i}: {bad} of {diff.numel()} elements outside atol=rtol={TOL}"
    return True, worst, ""


def _seeded(fn, seed: int):
    import torch

    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    return fn()


def _on_gpu(fn):
    """Run ``fn`` with CUDA as the default device: models and inputs are created (and randomly
    initialised by the seeded CUDA generator) on the GPU directly, instead of on the CPU and copied."""
    import torch

    with torch.device("cuda"):
        out = fn()
    return _to_device(out, "cuda")


def _load_example(ex: dict, plan: dict):
    """(task module, {eager, before, after} models on the GPU) for one example. Each variant file is
    imported and its ``ModelNew`` built right away, so lazy ``load_inline`` calls are attributed to it.
    All three models are built after the same seed (42), so their parameters match."""
    task = import_file(ex["task"], "task")
    init = task.get_init_inputs()
    models = {"eager": _seeded(lambda: _on_gpu(lambda: task.Model(*init)), 42).cuda().eval()}
    for which in ("before", "after"):
        _begin_file(ex[which])
        os.environ["TORCH_EXTENSIONS_DIR"] = ex["ext_dir"][which]
        module = import_file(ex[which], which)
        models[which] = _seeded(lambda m=module: _on_gpu(lambda: m.ModelNew(*init)), 42).cuda().eval()
    return task, models


def _time_one(fn, inputs, flush, warmup: int, trials: int) -> dict:
    import torch

    with torch.no_grad():
        for _ in range(warmup):
            fn(*inputs)
        torch.cuda.synchronize()
        times = []
        for _ in range(trials):
            flush.zero_()
            torch.cuda.synchronize()  # host overhead of the call is inside the timed region
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn(*inputs)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    times.sort()
    q = statistics.quantiles(times, n=4) if len(times) >= 4 else [times[0], times[0], times[-1]]
    return {"median_ms": statistics.median(times), "iqr_ms": q[2] - q[0], "n": len(times)}


def worker_run(ex: dict, plan: dict, warmup: int, trials: int) -> dict:
    """Check before and after against Model on 5 fresh seeds (every element), then time all three."""
    import torch

    task, models = _load_example(ex, plan)
    result: dict = {"method": ex["method"]}
    inputs = None
    with torch.no_grad():
        for which in ("before", "after"):
            result[which] = {"correct": True, "max_abs_diff": 0.0, "message": ""}
        for seed in SEEDS:
            del inputs
            inputs = _seeded(lambda: _on_gpu(task.get_inputs), seed)
            ref = models["eager"](*inputs)
            for which in ("before", "after"):
                rec = result[which]
                if not rec["correct"]:
                    continue
                out = models[which](*inputs)
                torch.cuda.synchronize()
                ok, worst, msg = compare(ref, out)
                rec["max_abs_diff"] = max(rec["max_abs_diff"], worst)
                if not ok:
                    rec.update(correct=False, message=f"seed {seed}: {msg}")
                del out
            del ref
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
    for which in ("eager", "before", "after"):
        result[f"time_{which}"] = _time_one(models[which], inputs, flush, warmup, trials)
    del inputs, flush, models
    torch.cuda.empty_cache()
    return result


def worker_main(plan_path: str, warmup: int, trials: int) -> None:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    plan = json.loads(Path(plan_path).read_text()) if plan_path else {}
    if plan:
        install_merged_loader(plan)
    for line in sys.stdin:
        cmd = json.loads(line)
        t0 = time.perf_counter()
        try:
            res = worker_run(cmd["example"], plan, warmup, trials)
            res["ok"] = True
        except BaseException as exc:  # noqa: BLE001 - a failing example must not end the run
            res = {"ok": False, "error": _tail(exc)}
        res["seconds"] = time.perf_counter() - t0
        sys.stdout.write("@@RESULT " + json.dumps(res) + "\n")
        sys.stdout.flush()
        if not res["ok"] and "CUDA error" in res.get("error", ""):
            sys.exit(3)  # sticky CUDA error: this process's context is gone


class GpuWorker:
    """A long-lived check/time process; restarted after a crash."""

    def __init__(self, plan_path: str, warmup: int, trials: int):
        self.args = [sys.executable, __file__, "--_worker", plan_path, str(warmup), str(trials)]
        self.proc: subprocess.Popen | None = None
        self.lock = threading.Lock()

    def _start(self) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, env=env,
        )

    def run(self, op: str, example: dict, timeout: float = 240.0) -> dict:
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self._start()
            assert self.proc and self.proc.stdin and self.proc.stdout
            self.proc.stdin.write(json.dumps({"op": op, "example": example}) + "\n")
            self.proc.stdin.flush()
            lines: queue.Queue = queue.Queue()
            log: list[str] = []

            def reader():
                for ln in self.proc.stdout:
                    if ln.startswith("@@RESULT "):
                        lines.put(ln)
                        return
                    log.append(ln)
                lines.put(None)

            t = threading.Thread(target=reader, daemon=True)
            t.start()
            try:
                ln = lines.get(timeout=timeout)
            except queue.Empty:
                self.proc.kill()
                self.proc = None
                return {"ok": False, "error": f"timeout after {timeout:.0f} s"}
            if ln is None:
                self.proc.wait()
                self.proc = None
                return {"ok": False, "error": "worker died: " + "".join(log)[-1200:]}
            res = json.loads(ln[len("@@RESULT "):])
            if not res.get("ok") and "CUDA error" in res.get("error", ""):
                try:
                    self.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                self.proc = None
            return res

    def close(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


# --------------------------------------------------------------------------------------------------
# orchestration
# --------------------------------------------------------------------------------------------------


def _sub(args: list[str], timeout: float) -> dict:
    env = dict(os.environ, MAX_JOBS=os.environ.get("MAX_JOBS", "2"), PYTHONUNBUFFERED="1")
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"build timed out after {timeout:.0f} s"}
    for ln in proc.stdout.splitlines()[::-1]:
        if ln.startswith("@@RESULT "):
            return json.loads(ln[len("@@RESULT "):])
    return {"ok": False, "error": (proc.stdout + proc.stderr)[-1500:]}


def plan_groups(examples: list[Example], work: Path, jobs: int) -> tuple[dict, list[dict], dict]:
    """Record all load_inline requests; group them by flags into about ``jobs`` merged builds."""
    requests: list[InlineRequest] = []
    unmergeable: dict[str, str] = {}
    for ex in examples:
        for which in ("before", "after"):
            path = ex.variant(which)
            try:
                reqs = record_requests(path, ex.task)
            except BaseException as exc:  # noqa: BLE001
                unmergeable[path] = _tail(exc)
                continue
            if not reqs:
                unmergeable[path] = "no load_inline call recorded"
            requests.extend(reqs)
    by_flags: dict[str, list[InlineRequest]] = {}
    for req in requests:
        by_flags.setdefault(req.flag_key(), []).append(req)
    n_groups = max(1, jobs)
    per_group = max(1, -(-len(requests) // n_groups))
    groups: list[dict] = []
    plan: dict[str, dict] = {}
    for reqs in by_flags.values():
        for start in range(0, len(reqs), per_group):
            chunk = reqs[start:start + per_group]
            name, cpp, cuda = merged_sources(chunk)
            group = {
                "name": name, "cpp": cpp, "cuda": cuda, "flags": chunk[0].flags,
                "ext_dir": str(work / "ext" / name), "members": [r.key for r in chunk],
                "files": sorted({r.file for r in chunk}),
            }
            groups.append(group)
            for i, req in enumerate(chunk):
                plan[req.key] = {"group": group, "ns": f"kbv{i}"}
    return plan, groups, unmergeable


def measure(args: argparse.Namespace) -> int:
    skills = Path(args.skills).resolve()
    only = set(args.methods.split(",")) if args.methods else None
    examples, problems = discover(skills, only)
    out_dir = Path(os.environ.get("OUT") or ".")
    out_path = Path(args.out) if args.out else out_dir / "kb_evidence.json"
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    print(f"{len(examples)} examples; {len(problems)} methods without a usable example", flush=True)
    for p in problems:
        print("  missing:", p, flush=True)

    ext_dirs = {
        ex.method: {w: str(work / "ext" / f"{ex.method}_{w}") for w in ("before", "after")} for ex in examples
    }
    build: dict[str, dict] = {}  # file -> result
    plan: dict[str, dict] = {}
    if args.build_mode == "merged":
        plan, groups, unmergeable = plan_groups(examples, work, args.jobs)
        print(f"merged build: {len(groups)} groups, {len(unmergeable)} files built separately", flush=True)
        with cf.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futs = {}
            for g in groups:
                gpath = work / f"{g['name']}.json"
                gpath.write_text(json.dumps(g))
                futs[pool.submit(_sub, [sys.executable, __file__, "--_build-group", str(gpath)], 900)] = g
            for fut in cf.as_completed(futs):
                g, res = futs[fut], fut.result()
                print(f"  group {g['name']} ({len(g['members'])} files): "
                      f"{'ok' if res['ok'] else 'FAILED'} in {res.get('seconds', 0):.0f} s", flush=True)
                for f in g["files"]:
                    build[f] = dict(res, mode="merged", group=g["name"])
                if not res["ok"]:
                    for key in g["members"]:
                        plan.pop(key, None)
        retry = [f for f, r in build.items() if not r["ok"]] + list(unmergeable)
    else:
        retry = [ex.variant(w) for ex in examples for w in ("before", "after")]
    if retry:
        file_dirs = {ex.variant(w): ext_dirs[ex.method][w] for ex in examples for w in ("before", "after")}
        file_task = {ex.variant(w): ex.task for ex in examples for w in ("before", "after")}
        print(f"separate builds: {len(retry)} files", flush=True)
        with cf.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futs = {
                pool.submit(
                    _sub, [sys.executable, __file__, "--_build-file", f, file_dirs[f], file_task[f]], 900
                ): f
                for f in retry
            }
            for fut in cf.as_completed(futs):
                f, res = futs[fut], fut.result()
                prev = build.get(f)
                build[f] = dict(res, mode="separate")
                if prev and not prev["ok"]:
                    build[f]["merged_error"] = prev.get("error", "")[-400:]
                print(f"  {Path(f).parent.name}/{Path(f).name}: {'ok' if res['ok'] else 'FAILED'} "
                      f"in {res.get('seconds', 0):.0f} s", flush=True)
    t_built = time.perf_counter()
    plan_path = work / "plan.json"
    plan_path.write_text(json.dumps(plan))

    worker = GpuWorker(str(plan_path) if plan else "", args.warmup, args.trials)
    rows: list[dict] = []
    meta = {"command": "python benchmarks/kb_evidence.py " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
            "build_mode": args.build_mode, "build_seconds": round(t_built - t_start, 1), "missing": problems}
    for ex in examples:
        _write_partial(out_path, meta, rows)
        row = {"method": ex.method, "task": _rel(ex.task, skills), "before": _rel(ex.before, skills),
               "after": _rel(ex.after, skills), "status": "ok", "message": ""}
        b_before, b_after = build.get(ex.before, {}), build.get(ex.after, {})
        row["build"] = {"before": _slim(b_before), "after": _slim(b_after)}
        if not (b_before.get("ok") and b_after.get("ok")):
            row["status"] = "build_error"
            row["message"] = (b_before.get("error") or b_after.get("error") or "not built")[-600:]
            rows.append(row)
            print(f"{ex.method:32s} build_error", flush=True)
            continue
        payload = dataclasses.asdict(ex) | {"ext_dir": ext_dirs[ex.method]}
        chk = worker.run("run", payload, timeout=args.example_timeout)
        if not chk.get("ok"):
            row.update(status="runtime_error", message=chk.get("error", "")[-800:])
            rows.append(row)
            print(f"{ex.method:32s} runtime_error {row['message'][-300:]}", flush=True)
            continue
        row["before_correct"] = chk["before"]["correct"]
        row["after_correct"] = chk["after"]["correct"]
        row["before_max_abs_diff"] = chk["before"]["max_abs_diff"]
        row["after_max_abs_diff"] = chk["after"]["max_abs_diff"]
        msgs = [f"{w}: {chk[w]['message']}" for w in ("before", "after") if chk[w]["message"]]
        row["message"] = "; ".join(msgs)
        if not (row["before_correct"] and row["after_correct"]):
            row["status"] = "mismatch"
        tim = {w: chk[f"time_{w}"] for w in ("eager", "before", "after")}
        row["seconds"] = round(chk.get("seconds", 0.0), 1)
        for w in ("eager", "before", "after"):
            row[f"{w}_ms"] = round(tim[w]["median_ms"], 5)
            row[f"{w}_iqr_ms"] = round(tim[w]["iqr_ms"], 5)
        row["trials"] = tim["after"]["n"]
        row["speedup"] = round(row["before_ms"] / row["after_ms"], 4)
        row["after_vs_eager"] = round(row["eager_ms"] / row["after_ms"], 4)
        rows.append(row)
        print(f"{ex.method:32s} {row['status']:9s} eager {row['eager_ms']:8.4f}  before {row['before_ms']:8.4f}"
              f"  after {row['after_ms']:8.4f}  x{row['speedup']:.2f}", flush=True)
    worker.close()

    import torch

    report = {
        "hardware": torch.cuda.get_device_name() if torch.cuda.is_available() else "none",
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "command": "python benchmarks/kb_evidence.py " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
        "protocol": (f"5 seeds correctness atol=rtol={TOL}; CUDA events; {FLUSH_BYTES >> 20} MB L2 flush and "
                     f"sync before each call; {args.warmup} warm-ups; {args.trials} trials; medians"),
        "build_mode": args.build_mode,
        "build_seconds": round(t_built - t_start, 1),
        "total_seconds": round(time.perf_counter() - t_start, 1),
        "missing": problems,
        "results": rows,
    }
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(report, indent=1))
    print_table(rows)
    print(f"build {report['build_seconds']} s, total {report['total_seconds']} s; wrote {out_path}", flush=True)
    return 0


def _write_partial(path: Path, meta: dict, rows: list[dict]) -> None:
    """Results so far, so that a run stopped at its time limit still leaves a readable report."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(meta, partial=True, results=rows), indent=1))


def _slim(res: dict) -> dict:
    return {k: (round(v, 1) if isinstance(v, float) else v) for k, v in res.items()
            if k in ("ok", "seconds", "mode", "group")}


def _rel(path: str, skills: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(skills))
    except ValueError:
        return path


def print_table(rows: list[dict]) -> None:
    head = f"{'method':32s} {'status':13s} {'eager ms':>9s} {'before ms':>10s} {'after ms':>9s} {'speedup':>8s}"
    print(head)
    print("-" * len(head))
    for r in rows:
        def f(k, r=r):
            return f"{r[k]:.4f}" if isinstance(r.get(k), float) else "-"

        sp = f"{r['speedup']:.2f}x" if r.get("speedup") else "-"
        print(f"{r['method']:32s} {r['status']:13s} {f('eager_ms'):>9s} {f('before_ms'):>10s} "
              f"{f('after_ms'):>9s} {sp:>8s}")


# --------------------------------------------------------------------------------------------------
# mode 2: write evidence into the method YAMLs
# --------------------------------------------------------------------------------------------------


def evidence_record(row: dict, report: dict) -> dict | None:
    if row.get("status") in ("build_error", "runtime_error") or "after_ms" not in row:
        return None
    notes = [f"torch eager {row['eager_ms']:.4f} ms (after is x{row['after_vs_eager']:.2f} vs eager)"]
    for w in ("before", "after"):
        ok = row.get(f"{w}_correct")
        notes.append(f"{w} {'correct' if ok else 'INCORRECT'} on 5 seeds at atol=rtol={TOL} "
                     f"(max abs diff {row.get(f'{w}_max_abs_diff', float('nan')):.3g})")
    if row.get("message"):
        notes.append(row["message"])
    gain_ms = row["before_ms"] - row["after_ms"]
    verdict = "pays"
    if row["speedup"] < 1.0:
        verdict = "slower"
        notes.append("the method did not pay on this example")
    elif gain_ms <= max(row["before_iqr_ms"], row["after_iqr_ms"]):
        verdict = "no_gain"
        notes.append(f"no measurable gain on this example: the {gain_ms:.4f} ms saved is within the timing IQR")
    notes.append(f"IQR before {row['before_iqr_ms']:.4f} ms, after {row['after_iqr_ms']:.4f} ms, "
                 f"{row.get('trials', 0)} trials, {report.get('protocol', '')}")
    return {
        "kind": "measured",
        "task": row["task"],
        "before_ms": row["before_ms"],
        "after_ms": row["after_ms"],
        "speedup": row["speedup"],
        "hardware": HARDWARE,
        "date": EVIDENCE_DATE,
        "command": _portable_command(report.get("command", "python benchmarks/kb_evidence.py")),
        "verdict": verdict,
        "notes": "; ".join(notes),
    }


def _portable_command(command: str) -> str:
    """The command as a reader can rerun it: the box's output folder written as ``$OUT``."""
    return re.sub(r"--out \S*/([^/\s]+\.json)", r"--out $OUT/\1", command)


def render_evidence(record: dict, indent: int) -> list[str]:
    pad = " " * indent
    lines = [f"{pad}evidence:"]
    first = True
    for key in ("kind", "task", "before_ms", "after_ms", "speedup", "hardware", "date", "command", "verdict", "notes"):
        value = record[key]
        text = json.dumps(value) if isinstance(value, str) else repr(value)
        prefix = f"{pad}  - " if first else f"{pad}    "
        lines.append(f"{prefix}{key}: {text}")
        first = False
    return lines


def replace_evidence(text: str, record: dict) -> str:
    """Replace (or add) the ``evidence:`` block of the single method item in ``text``."""
    lines = text.splitlines()
    item = next((i for i, ln in enumerate(lines) if _ID_RE.match(ln)), None)
    if item is None:
        raise ValueError("no '- id:' item found")
    indent = len(lines[item]) - len(lines[item].lstrip()) + 2  # keys of the item
    end = len(lines)
    for j in range(item + 1, len(lines)):
        ln = lines[j]
        if ln.strip() and not ln.lstrip().startswith("#") and len(ln) - len(ln.lstrip()) < indent:
            end = j
            break
    start = None
    for j in range(item, end):
        ln = lines[j]
        if re.match(rf"^ {{{indent}}}evidence:", ln):
            start = j
            break
    new = render_evidence(record, indent)
    if start is None:
        insert = end
        while insert > item + 1 and not lines[insert - 1].strip():
            insert -= 1
        lines[insert:insert] = new
    else:
        stop = start + 1
        while stop < end:
            ln = lines[stop]
            if ln.strip() and len(ln) - len(ln.lstrip()) <= indent and not ln.lstrip().startswith("- "):
                break
            if ln.strip() and len(ln) - len(ln.lstrip()) < indent:
                break
            stop += 1
        while stop > start + 1 and not lines[stop - 1].strip():
            stop -= 1
        lines[start:stop] = new
    return "\n".join(lines) + "\n"


def write_yaml(args: argparse.Namespace) -> int:
    import yaml

    report = json.loads(Path(args.write_yaml).read_text())
    skills = Path(args.skills).resolve()
    by_method = {r["method"]: r for r in report.get("results", [])}
    examples, _ = discover(skills)
    written, skipped = 0, []
    for ex in examples:
        row = by_method.get(ex.method)
        record = evidence_record(row, report) if row else None
        if record is None:
            skipped.append(f"{ex.method}: {row['status'] if row else 'not measured'}")
            continue
        path = Path(ex.yaml_path)
        new = replace_evidence(path.read_text(), record)
        data = yaml.safe_load(new)  # must still parse, with the record in place
        methods = data.get("methods") or []
        if not methods or methods[0].get("evidence", [{}])[0].get("after_ms") != record["after_ms"]:
            raise SystemExit(f"{path}: evidence block not written where expected")
        path.write_text(new)
        written += 1
    print(f"wrote evidence into {written} method files")
    for s in skipped:
        print("  skipped:", s)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--_worker"]:
        worker_main(argv[1], int(argv[2]), int(argv[3]))
        return 0
    if argv[:1] == ["--_build-file"]:
        res = worker_build_file(argv[1], argv[2], argv[3] if len(argv) > 3 else "")
        print("@@RESULT " + json.dumps(res), flush=True)
        return 0
    if argv[:1] == ["--_build-group"]:
        res = worker_build_group(json.loads(Path(argv[1]).read_text()))
        print("@@RESULT " + json.dumps(res), flush=True)
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--skills", default=str(DEFAULT_SKILLS))
    p.add_argument("--methods", default="", help="comma-separated method ids (default: all)")
    p.add_argument("--jobs", type=int, default=14, help="builds at a time")
    p.add_argument("--trials", type=int, default=50)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--build-mode", choices=("merged", "separate"), default="merged")
    p.add_argument("--work", default="/tmp/kb_evidence")
    p.add_argument("--example-timeout", type=float, default=120.0, help="seconds per example (check + time)")
    p.add_argument("--out", default="")
    p.add_argument("--write-yaml", default="", metavar="RESULTS_JSON")
    args = p.parse_args(argv)
    if args.write_yaml:
        return write_yaml(args)
    return measure(args)


if __name__ == "__main__":
    sys.exit(main())
