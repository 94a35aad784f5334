"""Per-kernel diagnosis (retrieval/kernels.py): the operation of each kernel, its share, its own tier and
bottleneck, the dominant op without a profile, the switch to the next kernel when the dominant one has
no permitted method, and how the table reaches the CLI's JSON and the planner prompt."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
import pytest

from kernelskill.protocols import PRESETS
from kernelskill.retrieval.kernels import dominant_op_of_task, op_from_name, source_kernels

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ROOT / "tests" / "data" / "gemm_families"
H200 = ROOT / "tests" / "data" / "h200_profiles"
CONTEXT = {**PRESETS["strict"].context("fp32"), "task_dtype": "fp32", "arch_sm": 90}


@cache
def skills() -> Any:
    from kernelskill.kb.loader import load_report

    loaded, issues = load_report([[ROOT / "kb" / "skills"]])
    assert not issues
    return loaded


def store(only_cublas: tuple[str, ...] = ()) -> Any:
    """The bundled KB in memory; the cases named in ``only_cublas`` offer nothing but cuBLAS."""
    from kernelskill.retrieval.memory_kb import MemoryKB

    k = skills()
    cases = [c.model_copy(update={"methods": ["cublas_gemm"]}) if c.id in only_cublas else c for c in k.cases]
    return MemoryKB(fields=k.fields, predicates=k.predicates, tiers=k.tiers, bottlenecks=k.bottlenecks, cases=cases,
                    vetoes=k.vetoes, methods=k.methods)


@pytest.mark.parametrize(("name", "op"), [
    ("ampere_sgemm_128x64_nn", "gemm"),
    ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", "gemm"),
    ("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_8x4_nn_align1>(T1::Params)", "gemm"),
    ("void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>(T13, T6, T6)", "gemm"),
    ("sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x64x32", "conv"),
    ("void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>(T2, T2, T2)", "normalization"),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float>(T4 *, const T2 *, int)",
     "softmax"),
    ("void at::elementwise_kernel<128, 2, void at::gpu_kernel_impl_nocast<at::direct_copy_kernel_cuda"
     "(at::TensorIteratorBase &)>(at::TensorIteratorBase &, const T1 &)>(int, T3)", "copy"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>(int, T2, T3)", "elementwise"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MaxOps<float>>>(T3)",
     "reduction"),
    ("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4>>(Flash_fwd_params)", "attention"),
    ("triton_tem_fused_addmm_0", "gemm"), ("triton_red_fused_sum_1", "reduction"),
    ("triton_per_fused__softmax_2", "softmax"), ("triton_poi_fused_gelu_3", "elementwise"),
])
def test_vendor_kernels_get_their_operation_from_the_name(name: str, op: str) -> None:
    found = op_from_name(name)
    assert found is not None and found[0] == op, (name, found)


def test_custom_kernels_get_their_operation_from_their_own_code() -> None:
    src = H200 / "l3_43_kernel.py"
    views = source_kernels(src.read_text(), str(src), None)
    assert {n: v.op for n, v in views.items()} == {
        "linear_bias": "gemm", "attn_scores": "gemm", "softmax_rows": "softmax", "attn_av": "gemm"}
    assert views["linear_bias"].features["uses_transcendentals"] is False
    assert views["softmax_rows"].features["uses_transcendentals"] is True
    norm = source_kernels((H200 / "l2_30_kernel.py").read_text(), "l2_30_kernel.py", None)
    assert norm["group_norm_hardtanh"].op == "normalization"
    conv = source_kernels((FAMILIES / "conv2d_relu_biasadd_kernel.py").read_text(), "conv.py",
                          FAMILIES / "conv2d_relu_biasadd_task.py")
    assert conv["conv3x3_direct"].op == "conv" and conv["relu_add_channel"].op == "elementwise"


def test_dominant_op_of_a_forward_without_a_profile(tmp_path: Path) -> None:
    assert dominant_op_of_task(FAMILIES / "causal_attention_task.py")[0] == "gemm"  # matmuls, not a fused attention
    assert dominant_op_of_task(FAMILIES / "conv2d_relu_biasadd_task.py")[0] == "conv"
    assert dominant_op_of_task(FAMILIES / "matmul_gelu_softmax_task.py")[0] == "gemm"
    seq = tmp_path / "seq_task.py"  # layers built in a loop and run through nn.Sequential
    seq.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                   "    def __init__(self, sizes):\n        super().__init__()\n        layers = []\n"
                   "        for a, b in zip(sizes[:-1], sizes[1:]):\n"
                   "            layers += [nn.Linear(a, b), nn.ReLU()]\n        self.net = nn.Sequential(*layers)\n\n"
                   "    def forward(self, x):\n        return self.net(x)\n")
    assert dominant_op_of_task(seq)[0] == "gemm"
    sdpa = tmp_path / "sdpa_task.py"
    sdpa.write_text("import torch\nimport torch.nn.functional as F\n\n\nclass Model(torch.nn.Module):\n"
                    "    def forward(self, q, k, v):\n        return F.scaled_dot_product_attention(q, k, v)\n")
    assert dominant_op_of_task(sdpa)[0] == "attention"


def test_each_profiled_kernel_has_its_own_verdict() -> None:
    from kernelskill.retrieval.api import query

    r = query(H200 / "l3_43_kernel.py", profile=H200 / "l3_43.csv", store=store(), context=CONTEXT)
    names = [k.name for k in r.kernels]
    assert names[0] == "linear_bias" and set(names) >= {"attn_scores", "attn_av", "softmax_rows", "elementwise_kernel"}
    shares = [k.share_pct for k in r.kernels]
    assert shares == sorted(shares, reverse=True)
    by = {k.name: k for k in r.kernels}
    assert by["elementwise_kernel"].vendor and by["elementwise_kernel"].op == "copy"
    assert by["softmax_rows"].op == "softmax" and by["softmax_rows"].bottleneck is not None
    for k in r.kernels:
        assert k.tier in ("H", "M", "L") and k.tier_reason
        assert k.metrics and "primary_limiter_util_pct" in k.metrics  # the tier's field, with its value
    assert by["linear_bias"].bottleneck == r.bottleneck.id
    data = json.loads(r.model_dump_json())  # what `kernelskill query --json` prints
    assert data["target_kernel"] == "linear_bias"
    assert [k["name"] for k in data["kernels"]] == names


def test_the_next_kernel_decides_when_the_dominant_one_has_no_permitted_method() -> None:
    """A KB whose case for the dominant GEMM offers only cuBLAS (forbidden under strict) must not end the
    run: the case is chosen for the next kernel by share of time, and the trace says why."""
    from kernelskill.retrieval.api import query

    # the GEMM's cases: as uncoalesced access, and (its source is unit stride) as on-chip operand traffic
    kb = store(only_cublas=("gc_ua_tiled_gemm", "ua_generic", "ot_tiled_gemm", "ot_generic"))
    r = query(H200 / "l2_30_kernel.py", profile=H200 / "l2_30.csv", store=kb, context=CONTEXT)
    assert r.permitted, (r.case.id, r.forbidden)
    assert r.target_kernel == "group_norm_hardtanh"
    assert [k.name for k in r.kernels if k.target] == ["group_norm_hardtanh"]
    assert r.context["dominant_op"] == "normalization"
    note = next(s for s in r.trace if s.id == "target_kernel")
    assert "linear_bias" in note.note and "no permitted method" in note.note


def test_the_planner_partial_shows_the_table_and_tolerates_a_query_without_it() -> None:
    from kernelskill.retrieval.api import query

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROOT / "prompts")), undefined=jinja2.StrictUndefined)
    partial = env.get_template("partials/kernels.j2")
    r = query(H200 / "l2_30_kernel.py", profile=H200 / "l2_30.csv", store=store(), context=CONTEXT)
    text = partial.render(query={"kernels": r.model_dump(mode="json")["kernels"]})
    assert "| `linear_bias` (the methods below are for this kernel) | 99.7 % | gemm |" in text
    assert "`group_norm_hardtanh`" in text and "normalization" in text and "l1_throughput_pct = 93.2" in text
    static = query(H200 / "l2_30_kernel.py", store=store(), context=CONTEXT)
    text = partial.render(query={"kernels": static.model_dump(mode="json")["kernels"]})
    assert "- `linear_bias`: gemm (the dominant operation of the forward" in text
    assert partial.render(query={}).strip() == ""  # a view without kernels renders nothing, no error
    assert partial.render(query={"kernels": []}).strip() == ""
    assert '{% include "partials/kernels.j2" %}' in (ROOT / "prompts" / "planner.j2").read_text()
