"""Scanner and rule edge cases: comments/strings, several kernels, .cu files, bad input, rules data."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelskill.errors import KernelskillError
from kernelskill.feature_rules import extract, extract_file, load_rules
from kernelskill.feature_rules.scanner import scan

TWO_KERNELS = '''
import torch
from torch.utils.cpp_extension import load_inline
src = """
__global__ void a_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = expf(x[i]);   // exp
}
__global__ void b_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = x[i] * 2.0f;
}
torch::Tensor run(torch::Tensor x) {
    auto y = torch::empty_like(x);
    auto z = torch::empty_like(x);
    int n = x.numel();
    a_kernel<<<n / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    b_kernel<<<n / 256, 256>>>(y.data_ptr<float>(), z.data_ptr<float>(), n);
    return z;
}
"""
ext = load_inline(name="two", cpp_sources="torch::Tensor run(torch::Tensor x);", cuda_sources=src,
                  functions=["run"])
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return ext.run(x)
'''


def test_several_kernels_union_and_launch_count() -> None:
    fs = extract(TWO_KERNELS, path="two.py")
    assert fs.kernels == ["a_kernel", "b_kernel"]
    assert fs.launches == ["a_kernel", "b_kernel"]
    assert fs.values["kernel_structure_id"] == 4
    assert fs.values["has_multiple_kernels_in_forward"] and fs.values["cudagraph_eligible"]
    assert fs.values["uses_transcendentals"] and fs.values["has_bounds_check"]  # union over kernels
    assert fs.values["is_pointwise"]
    line = next(e.line for e in fs.evidence["uses_transcendentals"])
    assert "expf" in TWO_KERNELS.splitlines()[line - 1]


def test_launches_in_exclusive_branches_count_once_and_loops_count_many() -> None:
    branchy = TWO_KERNELS.replace(
        "    a_kernel<<<n / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);\n"
        "    b_kernel<<<n / 256, 256>>>(y.data_ptr<float>(), z.data_ptr<float>(), n);",
        "    if (n % 4 == 0) { a_kernel<<<n / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n); }\n"
        "    else { b_kernel<<<n / 256, 256>>>(y.data_ptr<float>(), z.data_ptr<float>(), n); }")
    assert extract(branchy, path="b.py").values["has_multiple_kernels_in_forward"] is False
    looped = TWO_KERNELS.replace("    b_kernel<<<", "    for (int r = 0; r < 3; ++r) b_kernel<<<").replace(
        "    a_kernel<<<n / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);\n", "")
    fs = extract(looped, path="l.py")
    assert fs.values["kernel_structure_id"] == 4 and fs.launches == ["b_kernel x loop"]


def test_comments_and_strings_never_trigger() -> None:
    fs = extract_file(Path(__file__).parent / "corpus" / "comment_and_string_traps.py")
    assert fs.kernels == ["clamp_kernel"]  # the docstring's fake kernel is not code
    for name in ("has_shared_memory_tile", "uses_transcendentals", "uses_vector_types", "has_k_loop",
                 "has_vector_load_store", "has_bounds_check"):
        assert fs.values[name] is False, name


def test_line_numbers_survive_blanking() -> None:
    src = scan(TWO_KERNELS, "two.py")
    for fn in src.functions:
        assert fn.name in TWO_KERNELS.splitlines()[src.line_of(fn.start) - 1]
    assert len(src.cuda) == len(TWO_KERNELS)


def test_cuda_file_and_syntax_error_python(tmp_path: Path) -> None:
    cu = tmp_path / "k.cu"
    cu.write_text(TWO_KERNELS.split('src = """')[1].split('"""')[0])
    fs = extract_file(cu)
    assert fs.values["kernel_structure_id"] == 4
    broken = TWO_KERNELS.replace("class ModelNew(torch.nn.Module):", "class ModelNew(torch.nn.Module)")
    fs2 = extract(broken, path="broken.py")
    assert fs2.kernels == ["a_kernel", "b_kernel"] and fs2.values["uses_transcendentals"]


def test_bad_input_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(KernelskillError, match="missing.py"):
        extract_file(tmp_path / "missing.py")
    binary = tmp_path / "bin.cu"
    binary.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(KernelskillError, match="bin.cu"):
        extract_file(binary)


def test_rules_data_is_validated(tmp_path: Path) -> None:
    rules = Path(__file__).parents[1] / "feature_rules" / "rules.yaml"
    text = rules.read_text()
    bad = tmp_path / "rules.yaml"
    bad.write_text(text.replace("value: shared_array_used", "value: shared_array_usd"))
    with pytest.raises(KernelskillError, match="shared_array_usd"):
        load_rules(bad)
    bad.write_text(text.replace("value: kloop", "value: __import__('os')"))
    with pytest.raises(KernelskillError, match="rules.yaml"):
        load_rules(bad)
    assert load_rules(rules).version == load_rules(rules).version
    bad.write_text(text + "\n# a comment changes the version\n")
    assert load_rules(bad).version != load_rules(rules).version
