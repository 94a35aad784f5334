"""Does CUDA come up inside the harness's sandbox on this machine, and if not, which part of the sandbox
takes it away?

The first wave-3 trip to an H100 (Firecracker) found the evaluation worker without CUDA inside the
namespaces while its parent had it. This script answers where, in one short call on the device: it runs
the same small CUDA probe (the driver API through ctypes: ``cuInit`` and ``cuDeviceGetCount``, the device
nodes, the driver's proc files; optionally torch) in the parent and under the sandbox one layer at a time:

    parent                   no sandbox
    userns                   unshare --user --map-root-user
    unshare                  the sandbox's unshare flags, no launcher
    unshare-no-mount-proc    the same without --mount-proc
    launcher                 the real launcher and spec (read-only world, hidden folders, scratch tmpfs,
                             capabilities dropped)
    launcher-no-hide         the launcher with nothing hidden and no scratch tmpfs (as root, where the
                             sandbox's uid is 65534, it cannot reach an interpreter under /root: exit 127)
    launcher-no-readonly     the launcher without the read-only world
    launcher-keep-caps       the launcher without dropping capabilities / no_new_privs
    launcher-seccomp         the real launcher, and the probe installs the worker's seccomp filter first
    launcher-torch           the real launcher and the worker's environment: torch.cuda.is_available()

    python scripts/sandbox_cuda_probe.py [--json OUT] [--no-torch]

Standard library only (torch for the last variant); run it as the harness runs (same interpreter, same
PYTHONPATH). Prints one row per variant; ``--json`` writes every probe's full record.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from kernelskill.pipeline.harness import isolation, sandbox

#: the probe itself: a standalone program (python -I -S), one JSON line on stdout
PROBE = r'''
import ctypes, json, os, sys
out = {"uid": os.getuid(), "euid": os.geteuid()}
try:
    for line in open("/proc/self/status"):
        if line.startswith(("CapEff", "CapBnd", "NoNewPrivs", "Seccomp:")):
            k, v = line.split(":", 1); out[k] = v.strip()
except OSError as e:
    out["status"] = str(e)
if os.environ.get("PROBE_SECCOMP"):
    sys.path.insert(0, os.environ["PROBE_SECCOMP"])
    import isolation as iso
    out["seccomp_install"] = iso.deny_unix_sockets()
nodes = {}
try:
    names = sorted(n for n in os.listdir("/dev") if n.startswith("nvidia"))
except OSError as e:
    names = []; out["dev"] = str(e)
for n in names:
    p = "/dev/" + n
    if os.path.isdir(p):
        nodes[n] = "dir"; continue
    try:
        fd = os.open(p, os.O_RDWR); os.close(fd); nodes[n] = "rw ok"
    except OSError as e:
        nodes[n] = f"errno {e.errno} {e.strerror}"
out["dev_nvidia"] = nodes
try:
    with open("/proc/thread-self/comm", "w") as fh:  # cuInit names its threads: error 304 when it cannot
        fh.write("ks-probe")
    out["comm_write"] = "ok"
except OSError as e:
    out["comm_write"] = f"errno {e.errno} {e.strerror}"
for f in ("/proc/driver/nvidia/version", "/proc/driver/nvidia/params"):
    try:
        text = open(f).read()
        out[f] = text.splitlines()[0][:120] if "version" in f else [l for l in text.splitlines() if "ModifyDevice" in l or "DeviceFile" in l]
    except OSError as e:
        out[f] = f"errno {e.errno} {e.strerror}"
try:
    out["dev_mount"] = [l.split()[4] + " " + l.split()[5] for l in open("/proc/self/mountinfo") if l.split()[4] in ("/dev", "/", "/proc", "/sys", "/run", "/tmp", "/dev/shm")]
except OSError as e:
    out["dev_mount"] = str(e)
try:
    cuda = ctypes.CDLL("libcuda.so.1")
    maps = [l.split()[-1] for l in open("/proc/self/maps") if "libcuda" in l]
    out["libcuda"] = maps[0] if maps else "loaded"
    rc = cuda.cuInit(0)
    name = ctypes.c_char_p()
    cuda.cuGetErrorName(rc, ctypes.byref(name))
    out["cuInit"] = f"{rc} {name.value.decode() if name.value else ''}"
    if rc == 0:
        n = ctypes.c_int()
        cuda.cuDeviceGetCount(ctypes.byref(n)); out["devices"] = n.value
except OSError as e:
    out["libcuda"] = f"dlopen failed: {e}"
if os.environ.get("PROBE_TORCH"):
    try:
        import torch
        out["torch"] = torch.__version__
        out["torch_cuda"] = torch.cuda.is_available()
        if out["torch_cuda"]:
            out["torch_gpu"] = torch.cuda.get_device_name(0)
        else:
            try:
                torch.cuda.init()
            except Exception as e:
                out["torch_init"] = str(e).splitlines()[0][:200]
    except Exception as e:
        out["torch"] = f"import failed: {e}"[:200]
print("PROBE " + json.dumps(out))
'''

#: a launcher with one step of ``setup`` switched off (run as ``python -I -S -c``)
LAUNCHER = r'''
import importlib.util, sys
spec = importlib.util.spec_from_file_location("isolation", {path!r})
iso = importlib.util.module_from_spec(spec); sys.modules["isolation"] = iso; spec.loader.exec_module(iso)
setattr(iso, {step!r}, lambda libc: None)
sys.exit(iso.main({args!r}))
'''
#: variant -> the launcher step it switches off
PATCHES = {"launcher-no-readonly": "make_world_read_only", "launcher-keep-caps": "_drop_privileges"}


def launcher_without(cmd: list[str], step: str) -> list[str]:
    """``cmd`` (from :func:`isolation.wrap`) with the sandbox launcher's ``step`` (a function of ``setup`` taking
    ``libc``) switched off; the spec ``wrap`` wrote is used as it is. ``cmd`` is ``unshare ... -- python
    isolation.py SPEC``, or, where kernelskill runs as root, ``python isolation.py --map-to ID SPEC``."""
    path = str(Path(isolation.__file__).resolve())
    head = cmd[:cmd.index("--") + 1] if "--" in cmd else []
    code = LAUNCHER.format(path=path, step=step, args=cmd[cmd.index(path) + 1:])
    return [*head, sys.executable, "-I", "-S", "-c", code]


def _row(name: str, proc: subprocess.CompletedProcess[str] | None, error: str = "") -> dict[str, object]:
    rec: dict[str, object] = {"variant": name}
    if proc is None:
        rec["error"] = error
        return rec
    rec["rc"] = proc.returncode
    for line in proc.stdout.splitlines():
        if line.startswith("PROBE "):
            rec.update(json.loads(line[6:]))
    if "cuInit" not in rec and "libcuda" not in rec:
        rec["error"] = (proc.stderr.strip() or proc.stdout.strip() or "no output")[-400:]
    elif proc.stderr.strip():
        rec["stderr"] = proc.stderr.strip()[-400:]
    return rec


def _run(cmd: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=cwd)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="write every probe's record here")
    ap.add_argument("--no-torch", action="store_true", help="skip the torch variant")
    args = ap.parse_args()
    py = sys.executable
    probe_cmd = [py, "-I", "-S", "-c", PROBE]
    unshare = isolation._unshare()
    base_env = sandbox.scrub_env()
    rows = []
    work = Path(tempfile.mkdtemp(prefix="ks-cuda-probe-"))
    work.chmod(0o755)  # as root the sandbox's uid is another: launcher-no-hide binds the variants' folders in place
    try:
        rows.append(_row("parent", _run(probe_cmd, dict(os.environ), work)))
        if unshare is None:
            rows.append(_row("userns", None, "no unshare program"))
        else:
            rows.append(_row("userns", _run([unshare, "--user", "--map-root-user", "--", *probe_cmd], base_env, work)))
            rows.append(_row("unshare", _run([unshare, *isolation.UNSHARE_ARGS, "--", *probe_cmd], base_env, work)))
            no_proc = [a for a in isolation.UNSHARE_ARGS if a != "--mount-proc"]
            rows.append(_row("unshare-no-mount-proc", _run([unshare, *no_proc, "--", *probe_cmd], base_env, work)))
            variants = ["launcher", "launcher-no-hide", "launcher-no-readonly", "launcher-keep-caps",
                        "launcher-seccomp"] + ([] if args.no_torch else ["launcher-torch"])
            for name in variants:
                wd = work / name
                wd.mkdir()
                env = dict(base_env, HOME=str(wd), TMPDIR=str(wd))
                env["PYTHONPATH"] = os.pathsep.join(p for p in (sandbox.package_pythonpath(),
                                                                env.get("PYTHONPATH", "")) if p)
                if name == "launcher-seccomp":
                    env["PROBE_SECCOMP"] = str(Path(isolation.__file__).parent)
                inner = probe_cmd
                if name == "launcher-torch":
                    env["PROBE_TORCH"] = "1"
                    inner = [py, "-c", PROBE]  # site on: torch is found as the worker finds it
                cmd = isolation.wrap(inner, workdir=wd, env=env, read_only=[], writable=[])
                spec_path = wd / "sandbox.spec.json"
                if name == "launcher-no-hide":
                    spec = json.loads(spec_path.read_text())
                    spec.update(hide_dirs=[], scratch_dirs=[], hide_files=[])
                    spec_path.write_text(json.dumps(spec))
                if name in PATCHES:
                    cmd = launcher_without(cmd, PATCHES[name])
                try:
                    rows.append(_row(name, _run(cmd, env, wd)))
                except subprocess.TimeoutExpired:
                    rows.append(_row(name, None, "timed out after 120 s"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    width = max(len(str(r["variant"])) for r in rows)
    print(f"{'variant':<{width}}  {'cuInit':<28} {'devices':>7}  {'comm':<8} nodes / error")
    for r in rows:
        nodes = r.get("dev_nvidia") or {}
        bad = {k: v for k, v in nodes.items() if isinstance(nodes, dict) and v not in ("rw ok", "dir")}
        note = r.get("error") or (f"{len(nodes)} nodes, refused: {bad}" if bad else f"{len(nodes)} nodes open")
        if "torch_cuda" in r:
            note = f"torch.cuda.is_available()={r['torch_cuda']} {r.get('torch_init', '')} | {note}"
        print(f"{r['variant']:<{width}}  {str(r.get('cuInit', r.get('libcuda', '-')))[:28]:<28} "
              f"{str(r.get('devices', '-')):>7}  {str(r.get('comm_write', '-'))[:8]:<8} {str(note)[:300]}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
