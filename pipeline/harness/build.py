"""Building candidates: a build folder per source hash, lighter headers, a build log for the repairer.

Inside a worker, :func:`install_build_hooks` replaces ``torch.utils.cpp_extension.load_inline`` (and
``load``) before the candidate is imported, so candidates need no change:

* the CUDA translation unit gets a light prelude (``ATen/core/Tensor.h`` plus the per-operator headers
  of the ``torch::``/``at::`` functions it names) instead of ``torch/extension.h``/``torch/types.h``;
  nvcc parsing the whole of ATen is most of a load_inline build (docs/evaluation.md);
* the host unit (``main.cpp``: pybind bindings) uses torch's precompiled ``torch/extension.h`` when
  that header has been precompiled on this box (:func:`prepare_pch`);
* if the light build fails, the build is retried the way ``load_inline`` would do it (with
  ``torch/types.h``), so a candidate never fails because of our rewrite.

Compile failures raise :class:`CandidateBuildError` carrying the trimmed log.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import os
import re
import time
from pathlib import Path
from typing import Any

from kernelskill.atomic_file import write_text_atomic

from .inline_fast import NotEligible, build_fast
from .prelude import HEAVY_INCLUDE_RE, NEEDS_FULL_RE, CandidateBuildError, light_cuda_source
from .results import trim_log

log = logging.getLogger(__name__)

BUILD_VERSION = "2"
NO_FAST_ENV = "KERNELSKILL_HARNESS_NO_FAST_INLINE"

#: every load_inline / load call of this process: name, route, seconds, ok
BUILD_EVENTS: list[dict[str, Any]] = []


def build_key(candidate_source: str, *, arch: str, fast_headers: bool, extra: str = "") -> str:
    """The cache key of a candidate's build: its source and everything that changes the binary."""
    try:
        import torch

        tv = torch.__version__
    except ImportError:  # pragma: no cover
        tv = "?"
    blob = "\0".join([BUILD_VERSION, candidate_source, arch, str(fast_headers), tv, extra])
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


#: the largest build record read (a record holds a trimmed log and the build events)
RECORD_LIMIT = 16 * 2**20


def _entry_files(folder: Path, parts: tuple[str, ...]) -> dict[str, str]:
    """``{relative path: sha256}`` of every plain file of the entry's parts (a link is listed as one)."""
    out: dict[str, str] = {}
    for part in parts:
        base = folder / part
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            rel = str(path.relative_to(folder))
            if path.is_symlink():
                out[rel] = "link:" + os.readlink(path)
            elif path.is_file():
                digest = hashlib.sha256()
                with open(path, "rb") as fh:
                    for chunk in iter(lambda fh=fh: fh.read(1 << 20), b""):
                        digest.update(chunk)
                out[rel] = digest.hexdigest()
            elif not path.is_dir():
                out[rel] = "special"
    return out


def _seal(record: dict[str, Any], files: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps({"record": record, "files": files}, sort_keys=True,
                                     default=str).encode()).hexdigest()


def write_record(path: Path, folder: Path, record: dict[str, Any], *, parts: tuple[str, ...]) -> None:
    """Write a build record (the parent does, never a worker) sealed with the hash of itself and of every
    file of the entry; atomically, so a reader sees the old record or the new one."""
    files = _entry_files(folder, parts)
    write_text_atomic(path, json.dumps({"record": record, "files": files, "sha256": _seal(record, files)},
                                       default=str), mode=0o644)


def read_record(path: Path, folder: Path, *, parts: tuple[str, ...],
                check_files: bool = True) -> tuple[dict[str, Any] | None, str]:
    """``(record, "")`` when the record and (with ``check_files``) the entry's files are as they were
    sealed; ``(None, why)`` when not (``why`` is empty when there is no record at all)."""
    try:
        if path.is_symlink() or not path.is_file():
            return None, "" if not os.path.lexists(path) else "the record is not a plain file"
        if path.stat().st_size > RECORD_LIMIT:
            return None, "the record is too large"
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        return None, f"the record does not load ({type(exc).__name__})"
    if not isinstance(data, dict) or not isinstance(data.get("record"), dict) \
            or not isinstance(data.get("files"), dict):
        return None, "the record has no sealed content (an old or a forged record)"
    record, files = data["record"], data["files"]
    if data.get("sha256") != _seal(record, files):
        return None, "the record does not match its hash"
    if check_files and _entry_files(folder, parts) != files:
        return None, "the entry's files differ from the ones the build left"
    return record, ""


def default_cache_root() -> Path:
    return Path(os.environ.get("KERNELSKILL_HARNESS_BUILD_CACHE")
                or Path.home() / ".cache" / "kernelskill" / "builds")


#: compiler diagnostics only: nvcc ``file(12): error: msg``, gcc ``file:12:3: error: msg``
_ERROR_LINE_RE = re.compile(r"(?:\(\d+\)|:\d+:\d+):\s*(?:fatal )?error:\s*(.*)")
_TORCH_NAME_RE = re.compile(r"\b(at|torch|c10|caffe2|pybind11|py)\b|\b(AT|C10|TORCH)_\w+|THC|cuBLAS|cublas")


def light_may_be_at_fault(log_text: str) -> bool:
    """Could the light prelude have caused this build failure (so the standard route may succeed)?

    Errors that name nothing of torch (a syntax error, an undefined identifier of the candidate's
    own) are the candidate's; anything naming at::/torch::/c10 names, an incomplete type, a missing
    member or a link/load failure may be ours.
    """
    lines = log_text.splitlines()
    errors = []
    for i, line in enumerate(lines):  # an error line and the two after it (nvcc puts operand types there)
        m = _ERROR_LINE_RE.search(line)
        if m:
            errors.append(" ".join([m.group(1), *lines[i + 1:i + 3]]))
    if not errors:
        return True
    for err in errors:
        if _TORCH_NAME_RE.search(err) or "incomplete type" in err or "has no member" in err \
                or "undefined symbol" in err or "ld returned" in err or "No such file" in err:
            return True
    return False


# --- precompiled header for main.cpp ------------------------------------------------------------
def pch_ready() -> bool:
    if os.environ.get("KERNELSKILL_HARNESS_NO_PCH"):
        return False
    try:
        from torch.utils import cpp_extension as ce

        header = Path(ce.include_paths()[0]) / "torch" / "extension.h"
        return Path(str(header) + ".gch").is_file()
    except Exception:  # noqa: BLE001
        return False


def prepare_pch() -> tuple[bool, str]:
    """Precompile torch/extension.h once on this box (torch's own mechanism). Returns (ok, message)."""
    try:
        from torch.utils import cpp_extension as ce

        fn = getattr(ce, "_check_and_build_extension_h_precompiler_headers", None)
        if fn is None:
            return False, "this torch has no precompiled-header support"
        start = time.perf_counter()
        fn([], [])
        return pch_ready(), f"precompiled torch/extension.h in {time.perf_counter() - start:.1f}s"
    except Exception as exc:  # noqa: BLE001 - read-only site-packages, missing g++ ...
        return False, f"no precompiled header: {exc}"


# --- hooks ---------------------------------------------------------------------------------------
def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return list(value)


def _error_text(exc: BaseException) -> str:
    text = str(exc)
    out = getattr(exc, "output", None)
    if isinstance(out, bytes | str):
        text += "\n" + (out.decode("utf-8", "replace") if isinstance(out, bytes) else out)
    return text


def install_build_hooks(*, fast_headers: bool = True) -> None:
    """Wrap load_inline / load in this process (the worker calls this before importing a candidate)."""
    from torch.utils import cpp_extension as ce

    if getattr(ce.load_inline, "_ks_wrapped", False):
        return
    original_inline = ce.load_inline
    # load_inline(use_pch=False) deletes torch's precompiled header; parallel builds share it
    ce.remove_extension_h_precompiler_headers = lambda: None
    original_load = ce.load
    sig = inspect.signature(original_inline)
    use_pch = pch_ready()

    ext_root = Path(os.environ.get("TORCH_EXTENSIONS_DIR") or Path.home() / ".cache" / "torch_extensions")

    def _failed_marker(name: str, route: str = "light") -> Path:
        return ext_root / f".{route}_failed_{name}"

    def _mark(name: str, route: str) -> None:
        try:
            ext_root.mkdir(parents=True, exist_ok=True)
            _failed_marker(name, route).touch()
        except OSError:
            pass

    def _fast(params: dict[str, Any]) -> Any:
        """The one-nvcc-call route of inline_fast; None when it does not apply or failed for our reasons."""

        name = params["name"]
        start = time.perf_counter()
        try:
            mod, info = build_fast(params, ext_root)
        except NotEligible as exc:
            BUILD_EVENTS.append({"name": name, "route": "fast", "ok": False, "skipped": str(exc)})
            return None
        except CandidateBuildError as exc:
            BUILD_EVENTS.append({"name": name, "route": "fast", "ok": False,
                                 "seconds": round(time.perf_counter() - start, 3), "log": trim_log(exc.log, 2000)})
            if not light_may_be_at_fault(exc.log):
                raise
            _mark(name, "fast")
            return None
        except Exception as exc:  # noqa: BLE001 - our route failed: the regular ones still work
            BUILD_EVENTS.append({"name": name, "route": "fast", "ok": False, "error": f"{type(exc).__name__}: {exc}"[:500],
                                 "seconds": round(time.perf_counter() - start, 3)})
            _mark(name, "fast")
            return None
        BUILD_EVENTS.append({"name": name, "route": "fast" + ("(cached)" if info.get("cached") else ""), "ok": True,
                             "seconds": info["seconds"], "compile_s": info.get("compile_s"),
                             "phases": info.get("phases") or None})
        return mod

    def load_inline(*args: Any, **kwargs: Any) -> Any:
        bound = sig.bind(*args, **kwargs)
        params = dict(bound.arguments)
        name = params["name"]
        cuda = _as_list(params.get("cuda_sources"))
        if (fast_headers and cuda and not params.get("no_implicit_headers") and not os.environ.get(NO_FAST_ENV)
                and not _failed_marker(name, "fast").exists()):
            mod = _fast(params)
            if mod is not None:
                return mod
        light_ok = (fast_headers and cuda and not params.get("no_implicit_headers")
                    and not _failed_marker(name).exists())
        light = [light_cuda_source(src) for src in cuda] if light_ok else []
        if light and all(s is not None for s in light):
            attempt = dict(params)
            attempt["name"] = f"{name}_l"
            attempt["cuda_sources"] = light
            attempt["cpp_sources"] = ["#include <torch/extension.h>", *_as_list(params.get("cpp_sources"))]
            attempt["no_implicit_headers"] = True
            attempt["verbose"] = False
            if use_pch and not params.get("extra_cflags") and not params.get("extra_include_paths"):
                attempt["use_pch"] = True
            start = time.perf_counter()
            try:
                mod = original_inline(**attempt)
                BUILD_EVENTS.append({"name": name, "route": "light" + ("+pch" if attempt.get("use_pch") else ""),
                                     "seconds": round(time.perf_counter() - start, 3), "ok": True})
                return mod
            except Exception as exc:  # noqa: BLE001 - fall back to the standard route
                text = _error_text(exc)
                BUILD_EVENTS.append({"name": name, "route": "light", "ok": False,
                                     "seconds": round(time.perf_counter() - start, 3),
                                     "log": trim_log(text, 2000)})
                if not light_may_be_at_fault(text):
                    # the errors are in the candidate's own code: the standard headers cannot fix them
                    raise CandidateBuildError(f"load_inline({name!r}) failed to build", trim_log(text)) from exc
                log.info("light build of %s failed, retrying with the standard headers", name)
                _mark(name, "light")
        std = dict(params)
        std["cuda_sources"] = [HEAVY_INCLUDE_RE.sub("#include <torch/types.h>", s)
                               if fast_headers and not NEEDS_FULL_RE.search(s) else s for s in cuda] or None
        std["verbose"] = False
        start = time.perf_counter()
        try:
            mod = original_inline(**std)
        except Exception as exc:  # noqa: BLE001
            BUILD_EVENTS.append({"name": name, "route": "standard", "ok": False,
                                 "seconds": round(time.perf_counter() - start, 3)})
            text = _error_text(exc)
            raise CandidateBuildError(f"load_inline({name!r}) failed to build", trim_log(text)) from exc
        BUILD_EVENTS.append({"name": name, "route": "standard", "ok": True,
                             "seconds": round(time.perf_counter() - start, 3)})
        return mod

    def load(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        name = kwargs.get("name", args[0] if args else "?")
        try:
            mod = original_load(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001
            BUILD_EVENTS.append({"name": name, "route": "load", "ok": False,
                                 "seconds": round(time.perf_counter() - start, 3)})
            raise CandidateBuildError(f"load({name!r}) failed to build", trim_log(_error_text(exc))) from exc
        BUILD_EVENTS.append({"name": name, "route": "load", "ok": True,
                             "seconds": round(time.perf_counter() - start, 3)})
        return mod

    load_inline._ks_wrapped = True  # type: ignore[attr-defined]
    load_inline._ks_original = original_inline  # type: ignore[attr-defined]
    load._ks_wrapped = True  # type: ignore[attr-defined]
    ce.load_inline = load_inline
    ce.load = load
