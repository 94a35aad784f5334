"""Safe YAML parsing with libyaml's C parser when PyYAML was built with it (a leaf: the KB loader and the
retrieval rule files share the choice).

The pure-Python ``yaml.safe_load`` takes 15-70 ms per rule file on a loaded 2-core machine, a fifth of
a cold ``kernelskill query``; the C parser reads the same files in 1.5-4.5 ms into the same objects
(both are the YAML 1.1 safe schema). ``tests/test_query_speed_paths.py`` checks both give equal data.
"""

from __future__ import annotations

from typing import Any

import yaml

#: the safe loader in use: libyaml's ``CSafeLoader`` when available, else the pure-Python one
SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str) -> Any:
    """``yaml.safe_load(text)``, parsed by libyaml when PyYAML has it."""
    return yaml.load(text, Loader=SAFE_LOADER)  # noqa: S506 - a safe loader (C or Python)
