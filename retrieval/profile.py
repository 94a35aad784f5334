"""Nsight Compute profiles: import (CSV ``--csv --page raw`` or ``.ncu-rep``) and normalization.

A raw-page CSV has a header row, a units row, then one row per kernel launch. Values may be in base
units (``--print-units base``, the form we capture) or in ncu's human units (us/ms, Kbyte, ...), with
thousands separators either way; everything is converted to the units of ``field_map.yaml``. The map
lists both spellings ncu uses for some metrics; the first one present wins, and a field found under
none of them is reported by name together with the columns that were looked for.

Launches of the same kernel are grouped; the dominant kernel is the one with the largest total
duration (sum over its launches), and every kernel is kept for the report.

Every value is range-checked as it is read: not finite (``inf``, ``1e999``), negative, a percentage
above 100 by more than ncu's own overshoot of its sustained peaks (read as 100 up to that; a percentage of the
active cycles' peak, such as the L1/TEX throughput, up to 400), a zero duration, or a
number with misplaced thousands separators (``1,2,3,4``) is an error naming the file, line and metric.
"""

from __future__ import annotations

import csv
import functools
import io
import logging
import math
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from kernelskill.errors import KernelskillError

log = logging.getLogger(__name__)

FIELD_MAP_PATH = Path(__file__).with_name("field_map.yaml")
NA_VALUES = {"", "n/a", "na", "nan", "-", "--", "(n/a)", "none"}


class ProfileError(KernelskillError):
    """A profile file that cannot be read as a measurement (its path and, where it applies, line and metric in
    the message): a fact about that capture, not about the knowledge base or its settings."""


class FieldMap(BaseModel):
    """The parsed ``field_map.yaml``."""

    fields: dict[str, dict[str, Any]]
    extras: dict[str, dict[str, Any]] = Field(default_factory=dict)
    identity: dict[str, list[str]] = Field(default_factory=dict)
    vendor_kernel_patterns: list[str] = Field(default_factory=list)

    def all_fields(self) -> dict[str, dict[str, Any]]:
        return {**self.fields, **self.extras}

    @functools.cached_property
    def vendor_re(self) -> re.Pattern[str]:
        return re.compile("|".join(f"(?:{p})" for p in self.vendor_kernel_patterns) or r"(?!)", re.IGNORECASE)


@functools.lru_cache(maxsize=4)
def load_field_map(path: str | None = None) -> FieldMap:
    import yaml

    from kernelskill.yaml_load import safe_load

    p = Path(path) if path else FIELD_MAP_PATH
    try:
        data = safe_load(p.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise KernelskillError(f"{p}: cannot read the field map: {exc}") from exc
    return FieldMap.model_validate({k: v for k, v in data.items() if k != "version"})


def capture_metrics(field_map: FieldMap | None = None) -> list[str]:
    """The raw ncu metrics to request (``--metrics``) so that every mapped field can be filled."""
    fmap = field_map or load_field_map()
    out: dict[str, None] = {}
    for spec in fmap.all_fields().values():
        for raw in spec.get("raw", []):
            if "__" in raw:
                out.setdefault(raw, None)
    return list(out)


class MissingField(BaseModel):
    field: str
    looked_for: list[str]


class KernelProfile(BaseModel):
    """One kernel (all its launches in the profile grouped)."""

    name: str  # as ncu printed it (demangled signature)
    base_name: str  # the function name alone
    launches: int
    total_duration_ns: float | None
    vendor: bool
    fields: dict[str, float | None]  # normalized (launch-averaged, duration-weighted) values
    sources: dict[str, str] = Field(default_factory=dict)  # normalized field -> raw column used
    missing: list[MissingField] = Field(default_factory=list)
    grid_size: str | None = None
    block_size: str | None = None
    ids: list[int] = Field(default_factory=list)


class Profile(BaseModel):
    source: str
    units: str  # "base" or "human" (anything converted from non-base units)
    kernels: list[KernelProfile]
    launches: int  # rows (kernel launches) in the profile, i.e. launches per profiled forward
    notes: list[str] = Field(default_factory=list)
    device_name: str | None = None  # the GPU ncu ran on (device__attribute_display_name), when captured

    def dominant(self) -> KernelProfile:
        """The kernel with the largest total duration (ties: first launched)."""
        return max(self.kernels, key=lambda k: (k.total_duration_ns or 0.0, -min(k.ids or [0])))

    def kernel_names(self) -> list[str]:
        return [k.base_name for k in self.kernels]


# ------------------------------------------------------------------------------------ unit handling
_TIME_NS = {"ns": 1.0, "nsecond": 1.0, "nsec": 1.0, "us": 1e3, "usecond": 1e3, "usec": 1e3, "µs": 1e3,
            "ms": 1e6, "msecond": 1e6, "msec": 1e6, "s": 1e9, "second": 1e9, "sec": 1e9}
_PREFIX = {"": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_BIN_PREFIX = {"Ki": 1024.0, "Mi": 1024.0**2, "Gi": 1024.0**3, "Ti": 1024.0**4}
_BYTES_RE = re.compile(r"^(Ki|Mi|Gi|Ti|K|k|M|G|T)?(?:byte|B)(?:/.*)?$")
_COUNT_PREFIX_RE = re.compile(r"^(K|M|G|T)([a-z][a-z/_ ]*)$")


_GROUPED_RE = re.compile(r"^[+-]?\d{1,3}(,\d{3})+(\.\d*)?([eE][+-]?\d+)?%?$")
#: ncu's ``pct_of_peak_sustained`` values can pass 100: its sustained peak is a nominal rate, and a cuBLAS GEMM's
#: L2 throughput read 104.5 % on an H100 (ncu 2025, session 5). Up to this many points above 100 a value is read
#: and clamped to 100; beyond them it cannot be a measurement and the profile is refused.
PCT_TOLERANCE = 20.0
#: a ``pct_of_peak_sustained_active`` value is relative to the cycles its unit was active, and the L1/TEX
#: throughput (the maximum over its sub-units) read 170.05 % on a shared-memory histogram and 143.67 % on a
#: bank-conflicted tree reduction on an H100 (ncu 2025, session 7, the blind set): real readings, clamped to
#: 100 like the others. Up to this value such a column is read; beyond it the profile is refused.
ACTIVE_PCT_LIMIT = 400.0


def parse_number(text: str) -> float | None:
    """``"1,234.5"`` -> 1234.5; n/a and empty cells -> None; raises ValueError on anything else
    (``"1,2,3,4"`` included: commas are accepted only as thousands separators)."""
    s = text.strip().strip('"').strip()
    if s.lower() in NA_VALUES:
        return None
    s = s.replace("\u202f", "").replace(" ", "")
    if "," in s:
        if not _GROUPED_RE.match(s):
            raise ValueError(f"misplaced thousands separators in {text!r}")
        s = s.replace(",", "")
    if s.endswith("%"):
        s = s[:-1]
    return float(s)


def value_problem(value: float, unit: str, field: str, raw: str = "") -> str | None:
    """Why ``value`` (already in the field map's ``unit``) cannot be a measurement, or None; ``raw`` is the
    ncu metric it was read from (a percentage of the active cycles' peak may pass 100 further)."""
    if not math.isfinite(value):
        return "is not a finite number"
    if value < 0:
        return "is negative"
    if unit == "pct" and raw.endswith("pct_of_peak_sustained_active"):
        if value > ACTIVE_PCT_LIMIT:
            return f"is above {ACTIVE_PCT_LIMIT:.0f} % of the active cycles' peak"
    elif unit == "pct" and value > 100.0 + PCT_TOLERANCE:
        return "is above 100 %"
    if field == "kernel_duration_ns" and value == 0:
        return "is a zero duration"
    return None


def unit_factor(unit: str, target: str) -> float | None:
    """Multiplier from ``unit`` (as ncu printed it) to the field map's ``target`` unit; None if the
    two do not convert (for instance cycles where nanoseconds are expected)."""
    u = unit.strip()
    if target == "ns":
        return _TIME_NS.get(u) if u else 1.0  # a unitless duration column is taken as base (ns)
    if target == "pct":
        return 1.0 if u in ("%", "", "pct", "percent") else None
    if target == "bytes":
        if not u:
            return 1.0
        m = _BYTES_RE.match(u)
        if not m:
            return None
        p = m.group(1) or ""
        return _BIN_PREFIX.get(p) or _PREFIX.get(p, 1.0)
    # count / ratio: any unit word; scale a K/M/G prefix in front of a unit word (Kinst, Mwarp)
    m = _COUNT_PREFIX_RE.match(u)
    if m and m.group(2) not in ("byte",):
        return _PREFIX[m.group(1)]
    return 1.0


# ------------------------------------------------------------------------------------------ parsing
def base_kernel_name(name: str) -> str:
    """``void ns::foo<float, 4>(const float *, int)`` -> ``foo``."""
    s = name.strip()
    # drop the argument list: the last top-level '(...)'
    depth = 0
    cut = len(s)
    for i in range(len(s) - 1, -1, -1):
        ch = s[i]
        if ch == ")":
            depth += 1
        elif ch == "(":
            depth -= 1
            if depth == 0:
                cut = i
                break
    s = s[:cut] if cut < len(s) and cut > 0 else s
    # drop template arguments
    out, depth = [], 0
    for ch in s:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    s = "".join(out).strip()
    s = s.split()[-1] if s.split() else s  # return type ("void")
    return s.split("::")[-1] or name.strip()


def _find_header(rows: list[list[str]], source: str) -> int:
    for i, row in enumerate(rows):
        cells = [c.strip() for c in row]
        if cells and cells[0] == "ID" and any(c in ("Kernel Name", "Function Name", "Name") for c in cells):
            return i
    raise ProfileError(f"{source}: not an ncu raw-page CSV (no header row starting with \"ID\" and "
                           f"naming \"Kernel Name\"; capture with ncu --csv --page raw)")


def _looks_like_units(row: list[str]) -> bool:
    cells = [c.strip() for c in row]
    if not cells or cells[0]:
        return False
    for c in cells:
        if not c:
            continue
        try:
            parse_number(c)
            return False  # a number: a data row with an empty ID
        except ValueError:
            pass
    return True


def parse_csv_text(text: str, source: str = "<profile>", field_map: FieldMap | None = None) -> Profile:
    """Parse the text of ``ncu --csv --page raw`` (ncu's own ``==PROF==`` lines may surround it)."""
    fmap = field_map or load_field_map()
    lines = [ln for ln in text.splitlines() if not ln.startswith("==")]
    try:
        rows = [r for r in csv.reader(io.StringIO("\n".join(lines))) if r and any(c.strip() for c in r)]
    except csv.Error as exc:
        raise ProfileError(f"{source}: malformed CSV: {exc}") from exc
    if not rows:
        raise ProfileError(f"{source}: empty profile (no CSV rows)")
    h = _find_header(rows, source)
    header = [c.strip() for c in rows[h]]
    body = rows[h + 1 :]
    units = [""] * len(header)
    if body and _looks_like_units(body[0]):
        units = [c.strip() for c in body[0]] + [""] * max(0, len(header) - len(body[0]))
        body = body[1:]
    if not body:
        raise ProfileError(f"{source}: the profile has a header but no kernel rows")
    if "Metric Name" in header and "Metric Value" in header:  # ncu's default (details) page: pivot it
        header, units, body = _pivot_details(header, body, h)
    col = {name: i for i, name in enumerate(header)}

    def ident(key: str) -> int | None:
        for cand in fmap.identity.get(key, []):
            if cand in col:
                return col[cand]
        return None

    name_col = ident("kernel_name")
    if name_col is None:
        raise ProfileError(f"{source}: no kernel name column (looked for "
                               f"{', '.join(fmap.identity.get('kernel_name', []))})")
    id_col, grid_col, block_col = ident("id"), ident("grid_size"), ident("block_size")

    resolved: dict[str, tuple[str, int, float]] = {}  # field -> (raw name, column, unit factor)
    missing: list[MissingField] = []
    human = False
    for field, spec in fmap.all_fields().items():
        target = spec.get("unit", "count")
        for raw in spec.get("raw", []):
            if raw in col:
                unit = units[col[raw]] if col[raw] < len(units) else ""
                factor = unit_factor(unit, target)
                if factor is None:
                    raise ProfileError(f"{source}: column {raw!r} ({field}) is in unit {unit!r}, which "
                                           f"does not convert to {target}")
                if factor != 1.0:
                    human = True
                resolved[field] = (raw, col[raw], factor)
                break
        else:
            if field in fmap.fields:
                missing.append(MissingField(field=field, looked_for=list(spec.get("raw", []))))
    for field, spec in fmap.fields.items():
        if spec.get("required") and field not in resolved:
            raise ProfileError(f"{source}: no column for {field} (looked for "
                                   f"{', '.join(spec.get('raw', []))}); capture with ncu --csv --page raw "
                                   f"--metrics {spec.get('raw', ['?'])[0]}")

    targets = {field: fmap.all_fields()[field].get("unit", "count") for field in resolved}
    launches: list[dict[str, Any]] = []
    for n, row in enumerate(body, start=h + 3):
        if len(row) < len(header):
            row = row + [""] * (len(header) - len(row))
        values: dict[str, float | None] = {}
        for field, (raw, i, factor) in resolved.items():
            try:
                v = parse_number(row[i])
            except ValueError:
                raise ProfileError(f"{source}:{n}: column {raw!r} ({field}) holds {row[i][:40]!r}, "
                                       f"not a number") from None
            if v is None and fmap.fields.get(field, {}).get("required"):
                cell = repr(row[i].strip()[:40]) if row[i].strip() else "an empty cell"
                raise ProfileError(f"{source}:{n}: column {raw!r} ({field}) is required and holds {cell}, "
                                       "not a number; a profile without it is not usable")
            if v is not None:
                v *= factor
                problem = value_problem(v, targets[field], field, raw)
                if problem is not None:
                    raise ProfileError(f"{source}:{n}: column {raw!r} ({field}) holds {row[i][:40]!r}, "
                                           f"which {problem}; not a value ncu can measure")
                if targets[field] == "pct" and v > 100.0:
                    v = 100.0  # within the tolerance: at the peak
            values[field] = v
        launch_id = n - h - 3
        if id_col is not None:
            try:
                launch_id = int(parse_number(row[id_col]) or 0)
            except (ValueError, OverflowError):
                pass
        launches.append({"name": row[name_col].strip(), "id": launch_id, "values": values,
                         "grid": row[grid_col].strip() if grid_col is not None else None,
                         "block": row[block_col].strip() if block_col is not None else None})

    kernels = _group(launches, resolved, missing, fmap)
    notes = []
    if any(r[0].startswith("smsp__average_warps_issue_stalled") for r in resolved.values()):
        notes.append("stall ratios come per issue (ncu section spelling smsp__average_warps_issue_stalled_*); "
                     "their scale differs from the per-warp-active ratios the thresholds were set on")
    device_col = ident("device_name")
    device_name = next((r[device_col].strip().strip('"') for r in body
                        if device_col is not None and device_col < len(r) and r[device_col].strip()), None)
    return Profile(source=source, units="human" if human else "base", kernels=kernels, launches=len(launches),
                   notes=notes, device_name=device_name[:80] if device_name else None)


def _pivot_details(header: list[str], body: list[list[str]], h: int) -> tuple[list[str], list[str], list[list[str]]]:
    """``--page details`` has one row per (launch, metric) with ``Metric Name/Unit/Value`` columns; turn it
    into the raw page's shape (one row per launch, a units row) so the same field map applies."""
    name_i, unit_i, value_i = header.index("Metric Name"), header.index("Metric Unit"), header.index("Metric Value")
    ident = [i for i, c in enumerate(header) if c not in ("Section Name", "Metric Name", "Metric Unit",
                                                           "Metric Value", "Rule Name", "Rule Type",
                                                           "Rule Description", "Estimated Speedup Type",
                                                           "Estimated Speedup")]
    id_i = header.index("ID")
    metrics: dict[str, str] = {}
    launches: dict[str, dict[str, Any]] = {}
    for row in body:
        if len(row) <= max(name_i, unit_i, value_i):
            continue
        launch = launches.setdefault(row[id_i], {"ident": [row[i] for i in ident], "values": {}})
        metric = row[name_i].strip()
        if metric and metric not in launch["values"]:
            launch["values"][metric] = row[value_i]
            metrics.setdefault(metric, row[unit_i].strip())
    names = [m for m in metrics if m not in {header[i] for i in ident}]
    new_header = [header[i] for i in ident] + names
    new_units = [""] * len(ident) + [metrics[m] for m in names]
    new_body = [launch["ident"] + [launch["values"].get(m, "") for m in names] for launch in launches.values()]
    log.debug("pivoted a details-page CSV (header at row %d): %d launches, %d metrics", h + 1, len(new_body),
              len(names))
    return new_header, new_units, new_body


def _group(launches: list[dict[str, Any]], resolved: dict[str, tuple[str, int, float]],
           missing: list[MissingField], fmap: FieldMap) -> list[KernelProfile]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for launch in launches:
        groups.setdefault(launch["name"], []).append(launch)
    out: list[KernelProfile] = []
    for name, items in groups.items():
        durations = [it["values"].get("kernel_duration_ns") for it in items]
        total = sum(d for d in durations if d is not None) if any(d is not None for d in durations) else None
        fields: dict[str, float | None] = {}
        for field in resolved:
            pairs = [(it["values"].get(field), it["values"].get("kernel_duration_ns")) for it in items]
            known = [(v, d) for v, d in pairs if v is not None]
            if not known:
                fields[field] = None
            elif field == "kernel_duration_ns" or len(known) == 1:
                fields[field] = sum(v for v, _ in known) / len(known)
            else:  # a rate or a count per launch: weight by launch duration
                weight = sum(d or 0.0 for _, d in known)
                fields[field] = (sum(v * (d or 0.0) for v, d in known) / weight if weight > 0
                                 else sum(v for v, _ in known) / len(known))
        base = base_kernel_name(name)
        miss = list(missing) + [MissingField(field=f, looked_for=[resolved[f][0]])
                                for f, v in fields.items() if v is None and f in fmap.fields]
        out.append(KernelProfile(
            name=name, base_name=base, launches=len(items), total_duration_ns=total,
            vendor=bool(fmap.vendor_re.search(name) or fmap.vendor_re.search(base)),
            fields=fields, sources={f: r[0] for f, r in resolved.items()}, missing=miss,
            grid_size=items[0]["grid"], block_size=items[0]["block"], ids=[it["id"] for it in items]))
    return out


def _import_report(path: Path) -> str:
    ncu = shutil.which("ncu") or next((p for p in ("/usr/local/cuda/bin/ncu",) if Path(p).exists()), None)
    if ncu is None:
        raise ProfileError(f"{path}: reading a .ncu-rep needs Nsight Compute's ncu on PATH; or export it "
                               f"where ncu is installed: ncu --import {path.name} --csv --page raw "
                               f"--print-units base > {path.stem}.csv")
    try:
        proc = subprocess.run([ncu, "--import", str(path), "--csv", "--page", "raw", "--print-units", "base"],
                              capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProfileError(f"{path}: ncu --import failed: {exc}") from exc
    if proc.returncode != 0:
        last = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
        raise ProfileError(f"{path}: ncu --import failed (exit {proc.returncode}): {last}")
    return proc.stdout


def load_profile(path: str | Path, *, field_map: FieldMap | None = None) -> Profile:
    """Read an ncu raw-page CSV or an ``.ncu-rep`` (through ``ncu --import``) into a :class:`Profile`."""
    p = Path(path)
    if not p.is_file():
        raise ProfileError(f"{p}: no such profile file")
    if p.suffix == ".ncu-rep":
        return parse_csv_text(_import_report(p), source=str(p), field_map=field_map)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ProfileError(f"{p}: cannot read: {exc}") from exc
    if raw[:3] == b"NVR" or b"\x00" in raw[:4096]:
        raise ProfileError(f"{p}: a binary file, not CSV (an ncu report? name it .ncu-rep)")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    return parse_csv_text(text, source=str(p), field_map=field_map)
