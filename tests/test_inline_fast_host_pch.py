"""The fast route's precompiled host prelude: where the host unit is cut, that the precompiled prelude is
created once and then used, that it changes nothing in the built code, and that a broken one falls back."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelskill.pipeline.harness.host_pch import MIN_PRELUDE_CHARS, NO_HOST_PCH_ENV, HostPrelude
from kernelskill.pipeline.harness.inline_fast import _cpp_std, run_nvcc
from kernelskill.pipeline.harness.prelude import light_cuda_source

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None or shutil.which("objdump") is None,
                                reason="needs nvcc and objdump")

COMPILE = ('gcc -std=c++17 -c -x c++ -fPIC -O1 -I"/inc" "{src}" -o "/tmp/tmpxft_1_00000000-11_unit.o"')


def _cudafe_step(src: Path, unit: str, module_id_file: Path) -> str:
    return (f'cudafe++ --c++17 --orig_src_file_name "{unit}" --gen_c_file_name "{src}" '
            f'--stub_file_name "x.stub.c" --gen_module_id_file --module_id_file_name "{module_id_file}" "/tmp/u.ii"')


def _host_unit(tmp: Path, name: str, unit: str, module_id: str, tail: str) -> tuple[str, str]:
    src, mid = tmp / f"{name}.cudafe1.cpp", tmp / f"{name}.module_id"
    mid.write_text(module_id)
    prelude = (f"namespace cuda {{ namespace std {{ namespace _GLOBAL__N_{module_id} {{ }}; "
               f"using namespace ::cuda::std::_GLOBAL__N_{module_id}; }} }}\n"
               + "# 7 \"/usr/include/x.h\" 3\nint ks_filler;\n" * (MIN_PRELUDE_CHARS // 30))
    src.write_text(f'# 1 "{unit}"\n{prelude}# 9 "{unit}"\n{tail}')
    return _cudafe_step(src, unit, mid), COMPILE.format(src=src)


def test_host_prelude_cut_is_shared_between_units(tmp_path):
    root = tmp_path / "pch"
    a = HostPrelude.find(*_host_unit(tmp_path, "a", "/x/a/unit.cu", "_aaaa1111_7_unit_cu_0000aaaa", "int f();\n"),
                         root)
    b = HostPrelude.find(*_host_unit(tmp_path, "b", "/y/b/unit.cu", "_bbbb2222_7_unit_cu_0000bbbb", "int g();\n"),
                         root)
    assert a is not None and b is not None
    assert a.folder == b.folder  # other unit, other folder, other anonymous-namespace id: the same prelude
    assert "_aaaa1111" not in a.prelude and a.body.endswith("int f();\n")
    # the unit's own name for the namespace still works in what follows the prelude
    assert "namespace cuda { namespace std { namespace _GLOBAL__N__aaaa1111_7_unit_cu_0000aaaa = " in a.body
    other_flags = HostPrelude.find(_host_unit(tmp_path, "c", "/z/unit.cu", "_c_7_unit_cu_c", "")[0],
                                   COMPILE.replace("-O1", "-O2").format(src=tmp_path / "c.cudafe1.cpp"), root)
    assert other_flags is not None and other_flags.folder != a.folder
    # a unit without the prelude, or a listing of another shape: no cut
    small = tmp_path / "s.cudafe1.cpp"
    small.write_text('# 1 "/x/unit.cu"\nint x;\n# 3 "/x/unit.cu"\nint y;\n')
    assert HostPrelude.find(_cudafe_step(small, "/x/unit.cu", tmp_path / "a.module_id"),
                            COMPILE.format(src=small), root) is None
    assert HostPrelude.find(_cudafe_step(small, "/x/unit.cu", tmp_path / "a.module_id"),
                            COMPILE.format(src=small).replace("gcc", "clang++"), root) is None


KERNEL_A = r"""
#include <torch/extension.h>
__global__ void scale_kernel(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
torch::Tensor scale(torch::Tensor x, double a) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    scale_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), (float)a, n);
    return y;
}
extern "C" int ks_wrap_scale(void** a, void* r) {
    *reinterpret_cast<at::Tensor*>(r) = scale(*reinterpret_cast<at::Tensor*>(a[0]), 2.0);
    return 0;
}
"""

KERNEL_B = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
namespace {
__device__ float bias_value;
__device__ __forceinline__ float shift(float v) { return v + bias_value; }
}
template <typename T>
__global__ void shift_kernel(const T* x, T* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = shift(x[i]);
}
torch::Tensor shifted(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    auto y = torch::zeros_like(x);
    int n = x.numel();
    shift_kernel<float><<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y + x.sum();
}
extern "C" int ks_wrap_shifted(void** a, void* r) {
    *reinterpret_cast<at::Tensor*>(r) = shifted(*reinterpret_cast<at::Tensor*>(a[0]));
    return 0;
}
"""


def _nvcc_cmd(folder: Path, source: str, out: str = "lib.so") -> list[str]:
    from torch.utils.cpp_extension import include_paths

    folder.mkdir(parents=True, exist_ok=True)
    unit = light_cuda_source(source)
    assert unit is not None
    (folder / "unit.cu").write_text(unit)
    return ["nvcc", str(folder / "unit.cu"), "-o", str(folder / out), _cpp_std(), "-O1", "-shared", "-Xcompiler",
            "-fPIC", "--expt-relaxed-constexpr", "-gencode=arch=compute_90,code=sm_90",
            *[f"-I{p}" for p in include_paths()]]


def _code(lib: Path) -> list[str]:
    """The library's host and device code, instructions only (no addresses), names demangled."""
    dis = subprocess.run(["objdump", "-d", "-C", "--no-show-raw-insn", str(lib)], capture_output=True, text=True,
                         check=True).stdout
    lines = [re.sub(r"^\s*[0-9a-f]+:\s*|\s*#.*$|\b[0-9a-f]{4,}\b|tmpxft_\w+?_unit", "", ln)
             for ln in dis.splitlines()[2:]]
    return [ln for ln in lines if ln.strip()]


@needs_nvcc
@pytest.mark.slow
def test_host_pch_created_then_used_same_code_and_falls_back(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSKILL_HARNESS_HOST_PCH_DIR", str(tmp_path / "pch"))
    monkeypatch.delenv(NO_HOST_PCH_ENV, raising=False)
    first: dict = {}
    done = run_nvcc(_nvcc_cmd(tmp_path / "a", KERNEL_A), tmp_path / "a", first)
    assert done.returncode == 0, done.stdout + done.stderr
    assert first["host_pch"] == "created"
    assert list((tmp_path / "pch").glob("*/prelude.h.gch"))

    used: dict = {}
    done = run_nvcc(_nvcc_cmd(tmp_path / "b", KERNEL_B), tmp_path / "b", used)
    assert done.returncode == 0, done.stdout + done.stderr
    assert used["host_pch"] == "used"  # another unit (with its own anonymous namespace) uses A's prelude

    monkeypatch.setenv(NO_HOST_PCH_ENV, "1")
    plain: dict = {}
    done = run_nvcc(_nvcc_cmd(tmp_path / "b", KERNEL_B, out="plain.so"), tmp_path / "b", plain)
    assert done.returncode == 0 and plain["host_pch"] == "off"
    assert _code(tmp_path / "b" / "lib.so") == _code(tmp_path / "b" / "plain.so")

    # a precompiled prelude that does not compile: the unit is compiled as cudafe++ wrote it
    monkeypatch.delenv(NO_HOST_PCH_ENV)
    (folder,) = (tmp_path / "pch").iterdir()
    (folder / "prelude.h").write_text("#error broken prelude\n")
    (folder / "prelude.h.gch").write_bytes(b"not a precompiled header")
    broken: dict = {}
    done = run_nvcc(_nvcc_cmd(tmp_path / "b", KERNEL_B, out="again.so"), tmp_path / "b", broken)
    assert done.returncode == 0, done.stdout
    assert broken["host_pch"] == "failed" and "broken prelude" not in done.stdout
    assert _code(tmp_path / "b" / "again.so") == _code(tmp_path / "b" / "plain.so")
