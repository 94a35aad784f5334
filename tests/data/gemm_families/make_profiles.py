"""Write the synthetic profiles of the GEMM/conv families (profiles/<id>.csv) from profiles.yaml, with the
held-out set's renderer (a real H200 capture's header and other columns, the mapped columns replaced).

    /work/venv/bin/python tests/data/gemm_families/make_profiles.py
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
RENDERER = HERE.parent / "heldout" / "make_profiles.py"


def main() -> None:
    spec_loader = importlib.util.spec_from_file_location("heldout_profiles", RENDERER)
    assert spec_loader is not None and spec_loader.loader is not None
    renderer = importlib.util.module_from_spec(spec_loader)
    spec_loader.loader.exec_module(renderer)
    spec = yaml.safe_load((HERE / "profiles.yaml").read_text())
    (HERE / "profiles").mkdir(exist_ok=True)
    for family, entry in spec["families"].items():
        text = renderer.render(family, entry["rows"], spec["defaults"])
        first, rest = text.split("\n", 1)
        banner = (f"==SYNTHETIC== GEMM/conv family profile '{family}' for kernelskill tests: NOT measured; "
                  f"plausible H200 values written by hand (tests/data/gemm_families/profiles.yaml), other columns "
                  f"copied from a real H200 capture")
        (HERE / "profiles" / f"{family}.csv").write_text(banner + "\n" + rest)


if __name__ == "__main__":
    main()
