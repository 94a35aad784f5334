"""The seccomp filter of the harness workers (pipeline/harness/isolation.py), installed in a fresh process:
Unix sockets are refused by every route to socket(2), pipes between a process's own threads still work."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(sys.platform != "linux" or platform.machine() not in ("x86_64", "aarch64"),
                                reason="the filter exists for Linux on x86-64 and aarch64")

PROBE = r'''
import ctypes, socket
from kernelskill.pipeline.harness.isolation import X32_SYSCALL_BIT, deny_unix_sockets
print("filter", deny_unix_sockets())
a, b = socket.socketpair(); a.send(b"x"); print("socketpair", b.recv(1).decode())
try:
    socket.socket(socket.AF_UNIX); print("unix", "open")
except PermissionError:
    print("unix", "EPERM")
socket.socket(socket.AF_INET).close(); print("inet", "open")
libc = ctypes.CDLL(None, use_errno=True)
if __import__("platform").machine() == "x86_64":  # socket(AF_UNIX) through the x32 ABI's number
    rc = libc.syscall(41 | X32_SYSCALL_BIT, socket.AF_UNIX, socket.SOCK_STREAM, 0)
    print("x32", "EPERM" if rc == -1 and ctypes.get_errno() == 1 else f"rc={rc}")
'''


def test_unix_sockets_are_refused_by_every_number_and_socketpair_still_works() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    seen = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert seen["filter"] == "on" and seen["socketpair"] == "x" and seen["unix"] == "EPERM"
    assert seen["inet"] == "open"  # the network namespace, not this filter, keeps the network away
    if platform.machine() == "x86_64":
        assert seen["x32"] == "EPERM"
