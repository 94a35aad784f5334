"""A faster route for ``load_inline`` candidates: one nvcc call, no per-candidate pybind unit.

``load_inline`` compiles two translation units per candidate: ``cuda.cu`` (the candidate's code,
which usually includes all of ``torch/extension.h``) and ``main.cpp`` (pybind11 bindings including
``torch/python.h``). Both parse most of ATen; on the H200 box that is 25-64 s per candidate.

This route compiles only the candidate's CUDA source, with a light prelude (``prelude.light_cuda_source``)
plus a generated ``extern "C"`` wrapper per bound function, into a shared library with a single
``nvcc -shared`` call. Python reaches the wrappers through a small pybind *trampoline* module that
is built once per box and torch version (``call(address, kinds, ret, args)``): it turns Python
tensors and numbers into C++ values, calls the wrapper and returns the result.

Eligible candidates: ``functions=`` given, ``cpp_sources`` holding declarations only, parameters of
type Tensor / integer / floating / bool, returns Tensor, ``std::vector<Tensor>``, a number or void.
Anything else (or any failure here) falls back to the light and then the standard load_inline.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import importlib.util
import inspect
import logging
import os
import re
import shlex
import shutil
import subprocess
import time
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .host_pch import HOST_PCH_DIR_ENV, NO_HOST_PCH_ENV, HostPrelude
from .prelude import CandidateBuildError, light_cuda_source

_log = logging.getLogger(__name__)

TRAMPOLINE_VERSION = "1"

TRAMPOLINE_SRC = r"""
#include <torch/extension.h>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

typedef int (*ks_wrapper)(void**, void*, char*, int);

py::object ks_call(uintptr_t addr, const std::string& kinds, const std::string& ret, py::list args) {
    const size_t n = kinds.size();
    if ((size_t)py::len(args) != n) throw std::runtime_error("kernelskill trampoline: wrong argument count");
    std::vector<at::Tensor> tensors; tensors.reserve(n);
    std::vector<int64_t> ints; ints.reserve(n);
    std::vector<double> reals; reals.reserve(n);
    std::vector<unsigned char> flags; flags.reserve(n);
    std::vector<void*> ptrs(n > 0 ? n : 1);
    for (size_t i = 0; i < n; ++i) {
        py::handle a = args[i];
        switch (kinds[i]) {
            case 't': tensors.push_back(a.cast<at::Tensor>()); ptrs[i] = &tensors.back(); break;
            case 'i': ints.push_back(a.cast<int64_t>()); ptrs[i] = &ints.back(); break;
            case 'f': reals.push_back(a.cast<double>()); ptrs[i] = &reals.back(); break;
            case 'b': flags.push_back(a.cast<bool>() ? 1 : 0); ptrs[i] = &flags.back(); break;
            default: throw std::runtime_error("kernelskill trampoline: unknown argument kind");
        }
    }
    char err[4096];
    err[0] = 0;
    auto fn = reinterpret_cast<ks_wrapper>(addr);
    if (ret == "t") {
        at::Tensor out;
        if (fn(ptrs.data(), &out, err, sizeof(err))) throw std::runtime_error(err);
        return py::cast(out);
    } else if (ret == "l") {
        std::vector<at::Tensor> out;
        if (fn(ptrs.data(), &out, err, sizeof(err))) throw std::runtime_error(err);
        return py::cast(out);
    } else if (ret == "i") {
        int64_t out = 0;
        if (fn(ptrs.data(), &out, err, sizeof(err))) throw std::runtime_error(err);
        return py::cast(out);
    } else if (ret == "f") {
        double out = 0;
        if (fn(ptrs.data(), &out, err, sizeof(err))) throw std::runtime_error(err);
        return py::cast(out);
    } else if (ret == "b") {
        unsigned char out = 0;
        if (fn(ptrs.data(), &out, err, sizeof(err))) throw std::runtime_error(err);
        return py::cast(out != 0);
    }
    if (fn(ptrs.data(), nullptr, err, sizeof(err))) throw std::runtime_error(err);
    return py::none();
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("call", &ks_call); }
"""

_INT_TYPES = {"int", "int64_t", "long", "longlong", "size_t", "int32_t", "unsigned", "unsignedint", "uint32_t",
              "uint64_t", "short", "int16_t", "int8_t", "uint8_t", "c10::SymInt", "at::IntArrayRef"}
_REAL_TYPES = {"float", "double"}
_TENSOR_TYPES = {"torch::Tensor", "at::Tensor", "Tensor"}
_VEC_TENSOR = re.compile(r"^std::vector<(torch::|at::)?Tensor>$")


class NotEligible(Exception):
    """This candidate needs the regular load_inline route."""


def _norm_type(t: str) -> str:
    t = re.sub(r"\bconst\b|&|\bvolatile\b", " ", t)
    return re.sub(r"\s+", "", t)


def _split_params(params: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in params:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return [p.strip() for p in out if p.strip() and p.strip() != "void"]


def _param_type(param: str) -> str:
    param = param.split("=")[0].strip()
    m = re.match(r"^(.*?)([A-Za-z_]\w*)\s*$", param)
    if m and m.group(1).strip() and not m.group(1).strip().endswith("::"):
        return _norm_type(m.group(1))
    return _norm_type(param)


def parse_signature(name: str, sources: list[str]) -> tuple[str, str, list[str], str]:
    """(kinds, ret kind, C++ parameter types, C++ return type) of function ``name``."""
    pat = re.compile(r"(?:^|[;}\n])\s*((?:[\w:<>,]+\s*[&*]?\s+)+?)" + re.escape(name) + r"\s*\(([^()]*)\)\s*[;{]",
                     re.S)
    for src in sources:
        m = pat.search(src)
        if not m:
            continue
        ret = _norm_type(re.sub(r"\b(inline|static|extern|__host__|TORCH_API)\b", " ", m.group(1)))
        ptypes = [_param_type(p) for p in _split_params(m.group(2))]
        kinds = ""
        for t in ptypes:
            if t in _TENSOR_TYPES:
                kinds += "t"
            elif t.replace("std::", "") in _INT_TYPES - {"c10::SymInt", "at::IntArrayRef"}:
                kinds += "i"
            elif t in _REAL_TYPES:
                kinds += "f"
            elif t == "bool":
                kinds += "b"
            else:
                raise NotEligible(f"{name}: parameter type {t!r}")
        if ret in _TENSOR_TYPES:
            rk = "t"
        elif _VEC_TENSOR.match(ret):
            rk = "l"
        elif ret == "void":
            rk = "v"
        elif ret.replace("std::", "") in _INT_TYPES:
            rk = "i"
        elif ret in _REAL_TYPES:
            rk = "f"
        elif ret == "bool":
            rk = "b"
        else:
            raise NotEligible(f"{name}: return type {ret!r}")
        return kinds, rk, ptypes, ret
    raise NotEligible(f"no declaration of {name} found")


def wrapper_source(name: str, kinds: str, ret_kind: str, ptypes: list[str]) -> str:
    args = []
    for i, (k, t) in enumerate(zip(kinds, ptypes, strict=True)):
        if k == "t":
            args.append(f"*reinterpret_cast<at::Tensor*>(a[{i}])")
        elif k == "i":
            args.append(f"static_cast<{t}>(*reinterpret_cast<int64_t*>(a[{i}]))")
        elif k == "f":
            args.append(f"static_cast<{t}>(*reinterpret_cast<double*>(a[{i}]))")
        else:
            args.append(f"(*reinterpret_cast<unsigned char*>(a[{i}]) != 0)")
    call = f"{name}({', '.join(args)})"
    store = {
        "t": f"*reinterpret_cast<at::Tensor*>(r) = {call};",
        "l": f"*reinterpret_cast<std::vector<at::Tensor>*>(r) = {call};",
        "i": f"*reinterpret_cast<int64_t*>(r) = static_cast<int64_t>({call});",
        "f": f"*reinterpret_cast<double*>(r) = static_cast<double>({call});",
        "b": f"*reinterpret_cast<unsigned char*>(r) = ({call}) ? 1 : 0;",
        "v": f"{call};",
    }[ret_kind]
    return (f'extern "C" int ks_wrap_{name}(void** a, void* r, char* err, int errlen) {{\n'
            f"  try {{ {store} return 0; }}\n"
            "  catch (const std::exception& e) { std::strncpy(err, e.what(), errlen - 1); err[errlen - 1] = 0; return 1; }\n"
            '  catch (...) { std::strncpy(err, "unknown C++ exception", errlen - 1); return 1; }\n}\n')


def _cpp_std() -> str:
    from torch.utils import cpp_extension as ce

    try:
        return "-std=c++20" if "-std=c++20" in inspect.getsource(ce) else "-std=c++17"
    except (OSError, TypeError):
        return "-std=c++17"


def _paths(kind: str) -> list[str]:
    from torch.utils import cpp_extension as ce

    fn = ce.include_paths if kind == "include" else ce.library_paths
    try:
        return list(fn(device_type="cuda"))
    except TypeError:
        return list(fn(cuda=True))  # older torch


def _arch_flags() -> list[str]:
    out = []
    for item in os.environ.get("TORCH_CUDA_ARCH_LIST", "9.0").replace(";", " ").split():
        ptx = item.endswith("+PTX")
        num = item.replace("+PTX", "").replace(".", "")
        out.append(f"-gencode=arch=compute_{num},code=sm_{num}")
        if ptx:
            out.append(f"-gencode=arch=compute_{num},code=compute_{num}")
    return out


def _lock_dir(path: Path) -> Any:
    path.mkdir(parents=True, exist_ok=True)
    fh = open(path / ".lock", "w")  # noqa: SIM115 - released by the caller
    fcntl.flock(fh, fcntl.LOCK_EX)
    return fh


def _box_cache() -> Path:
    """Where what is built once per box lives (the trampoline, the precompiled host prelude)."""
    return Path(os.environ.get("KERNELSKILL_HARNESS_CUBIN_CACHE", Path.home() / ".cache" / "kernelskill")).parent


_TRAMPOLINE: Any = None


def trampoline() -> Any:
    """The shared pybind module (built once per box and torch version, cached)."""
    global _TRAMPOLINE
    if _TRAMPOLINE is not None:
        return _TRAMPOLINE
    import torch
    from torch.utils import cpp_extension as ce

    root = Path(os.environ.get("KERNELSKILL_HARNESS_TRAMPOLINE_DIR") or _box_cache() / "trampoline")
    tag = hashlib.sha256((TRAMPOLINE_SRC + torch.__version__ + TRAMPOLINE_VERSION).encode()).hexdigest()[:12]
    folder = root / tag
    name = f"ks_trampoline_{tag}"
    built = folder / f"{name}.so"
    if built.is_file():  # load it directly: load_inline would hash, write and run ninja first (~1 s)
        spec = importlib.util.spec_from_file_location(name, built)
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            _TRAMPOLINE = module
            return _TRAMPOLINE
    lock = _lock_dir(folder)
    try:
        original = getattr(ce.load_inline, "_ks_original", ce.load_inline)
        _TRAMPOLINE = original(name=name, cpp_sources=[TRAMPOLINE_SRC], build_directory=str(folder), verbose=False)
    finally:
        lock.close()
    return _TRAMPOLINE


def build_fast(params: dict[str, Any], ext_root: Path) -> tuple[Any, dict[str, Any]]:
    """Build a load_inline call's CUDA source as one shared library; return (module, info)."""
    functions = params.get("functions")
    if not functions:
        raise NotEligible("no functions= (the candidate writes its own bindings)")
    names = list(functions) if not isinstance(functions, str) else [functions]
    cpp = params.get("cpp_sources") or []
    cpp = [cpp] if isinstance(cpp, str) else list(cpp)
    cuda = params.get("cuda_sources") or []
    cuda = [cuda] if isinstance(cuda, str) else list(cuda)
    if not cuda:
        raise NotEligible("no CUDA sources")
    for src in cpp:
        body = re.sub(r"//[^\n]*|/\*.*?\*/", "", src, flags=re.S)
        if "{" in body or "PYBIND11" in body:
            raise NotEligible("cpp_sources hold code, not only declarations")
    if params.get("extra_cflags") or params.get("with_cuda") is False:
        raise NotEligible("extra host flags")
    light = [light_cuda_source(s) for s in cuda]
    if any(s is None for s in light):
        raise NotEligible("the CUDA source needs the full torch headers")
    sigs = {n: parse_signature(n, cpp + cuda) for n in names}
    unit = "\n".join(s for s in light if s) + "\n#include <cstring>\n#include <vector>\n" + "".join(
        wrapper_source(n, k, r, p) for n, (k, r, p, _ret) in sigs.items())
    import torch

    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))
    from torch.utils import cpp_extension as ce

    # -O1 is the host compiler's level (the glue around the kernels); device code is optimised by cicc and
    # ptxas at their own defaults (-O3) whatever this says. gcc at -O3 on the torch headers is a third of
    # the build.
    flags = [_cpp_std(), "-O1", "-shared", "-Xcompiler", "-fPIC", *ce.COMMON_NVCC_FLAGS, *_arch_flags(),
             f"-D_GLIBCXX_USE_CXX11_ABI={abi}", f"-DTORCH_EXTENSION_NAME={params['name']}",
             *[f"-I{p}" for p in _paths("include")], *[f"-I{p}" for p in params.get("extra_include_paths") or []],
             *list(params.get("extra_cuda_cflags") or [])]
    libdirs = _paths("library")
    cuda_home = ce.CUDA_HOME or "/usr/local/cuda"
    libdirs.append(os.path.join(cuda_home, "lib64"))
    libs = [f"-l{n}" for n in ("c10", "c10_cuda", "torch_cpu", "torch_cuda", "torch")
            if any(Path(d, f"lib{n}.so").exists() for d in libdirs)]
    ldflags = [f"-L{p}" for p in libdirs] + [f"-Xlinker=-rpath,{p}" for p in libdirs] + [
        *libs, "-lcudart", *list(params.get("extra_ldflags") or [])]
    key = hashlib.sha256("\0".join([unit, *flags, *ldflags]).encode()).hexdigest()[:16]
    folder = ext_root / f"{params['name']}_fast_{key}"
    lib = folder / "lib.so"
    phases: dict[str, Any] = {}
    info: dict[str, Any] = {"route": "fast", "cached": lib.is_file(), "phases": phases}
    start = time.perf_counter()
    lock = _lock_dir(folder)
    try:
        if not lib.is_file():
            (folder / "unit.cu").write_text(unit)
            nvcc = os.path.join(cuda_home, "bin", "nvcc")
            if not os.path.isfile(nvcc):
                nvcc = "nvcc"
            cmd = [nvcc, str(folder / "unit.cu"), "-o", str(folder / "lib.tmp.so"), *flags, *ldflags]
            proc = run_nvcc(cmd, folder, phases)
            if proc.returncode != 0:
                from .results import trim_log

                raise CandidateBuildError(f"nvcc failed for {params['name']}",
                                          trim_log((proc.stdout + proc.stderr).replace(str(folder) + "/", "")))
            os.replace(folder / "lib.tmp.so", lib)
    finally:
        lock.close()
    info["compile_s"] = round(time.perf_counter() - start, 3)
    handle = ctypes.CDLL(str(lib), mode=ctypes.RTLD_LOCAL)
    tramp = trampoline()
    module = types.ModuleType(params["name"])
    for n, (kinds, rk, _p, _r) in sigs.items():
        addr = ctypes.cast(getattr(handle, f"ks_wrap_{n}"), ctypes.c_void_p).value
        setattr(module, n, _caller(tramp.call, addr, kinds, rk, n))
    module._ks_handle = handle  # type: ignore[attr-defined]  # keep the library loaded
    info["seconds"] = round(time.perf_counter() - start, 3)
    return module, info


SERIAL_ENV = "KERNELSKILL_HARNESS_NVCC_SERIAL"


def run_nvcc(cmd: list[str], folder: Path, phases: dict[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
    """Run one nvcc compile-and-link with its host half and its device half side by side.

    nvcc runs its passes one after the other: the host preprocessor and ``cudafe++`` (which parse the
    whole unit), then the device preprocessor, ``cicc`` (which parses it again), ``ptxas`` and
    ``fatbinary``, then the host compile and the link. The two middle chains do not depend on each other,
    so this runs the steps ``nvcc -dryrun`` lists for the same command, the two chains at once (about a
    third less wall time for a torch-including unit), and the host compile includes the prelude part of
    the unit precompiled (``host_pch``; ``KERNELSKILL_HARNESS_NO_HOST_PCH=1`` turns that off). Any
    surprise in the listing, or ``KERNELSKILL_HARNESS_NVCC_SERIAL=1``, runs the plain command (through
    ccache when there is one). ``phases``, when given, receives the seconds of each part.
    """
    phases = {} if phases is None else phases
    if not os.environ.get(SERIAL_ENV):
        plan = split_dryrun(cmd)
        if plan is not None:
            done = _run_plan(plan, folder, phases)
            if done is not None:
                return done
    wrapper = [shutil.which("ccache")] if shutil.which("ccache") and not os.environ.get(
        "TORCH_NO_COMPILER_WRAPPER") else []
    start = time.perf_counter()
    done = subprocess.run([*wrapper, *cmd], capture_output=True, text=True, timeout=900)
    phases["plain_nvcc_s"] = round(time.perf_counter() - start, 3)
    return done


def split_dryrun(cmd: list[str]) -> tuple[list[str], list[str], list[str], list[str]] | None:
    """(variable lines, host chain, device chain, the rest) of ``nvcc -dryrun``, or None if unexpected."""
    try:
        dry = subprocess.run([*cmd, "-dryrun"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [ln[3:] for ln in (dry.stdout + dry.stderr).splitlines() if ln.startswith("#$ ")]
    if dry.returncode != 0 or not lines:
        return None
    n_vars = 0
    while n_vars < len(lines) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", lines[n_vars]):
        n_vars += 1
    steps = lines[n_vars:]
    tools = [step.split()[0].strip('"').rsplit("/", 1)[-1] for step in steps]
    try:
        i_cudafe = tools.index("cudafe++")
        i_fatbin = tools.index("fatbinary")
    except ValueError:
        return None
    end = i_fatbin + 1 + (1 if i_fatbin + 1 < len(tools) and tools[i_fatbin + 1] == "rm" else 0)
    host, device, rest = steps[:i_cudafe + 1], steps[i_cudafe + 1:end], steps[end:]
    # cicc reads the module id that cudafe++ writes; it is a hash of the source, so cicc makes its own
    device = [re.sub(r'--module_id_file_name "([^"]+)"', r'--gen_module_id_file --module_id_file_name "\1.dev"', step)
              if "cicc" in step.split()[0] else step for step in device]
    if not (len(host) == 2 and tools[0] in ("gcc", "g++", "cc", "c++") and "cicc" in " ".join(device)
            and "-D__CUDA_ARCH__=" not in host[0] and "-D__CUDA_ARCH__=" in device[0]):
        return None
    device, rest = ([f"rm -f {step[3:]}" if step.startswith("rm ") else step for step in part] for part in (device, rest))
    return lines[:n_vars], host, device, rest


def script_head(variables: list[str]) -> str:
    """The start of a bash script that runs steps of an ``nvcc -dryrun`` listing: its variables, exported."""
    exports = []
    for line in variables:  # NAME=VALUE lines only (a line such as `A="x" "y"` is nvcc's note, not shell)
        words = shlex.split(line)
        if len(words) == 1 and "=" in words[0]:
            name, value = words[0].split("=", 1)
            exports.append(f"export {name}={shlex.quote(value)}")
    return "set -e\n" + "\n".join(exports) + "\n"


NVCC_TEMP_RE = re.compile(r'"((?:/[^"\s]*)?/tmpxft_[^"\s/]+)"')


def _run_plan(plan: tuple[list[str], list[str], list[str], list[str]], folder: Path,
              phases: dict[str, Any]) -> subprocess.CompletedProcess[str] | None:
    """Run the plan; nvcc's temporary files (which its own run would delete) are deleted after it."""
    temps = {Path(p) for p in NVCC_TEMP_RE.findall("\n".join(plan[1] + plan[2] + plan[3]))}
    try:
        return _run_steps(plan, folder, phases)
    finally:
        for path in temps:
            with contextlib.suppress(OSError):
                path.unlink()


def _run_steps(plan: tuple[list[str], list[str], list[str], list[str]], folder: Path,
               phases: dict[str, Any]) -> subprocess.CompletedProcess[str] | None:
    variables, host, device, rest = plan
    head = script_head(variables)

    def start(steps: list[str], name: str) -> subprocess.Popen[str]:
        script = folder / f"nvcc_{name}.sh"
        script.write_text(head + "\n".join(steps) + "\n")
        return subprocess.Popen(["bash", str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def finish(proc: subprocess.Popen[str], began: float) -> tuple[str, float]:
        return proc.communicate(timeout=900)[0], round(time.perf_counter() - began, 3)

    began = time.perf_counter()
    procs = [start(host, "host"), start(device, "device")]
    with ThreadPoolExecutor(2) as pool:  # each chain's own duration (they end in either order)
        (host_out, phases["host_chain_s"]), (dev_out, phases["device_chain_s"]) = pool.map(
            finish, procs, [began, began])
    log = host_out + dev_out
    if any(p.returncode for p in procs):
        return subprocess.CompletedProcess(["nvcc"], 1, log, "")
    ids = re.findall(r'--module_id_file_name "([^"]+)\.dev"', "\n".join(device))
    try:
        same = bool(ids) and all(Path(i).read_bytes() == Path(i + ".dev").read_bytes() for i in ids)
    except OSError:
        same = False
    if not same:  # the two halves would not name the module alike: the plain command instead
        return None
    prelude = None
    if not os.environ.get(NO_HOST_PCH_ENV) and rest:
        prelude = HostPrelude.find(host[-1], rest[0], Path(os.environ.get(HOST_PCH_DIR_ENV)
                                                           or _box_cache() / "host_pch"))
    phases["host_pch"] = "off" if prelude is None else "used" if prelude.usable() else "created"
    original = None
    if prelude is not None and prelude.usable():
        try:
            original = prelude.rewrite()
        except OSError:
            phases["host_pch"] = "off"
    if prelude is not None and original is not None:
        began = time.perf_counter()
        out, phases["host_compile_s"] = finish(proc := start([rest[0]], "host_compile"), began)
        if proc.returncode == 0:
            log += out
            rest = rest[1:]
        else:  # compiled below as cudafe++ wrote it, which says what is wrong if anything is
            prelude.restore(original)
            phases["host_pch"] = "failed"
            _log.info("host compile with the precompiled prelude failed, compiling without: %s", out[-3000:])
    creating = prelude.start_creating(start) if prelude is not None and not prelude.usable() else None
    if creating is None and phases["host_pch"] == "created":
        phases["host_pch"] = "not_ready"  # another build is precompiling it, or it could not be precompiled
    began = time.perf_counter()
    out, phases["rest_s"] = finish(last := start(rest, "link"), began)
    if creating is not None:
        phases["host_pch"] = "created" if creating.finish() else "create_failed"
        phases["host_pch_create_s"] = round(time.perf_counter() - began, 3)
    return subprocess.CompletedProcess(["nvcc"], last.returncode, log + out, "")


def _caller(call: Any, addr: int, kinds: str, ret: str, name: str) -> Any:
    def fn(*args: Any) -> Any:
        if len(args) != len(kinds):
            raise TypeError(f"{name}() takes {len(kinds)} arguments ({len(args)} given)")
        return call(addr, kinds, ret, list(args))

    fn.__name__ = name
    return fn
