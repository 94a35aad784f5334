"""A precompiled header for the host compile of a fast-route ``load_inline`` unit.

After ``cudafe++`` has split a unit, the host compiler compiles its output (``*.cudafe1.cpp``): the whole
prelude (``ATen/core/Tensor.h``, the c10 basics, the CUDA runtime headers), already preprocessed and
rewritten by ``cudafe++``, then the candidate's own code. gcc spends nearly all of that step parsing the
prelude part, which is the same text for every candidate built with the same prelude and flags.

:class:`HostPrelude` cuts that output where the candidate's own file starts (the first line marker that
returns to the unit after its ``#include`` lines), keeps the part before it as a header in a cache (beside the trampoline)
keyed by its text, the compile flags and the compiler, and has gcc precompile it once (``.gch``). Later
units whose prelude part is the same text include that header instead, and gcc loads the ``.gch``.

It cannot change what is compiled: the header is the unit's own text (the one name that differs, the
unit's anonymous-namespace id, is made the same in every copy); if gcc finds the ``.gch`` unusable it reads
the header's text; if the compile with the header fails, the caller compiles the untouched unit.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

HOST_PCH_VERSION = "1"
NO_HOST_PCH_ENV = "KERNELSKILL_HARNESS_NO_HOST_PCH"
HOST_PCH_DIR_ENV = "KERNELSKILL_HARNESS_HOST_PCH_DIR"
#: below this the prelude part is not worth a header (a unit without the torch prelude)
MIN_PRELUDE_CHARS = 200_000
_GCC_LIKE = ("gcc", "g++", "c++")
_OUT_RE = re.compile(r'(\s-o\s+)"([^"]+)"')
#: the name every copy of the prelude gives the unit's anonymous namespaces
_SHARED_ID = "_ks_host_prelude"


def _alias(scope: str, module_id: str) -> str:
    """``namespace <unit's anonymous name> = <shared name>;`` inside ``scope`` (``::a::b``, or "" for global)."""
    names = [n for n in scope.split("::") if n]
    return ("".join(f"namespace {n} {{ " for n in names) + f"namespace _GLOBAL__N_{module_id} = _GLOBAL__N_{_SHARED_ID}; "
            + "} " * len(names) + "\n")


def _arg(step: str, option: str) -> str | None:
    m = re.search(re.escape(option) + r'\s+"([^"]+)"', step)
    return m.group(1) if m else None


def _compiler_id(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        return tool
    st = os.stat(os.path.realpath(path))
    return f"{os.path.realpath(path)}:{st.st_size}:{st.st_mtime_ns}"


@dataclass
class HostPrelude:
    """The host unit of one build, cut into its prelude part (shared, precompiled) and the rest."""

    source: Path  #: cudafe++'s host output, compiled by ``compile_step``
    compile_step: str
    first_line: str
    prelude: str
    body: str
    folder: Path  #: the per-box cache folder of this prelude (its key)

    @property
    def header(self) -> Path:
        return self.folder / "prelude.h"

    @property
    def gch(self) -> Path:
        return self.folder / "prelude.h.gch"

    @classmethod
    def find(cls, cudafe_step: str, compile_step: str, root: Path) -> HostPrelude | None:
        """The cut of this build's host unit, or None when the nvcc listing or the unit is not as expected."""
        source, unit = _arg(cudafe_step, "--gen_c_file_name"), _arg(cudafe_step, "--orig_src_file_name")
        module_id_file = _arg(cudafe_step, "--module_id_file_name")
        tool = compile_step.split()[0].strip('"').rsplit("/", 1)[-1]
        if (source is None or unit is None or tool not in _GCC_LIKE or f'"{source}"' not in compile_step
                or " -c " not in f" {compile_step} " or " -x c++ " not in compile_step
                or len(_OUT_RE.findall(compile_step)) != 1):
            return None
        try:
            text = Path(source).read_text(encoding="utf-8")
            module_id = Path(module_id_file).read_text(encoding="utf-8").strip() if module_id_file else ""
        except (OSError, UnicodeDecodeError):
            return None
        first, _, rest = text.partition("\n")
        marker = re.compile(r'^#\s*\d+\s+"' + re.escape(unit) + '"', re.M)
        m = marker.search(rest)
        if not marker.match(first) or m is None or m.start() < MIN_PRELUDE_CHARS:
            return None
        prelude, body = rest[:m.start()], rest[m.start():]
        aliases = []
        if module_id:  # the unit's anonymous-namespace name: the one thing in the prelude part that is per unit
            scopes = sorted(set(re.findall(r"using namespace ((?:::\w+)*)::_GLOBAL__N_" + re.escape(module_id) + ";",
                                           prelude)))
            prelude = prelude.replace(module_id, _SHARED_ID)
            # the unit's stub names those namespaces with its own id: the same namespaces, under that name
            aliases = [_alias(scope, module_id) for scope in scopes]
        flags = _OUT_RE.sub(" ", compile_step.replace(f'"{source}"', " "))
        key = hashlib.sha256("\0".join([HOST_PCH_VERSION, prelude, " ".join(flags.split()),
                                        _compiler_id(tool)]).encode()).hexdigest()[:16]
        return cls(Path(source), compile_step, first, prelude, "".join(aliases) + body, root / key)

    def usable(self) -> bool:
        return self.gch.is_file() and self.header.is_file()

    def rewrite(self) -> str:
        """Make the host unit include the precompiled prelude; returns the original text for :meth:`restore`."""
        original = self.source.read_text(encoding="utf-8")
        tmp = self.source.with_name(self.source.name + ".ks.tmp")
        tmp.write_text(f'{self.first_line}\n#include "{self.header}"\n{self.body}', encoding="utf-8")
        os.replace(tmp, self.source)  # the unit stays whole if the write fails
        return original

    def restore(self, original: str) -> None:
        self.source.write_text(original, encoding="utf-8")

    def start_creating(self, start: Callable[[list[str], str], subprocess.Popen[str]]) -> PreludeBuild | None:
        """Start precompiling this prelude (next to the build's own host compile); None if another build is."""
        try:
            if (self.folder / "failed").exists():
                return None
            self.folder.mkdir(parents=True, exist_ok=True)
            lock = open(self.folder / ".lock", "w")  # noqa: SIM115 - released by PreludeBuild.finish
        except OSError:  # a read-only or full cache: build without
            return None
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if self.usable():
                lock.close()
                return None
            tmp_header = self.folder / f"prelude.h.{os.getpid()}.tmp"
            tmp_header.write_text(self.prelude, encoding="utf-8")
            os.replace(tmp_header, self.header)
        except OSError:  # another build holds the lock, or the cache is full
            lock.close()
            return None
        tmp_gch = self.folder / f"prelude.h.gch.{os.getpid()}.tmp"
        step = _OUT_RE.sub(lambda m: f'{m.group(1)}"{tmp_gch}"',
                           self.compile_step.replace(f'"{self.source}"', f'"{self.header}"')
                           .replace(" -x c++ ", " -x c++-header "))
        return PreludeBuild(self, start([step], "host_pch"), tmp_gch, lock)


@dataclass
class PreludeBuild:
    prelude: HostPrelude
    proc: subprocess.Popen[str]
    tmp: Path
    lock: Any

    def finish(self) -> bool:
        """Wait for gcc; publish the ``.gch`` (or mark this prelude as not precompilable). True if published."""
        try:
            try:
                out = self.proc.communicate(timeout=900)[0]
            except subprocess.TimeoutExpired:
                self.proc.kill()
                out = self.proc.communicate()[0]
            if self.proc.returncode == 0 and self.tmp.is_file():
                os.replace(self.tmp, self.prelude.gch)
                return True
            log.warning("precompiling the host prelude failed (rc %s): %s", self.proc.returncode, out[-2000:])
            (self.prelude.folder / "failed").write_text(out[-20000:], encoding="utf-8")
            return False
        finally:
            with contextlib.suppress(OSError):
                self.tmp.unlink()
            self.lock.close()
