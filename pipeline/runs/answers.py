"""What makes an LLM answer usable, whoever wrote it (a model behind an API, or a person or an agent through
the exchange's files): a ModelNew file of the asked candidate format, or one JSON object valid under the role's
schema whose method is from the permitted list. The loop's roles and ``runs answer`` check with these same
functions; they need nothing but the standard library, so storing an answer never loads torch or the harness.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from kernelskill.pipeline.runs.bounds import loads_json, parse_python, text_problem

_CODE_FENCE = re.compile(r"^[ \t]*```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)(?:^[ \t]*```[ \t]*$|\Z)", re.S | re.M)
_MODELNEW = re.compile(r"^\s*class\s+ModelNew\b", re.M)


# Code answers -----------------------------------------------------------------------------------
def _is_triton_kernel(node: ast.AST) -> bool:
    if not isinstance(node, ast.FunctionDef):
        return False
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if isinstance(target, ast.Attribute) and target.attr == "jit" and \
                isinstance(target.value, ast.Name) and target.value.id == "triton":
            return True
    return False


def format_problem(code: str, candidate_format: str) -> str:
    """Why ``code`` (a parsed ModelNew file) is not a candidate of this format ("" when it is)."""
    if candidate_format != "triton":
        return ""
    tree = ast.parse(code)
    if not any(_is_triton_kernel(node) for node in ast.walk(tree)):
        return "the triton format needs at least one @triton.jit kernel that ModelNew.forward launches"
    return ""


def extract_code(text: str, candidate_format: str = "load_inline") -> tuple[str | None, str]:
    """(code, "") for the block that defines ModelNew (a file of ``candidate_format``), else (None, reason).
    Never raises: an answer outside the bounds of :mod:`~kernelskill.pipeline.runs.bounds` is a reason."""
    problem = text_problem(text)
    if problem:
        return None, problem
    blocks = [(lang.lower(), body) for lang, body in _CODE_FENCE.findall(text)]
    code: str | None = None
    with_model = [body for lang, body in blocks if _MODELNEW.search(body) and lang in ("", "python", "py",
                                                                                       "python3")]
    with_model = with_model or [body for _, body in blocks if _MODELNEW.search(body)]
    if with_model:
        code = with_model[-1]
    elif not blocks and _MODELNEW.search(text):
        lines = text.splitlines()
        first = next((i for i, line in enumerate(lines)
                      if re.match(r"\s*(import |from |class |#|@|def )", line)), 0)
        code = "\n".join(lines[first:])
    if code is None:
        return None, ("no code block defines class ModelNew" if blocks or text.strip()
                      else "the answer was empty")
    code = code.strip("\n") + "\n"
    tree, problem = parse_python(code)
    if tree is None:
        return None, problem
    if not any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body):
        return None, "ModelNew must be a top-level class"
    problem = format_problem(code, candidate_format)
    return (None, problem) if problem else (code, "")


# JSON answers -----------------------------------------------------------------------------------
_JSON_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.S)


def parse_json_answer(text: str, schema: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """(value, "") when ``text`` holds a JSON object valid under ``schema``, else (None, reason)."""
    problem = text_problem(text)
    if problem:
        return None, problem
    candidates = [m.group(1) for m in _JSON_FENCE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        candidates.append(text[start:end + 1])
    if not candidates:
        return None, "no JSON object found"
    reason = "no JSON object found"
    for chunk in candidates:
        value, problem = loads_json(chunk)
        if problem:
            reason = problem
            continue
        if not isinstance(value, dict):
            reason = "the JSON is not an object"
            continue
        errors = validate_schema(value, schema)
        if not errors:
            return value, ""
        reason = "; ".join(errors[:3])
    return None, reason


_TYPES: dict[str, tuple[type, ...]] = {"object": (dict,), "array": (list,), "string": (str,),
                                       "integer": (int,), "number": (int, float), "boolean": (bool,),
                                       "null": (type(None),)}


def validate_schema(value: Any, schema: dict[str, Any], path: str = "$") -> list[str]:
    """The subset of JSON Schema the roles use: type, enum, required, properties,
    additionalProperties, items, minLength, minimum, maximum."""
    errors: list[str] = []
    expected = schema.get("type")
    if expected:
        names = expected if isinstance(expected, list) else [expected]
        ok = any(isinstance(value, _TYPES[n]) and not (n in ("integer", "number") and isinstance(value, bool))
                 for n in names)
        if not ok:
            return [f"{path}: expected {'/'.join(names)}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, str) and len(value) < schema.get("minLength", 0):
        errors.append(f"{path}: shorter than {schema['minLength']} characters")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path}: {value} < {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path}: {value} > {schema['maximum']}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                errors.append(f"{path}: missing required field {key!r}")
        for key, sub in value.items():
            if key in props:
                errors.extend(validate_schema(sub, props[key], f"{path}.{key}"))
            elif schema.get("additionalProperties") is False:
                errors.append(f"{path}: unexpected field {key!r}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            errors.extend(validate_schema(item, schema["items"], f"{path}[{i}]"))
    return errors


# An answer against the shape its request expects (``Request.expects``) ----------------------------
def check_answer(expects: dict[str, Any], text: str) -> str:
    """Why ``text`` is not a usable answer of that shape ("" when it is): the same parsers and rules
    that the roles apply to an API answer (code defining ModelNew; JSON valid under the role's schema;
    a planner's method from the permitted list)."""
    problem = text_problem(text)
    if problem:
        return problem
    kind = expects.get("kind")
    if kind == "code":
        return extract_code(text, expects.get("format") or "load_inline")[1]
    if kind == "json":
        value, reason = parse_json_answer(text, expects.get("schema") or {"type": "object"})
        if value is None:
            return reason
        allowed = expects.get("method_in")
        if "plans" in (expects.get("schema") or {}).get("properties", {}):  # the search's several plans
            return plans_problem(value, allowed, int(expects.get("plans_wanted") or 1))
        if allowed is not None and value.get("method") not in allowed:
            return f"`{value.get('method')}` is not in the permitted list; choose one of: {', '.join(allowed)}"
        return ""
    return "" if text.strip() else "the answer was empty"


def plans_problem(value: dict[str, Any], allowed: list[str] | None, wanted: int) -> str:
    """Why a planner's ``{"plans": [...]}`` answer is not usable ("" when it is): at most ``wanted`` plans,
    each method from ``allowed`` (when given), and no method twice while enough distinct ones are allowed."""
    plans = value.get("plans") or []
    if not plans:
        return "no plans in the answer"
    if len(plans) > wanted:
        return f"{len(plans)} plans; at most {wanted} were asked for"
    methods = [str(p.get("method")) for p in plans]
    if allowed is not None:
        bad = [m for m in methods if m not in allowed]
        if bad:
            return f"`{bad[0]}` is not in the permitted list; choose from: {', '.join(allowed)}"
    distinct = len(allowed) if allowed is not None else wanted
    if len(set(methods)) < len(methods) and len(set(methods)) < min(distinct, len(methods)):
        return "a method appears twice while other methods are permitted; give each plan its own method"
    return ""


__all__ = ["check_answer", "extract_code", "format_problem", "parse_json_answer", "plans_problem", "validate_schema"]
