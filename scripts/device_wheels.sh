#!/usr/bin/env bash
# Fetch the wheels the GPU box lacks (it has torch, triton, jinja2, numpy; no pydantic, openai or
# pytest) into .whl/ for the device tool's `carry`. Run from the repository root on the development
# machine; see docs/gpu_verification.md for how they are installed there.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
WHEELS=(
  pydantic==2.14.4 pydantic_core==2.50.5 annotated_types==0.8.0 typing_inspection==0.4.5
  typing_extensions==4.16.0 openai==3.57.0 anyio==4.16.0 sniffio==1.3.1 idna==3.20 certifi==2026.10.19.post1
  distro==1.9.0 h11==0.16.0 httpcore2==2.16.2 httpx2==2.16.2 jiter==0.19.0 truststore==0.10.5
  pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1 packaging==26.4 pygments==2.21.0
)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl "${WHEELS[@]}"
du -sh .whl
