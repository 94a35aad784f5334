"""Write profile.csv, the synthetic profile of the held-out conv forward, with the held-out set's renderer.

    /work/venv/bin/python tests/data/conv_heldout/make_profile.py

Values written by hand, plausible for an H200 (cuDNN's fp32 implicit-GEMM fprop near the FP32 pipe's limit,
88 % of the time; the tail kernel at the memory roof); NOT measured.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

HERE = Path(__file__).resolve().parent
RENDERER = HERE.parent / "heldout" / "make_profiles.py"
DEFAULTS = {"regs": 32, "lim_regs": 8, "lim_smem": 32, "lim_warps": 8, "long": 0.6, "short": 0.02, "noinst": 0.01,
            "notsel": 0.04, "div": 0, "uni": 2000, "pred": 31.8, "elig": 0.8, "occ": 88}
ROWS = [
    {"name": "sm90_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize128x128x8_stage3_warpsize2x2x1"
             "_g1_execute_kernel__5x_cudnn", "block": [256, 1, 1], "grid": [1152, 1, 1], "dur": 2950000, "dram": 9.0,
     "l2": 31.0, "l1": 58.0, "sm": 88.0, "occ": 24.0, "regs": 168, "long": 0.05, "short": 0.04, "notsel": 0.3,
     "elig": 1.9, "rd": 28.3e+6, "wr": 56.6e+6},
    {"name": "tanh_scale_bias(float *, const float *, const float *, float, long long, int, int)",
     "block": [256, 1, 1], "grid": [55296, 1, 1], "dur": 40000, "dram": 84.0, "l2": 62.0, "l1": 30.0, "sm": 28.0,
     "occ": 86.0, "rd": 56.6e+6, "wr": 56.6e+6},
]


def main() -> None:
    spec = importlib.util.spec_from_file_location("heldout_profiles", RENDERER)
    assert spec is not None and spec.loader is not None
    renderer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(renderer)
    text = renderer.render("conv_heldout", ROWS, DEFAULTS)
    first, rest = text.split("\n", 1)
    banner = ("==SYNTHETIC== held-out conv forward profile for kernelskill tests: NOT measured; plausible H200 values "
              "written by hand (tests/data/conv_heldout/make_profile.py), other columns copied from a real H200 capture")
    (HERE / "profile.csv").write_text(banner + "\n" + rest)


if __name__ == "__main__":
    main()
