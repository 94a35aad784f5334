"""Protocols: the presets, a user file, and the one settings path from settings to the harness config."""

from __future__ import annotations

import pytest

from kernelskill.config import HarnessSettings
from kernelskill.errors import KernelskillError
from kernelskill.pipeline.harness import EvalConfig
from kernelskill.pipeline.harness.config import eval_config
from kernelskill.protocols import PRESETS, load_protocol


def test_presets_differ_where_kernelbench_differs():
    strict, kb = PRESETS["strict"], PRESETS["kernelbench"]
    assert strict.tolerance("float32") == kb.tolerance("float32") == (1e-4, 1e-4)  # KernelBench's fp32
    assert kb.tolerance("float16") == (1e-2, 1e-2)
    assert (strict.library_policy, strict.torch_ops, strict.shapes) == ("forbid", "reject", "vary_all")
    assert (kb.library_policy, kb.torch_ops) == ("allow_gemm_conv", "warn")
    assert not strict.allow_tf32 and not kb.allow_tf32


def test_config_follows_the_preset():
    cfg = eval_config({}, protocol="kernelbench")
    assert (cfg.protocol, cfg.library_policy, cfg.torch_ops) == ("kernelbench", "allow_gemm_conv", "warn")
    assert cfg.tolerance("float16") == (1e-2, 1e-2)
    strict = eval_config({})
    assert (strict.protocol, strict.library_policy, strict.torch_ops, strict.shapes) == \
        ("strict", "forbid", "reject", "vary_all")


def test_user_file_starts_from_a_preset(tmp_path):
    f = tmp_path / "loose.toml"
    f.write_text('base = "kernelbench"\nallow_tf32 = true\n[tolerances]\nfloat32 = [1e-3, 1e-3]\n')
    proto = load_protocol(f)
    assert proto.name == "loose" and proto.allow_tf32 and proto.library_policy == "allow_gemm_conv"
    cfg = eval_config({"protocol": str(f)})
    assert cfg.protocol == "loose" and cfg.allow_tf32 and cfg.tolerance("float32") == (1e-3, 1e-3)
    assert cfg.tolerance("float16") == (1e-2, 1e-2)  # the base's


@pytest.mark.parametrize("text, word", [('shapes = "sideways"\n', "shapes"), ('speed = 3\n', "unknown"),
                                        ('base = "nope"\n', "base")])
def test_bad_protocol_file_is_one_line(tmp_path, text, word):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(KernelskillError) as exc:
        load_protocol(f)
    assert word in str(exc.value) and "\n" not in str(exc.value)


def test_unknown_protocol_name():
    with pytest.raises(KernelskillError, match="not a preset"):
        eval_config({}, protocol="fast-and-loose")


def test_settings_win_over_the_protocol_and_arguments_over_settings():
    settings = HarnessSettings(protocol="kernelbench", library_policy="forbid", atol=1e-3, timing_trials=50)
    cfg = eval_config(settings.model_dump(), seed=7, cache_dir="/tmp/x", baseline="compile")
    assert cfg.protocol == "kernelbench" and cfg.torch_ops == "warn"
    assert cfg.library_policy == "forbid"  # explicit setting over the preset
    assert cfg.tolerance("float32") == (1e-3, 1e-4)
    assert (cfg.seed, cfg.cache_dir, cfg.baseline, cfg.timing_trials) == (7, "/tmp/x", "compile", 50)
    assert eval_config(settings.model_dump(), protocol="strict").torch_ops == "reject"  # argument wins


def test_settings_and_config_agree_on_defaults():
    """One default per limit: the settings file and the harness config cannot disagree (run_timeout_s was 120/180)."""
    settings, cfg = HarnessSettings(), EvalConfig()
    for name in ("correctness_trials", "timing_trials", "timing_budget_s", "warmup", "build_timeout_s",
                 "run_timeout_s", "protocol", "compile_baseline"):
        assert getattr(settings, name) == getattr(cfg, name), name
    assert eval_config(settings.model_dump()) == EvalConfig.from_protocol("strict")


def test_query_context_follows_the_protocol():
    from kernelskill.config import Settings
    from kernelskill.retrieval.context import default_tolerance, settings_context

    kb = Settings(harness=HarnessSettings(protocol="kernelbench"))
    assert settings_context(kb)["library_calls_allowed"] is True
    assert settings_context(Settings())["library_calls_allowed"] is False
    assert default_tolerance("fp16", "kernelbench") == {"tolerance_atol": 1e-2, "tolerance_rtol": 1e-2}
