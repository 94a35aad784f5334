"""The fast path: CUDA kernels compiled to a cubin (``nvcc -cubin`` or NVRTC) and launched on torch
tensors through the CUDA driver API (ctypes on ``libcuda``), with no C++ extension to build.

A build is about 0.4 s instead of the 25-60 s of ``load_inline`` (docs/evaluation.md). The
candidate format is described in ``FASTPATH.md`` next to this file. Torch + standard library only.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

CACHE_ENV = "KERNELSKILL_HARNESS_CUBIN_CACHE"
ARCH_ENV = "KERNELSKILL_HARNESS_ARCH"

_ARG_TYPES: dict[str, Any] = {
    "ptr": ctypes.c_void_p, "i32": ctypes.c_int32, "u32": ctypes.c_uint32, "i64": ctypes.c_int64,
    "u64": ctypes.c_uint64, "f32": ctypes.c_float, "f64": ctypes.c_double,
}
_ALIASES = {"int": "i32", "int32": "i32", "unsigned": "u32", "uint32": "u32", "long": "i64",
            "int64": "i64", "size_t": "u64", "uint64": "u64", "float": "f32", "double": "f64",
            "pointer": "ptr", "tensor": "ptr"}

#: build statistics of this process: (backend, seconds, cached) per compiled module
BUILD_STATS: list[dict[str, Any]] = []


class FastPathCompileError(RuntimeError):
    """The kernel source did not compile; ``log`` holds the compiler output."""

    def __init__(self, message: str, log_text: str) -> None:
        super().__init__(f"{message}\n{log_text}")
        self.log = log_text


class CudaDriverError(RuntimeError):
    pass


def default_arch() -> str:
    """``sm_XY`` from KERNELSKILL_HARNESS_ARCH, TORCH_CUDA_ARCH_LIST, or sm_90."""
    arch = os.environ.get(ARCH_ENV)
    if arch:
        return arch
    lst = os.environ.get("TORCH_CUDA_ARCH_LIST", "").replace(";", " ").split()
    if lst:
        last = lst[-1].replace("+PTX", "")
        major, _, minor = last.partition(".")
        if major.isdigit():
            return f"sm_{major}{minor or '0'}"
    return "sm_90"


def cache_root() -> Path:
    root = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "kernelskill" / "cubin")
    root.mkdir(parents=True, exist_ok=True)
    return root


def find_nvcc() -> str | None:
    for cand in (os.environ.get("NVCC"), shutil.which("nvcc"),
                 os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def _find_nvrtc() -> str | None:
    pats = [os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "lib64", "libnvrtc.so*")]
    try:
        import torch

        site = Path(torch.__file__).resolve().parents[1]
        pats += [str(site / "nvidia" / "*" / "lib" / "libnvrtc.so*"),
                 str(site / "nvidia" / "*" / "*" / "lib" / "libnvrtc.so*")]
    except ImportError:  # pragma: no cover
        pass
    for pat in pats:
        for path in sorted(glob.glob(pat)):
            if "builtins" not in path and "alt" not in os.path.basename(path):
                return path
    return ctypes.util.find_library("nvrtc")


def compile_cubin(source: str, *, arch: str | None = None, options: Sequence[str] = (),
                  backend: str = "auto", name: str = "kernel") -> tuple[bytes, dict[str, Any]]:
    """Compile CUDA C++ to a cubin, cached by (source, arch, options, backend)."""
    arch = arch or default_arch()
    nvcc = find_nvcc() if backend in ("auto", "nvcc") else None
    chosen = "nvcc" if nvcc else "nvrtc"
    if backend == "nvcc" and not nvcc:
        raise FastPathCompileError("nvcc not found", "")
    key = hashlib.sha256("\0".join([source, arch, chosen, *options]).encode()).hexdigest()[:32]
    path = cache_root() / f"{key}.cubin"
    start = time.perf_counter()
    if path.is_file():
        data = path.read_bytes()
        info = {"backend": chosen, "seconds": time.perf_counter() - start, "cached": True, "key": key}
        BUILD_STATS.append(info)
        return data, info
    if chosen == "nvcc":
        data = _compile_nvcc(nvcc or "nvcc", source, arch, options, name)
    else:
        data = _compile_nvrtc(source, arch, options, name)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    info = {"backend": chosen, "seconds": time.perf_counter() - start, "cached": False, "key": key}
    BUILD_STATS.append(info)
    log.debug("fastpath: %s built %s in %.2fs", chosen, name, info["seconds"])
    return data, info


def _compile_nvcc(nvcc: str, source: str, arch: str, options: Sequence[str], name: str) -> bytes:
    with tempfile.TemporaryDirectory(prefix="ks-cubin-") as tmp:
        src = Path(tmp) / f"{name}.cu"
        out = Path(tmp) / f"{name}.cubin"
        src.write_text(source)
        cmd = [nvcc, "-cubin", f"-arch={arch}", "-O3", "-std=c++17", *options, "-o", str(out), str(src)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0 or not out.is_file():
            text = (proc.stdout + proc.stderr).replace(str(src.parent) + "/", "").strip()
            raise FastPathCompileError(f"nvcc -cubin failed for {name}", text)
        return out.read_bytes()


def _compile_nvrtc(source: str, arch: str, options: Sequence[str], name: str) -> bytes:
    lib_path = _find_nvrtc()
    if not lib_path:
        raise FastPathCompileError("neither nvcc nor libnvrtc was found", "")
    lib = ctypes.CDLL(lib_path)
    prog = ctypes.c_void_p()
    rc = lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), f"{name}.cu".encode(), 0, None, None)
    if rc != 0:
        raise FastPathCompileError(f"nvrtcCreateProgram failed ({rc})", "")
    try:
        opts = [f"--gpu-architecture={arch}", "-std=c++17", *options]
        arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, buf)
        text = buf.value.decode("utf-8", "replace")
        if rc != 0:
            raise FastPathCompileError(f"NVRTC failed for {name}", text.strip())
        lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
        cubin = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetCUBIN(prog, cubin)
        return cubin.raw
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


class _Driver:
    """The few driver entry points the fast path needs, loaded once per process."""

    _lock = threading.Lock()
    _lib: ctypes.CDLL | None = None

    @classmethod
    def lib(cls) -> ctypes.CDLL:
        with cls._lock:
            if cls._lib is None:
                lib = ctypes.CDLL("libcuda.so.1")
                lib.cuLaunchKernel.argtypes = [
                    ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
                    ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p,
                    ctypes.c_void_p]
                cls._check(lib, lib.cuInit(0), "cuInit")
                cls._lib = lib
            return cls._lib

    @staticmethod
    def _check(lib: ctypes.CDLL, rc: int, what: str) -> None:
        if rc != 0:
            name = ctypes.c_char_p()
            lib.cuGetErrorName(rc, ctypes.byref(name))
            raise CudaDriverError(f"{what} failed: CUDA error {rc} ({(name.value or b'?').decode()})")

    @classmethod
    def check(cls, rc: int, what: str) -> None:
        cls._check(cls.lib(), rc, what)


#: device -> torch's primary context handle (what must be current on a thread that launches)
_PRIMARY: dict[int, int] = {}


def _ensure_context(device: int) -> None:
    """Make torch's primary context of ``device`` current on the calling thread."""
    import torch

    torch.cuda.init()
    with torch.cuda.device(device):
        torch.cuda.current_stream(device).synchronize()  # the runtime makes the primary context current
    lib = _Driver.lib()
    ctx = ctypes.c_void_p()
    _Driver.check(lib.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
    if not ctx.value:
        _Driver.check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), device), "cuDevicePrimaryCtxRetain")
        _Driver.check(lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    _PRIMARY[device] = ctx.value or 0


def _current_context_is(device: int) -> bool:
    ctx = ctypes.c_void_p()
    (_Driver._lib or _Driver.lib()).cuCtxGetCurrent(ctypes.byref(ctx))
    return bool(ctx.value) and ctx.value == _PRIMARY.get(device)


class CudaModule:
    """Kernels of one CUDA source, compiled now (cached) and loaded on first launch per device.

    Declare kernels ``extern "C" __global__`` so that their names are not mangled.
    """

    def __init__(self, source: str, *, name: str = "fastpath", arch: str | None = None,
                 options: Sequence[str] = (), backend: str = "auto") -> None:
        self.source = source
        self.name = name
        self.cubin, self.build_info = compile_cubin(source, arch=arch, options=options, backend=backend,
                                                    name=name)
        self._modules: dict[int, ctypes.c_void_p] = {}
        self._lock = threading.Lock()

    def module_handle(self, device: int) -> ctypes.c_void_p:
        with self._lock:
            if device not in self._modules:
                _ensure_context(device)
                handle = ctypes.c_void_p()
                _Driver.check(_Driver.lib().cuModuleLoadData(ctypes.byref(handle), self.cubin),
                              f"cuModuleLoadData({self.name})")
                self._modules[device] = handle
            return self._modules[device]

    def kernel(self, name: str, signature: str | Sequence[str] | None = None) -> CudaKernel:
        return CudaKernel(self, name, signature)


class CudaKernel:
    """One ``extern "C" __global__`` function; call it with grid, block and the argument list."""

    def __init__(self, module: CudaModule, name: str, signature: str | Sequence[str] | None) -> None:
        self.module = module
        self.name = name
        if isinstance(signature, str):
            signature = [s for s in (p.strip() for p in signature.split(",")) if s]
        self.signature = [_ALIASES.get(s, s) for s in signature] if signature is not None else None
        for s in self.signature or []:
            if s not in _ARG_TYPES:
                raise ValueError(f"kernel {name}: unknown argument type {s!r} "
                                 f"(use one of {', '.join(_ARG_TYPES)})")
        self._funcs: dict[int, ctypes.c_void_p] = {}
        self._smem_set: dict[int, int] = {}

    def _func(self, device: int) -> ctypes.c_void_p:
        if device not in self._funcs:
            fn = ctypes.c_void_p()
            _Driver.check(_Driver.lib().cuModuleGetFunction(
                ctypes.byref(fn), self.module.module_handle(device), self.name.encode()),
                f"cuModuleGetFunction({self.name})")
            self._funcs[device] = fn
        return self._funcs[device]

    def _convert(self, args: Sequence[Any]) -> tuple[list[Any], int | None]:
        """ctypes values for ``args`` and the device of the first tensor argument."""
        import torch

        sig = self.signature
        if sig is not None and len(args) != len(sig):
            raise TypeError(f"kernel {self.name}: {len(args)} arguments given, signature has {len(sig)}")
        out: list[Any] = []
        device: int | None = None
        for i, arg in enumerate(args):
            kind = sig[i] if sig is not None else None
            if isinstance(arg, torch.Tensor):
                dev = arg.get_device()
                if dev < 0:
                    raise TypeError(f"kernel {self.name}: argument {i} is a CPU tensor")
                if kind is not None and kind != "ptr":
                    raise TypeError(f"kernel {self.name}: argument {i} is a tensor, signature says {kind}")
                if device is None:
                    device = dev
                out.append(ctypes.c_void_p(arg.data_ptr()))
            elif isinstance(arg, bool | int):
                kind = kind or "i32"
                if kind == "ptr":
                    out.append(ctypes.c_void_p(int(arg)))
                elif kind in ("f32", "f64"):
                    out.append(_ARG_TYPES[kind](float(arg)))
                elif kind == "i32" and not -(2**31) <= int(arg) < 2**31:
                    raise OverflowError(f"kernel {self.name}: argument {i}={arg} does not fit i32; "
                                        "declare it i64 in the signature")
                else:
                    out.append(_ARG_TYPES[kind](int(arg)))
            elif isinstance(arg, float):
                if kind not in (None, "f32", "f64"):
                    raise TypeError(f"kernel {self.name}: argument {i} is a float, signature says {kind}")
                out.append(_ARG_TYPES[kind or "f32"](arg))
            else:
                raise TypeError(f"kernel {self.name}: argument {i} has unsupported type {type(arg).__name__}")
        return out, device

    def __call__(self, grid: int | Sequence[int], block: int | Sequence[int], args: Sequence[Any] = (),
                 shared_mem: int = 0, stream: Any = None) -> None:
        import torch

        values, device = self._convert(args)
        if device is None:
            device = torch.cuda.current_device()
        g = grid if type(grid) is tuple and len(grid) == 3 else _dim3(grid)
        b = block if type(block) is tuple and len(block) == 3 else _dim3(block)
        fn = self._funcs.get(device) or self._func(device)
        if not _current_context_is(device):  # a launch from another thread, or after a device switch
            _ensure_context(device)
        if shared_mem > 48 * 1024 and self._smem_set.get(device, 0) < shared_mem:
            # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
            _Driver.check(_Driver.lib().cuFuncSetAttribute(fn, 8, int(shared_mem)), "cuFuncSetAttribute")
            self._smem_set[device] = shared_mem
        params = (ctypes.c_void_p * max(1, len(values)))(*[ctypes.addressof(v) for v in values])
        if stream is None:
            handle = _RAW_STREAM(device) if _RAW_STREAM else torch.cuda.current_stream(device).cuda_stream
        else:
            handle = getattr(stream, "cuda_stream", stream)
        lib = _Driver._lib or _Driver.lib()
        rc = lib.cuLaunchKernel(fn, g[0], g[1], g[2], b[0], b[1], b[2], int(shared_mem), handle, params, None)
        if rc:
            _Driver.check(rc, f"cuLaunchKernel({self.name})")

    launch = __call__


def _raw_stream_fn() -> Any:
    try:
        import torch

        return getattr(torch._C, "_cuda_getCurrentRawStream", None)
    except ImportError:  # pragma: no cover
        return None


_RAW_STREAM = _raw_stream_fn()


def _dim3(value: int | Sequence[int]) -> tuple[int, int, int]:
    if isinstance(value, int):
        dims = [value]
    else:
        dims = [int(v) for v in value]
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise ValueError(f"bad launch dimension {value!r}")
    dims += [1] * (3 - len(dims))
    return dims[0], dims[1], dims[2]
