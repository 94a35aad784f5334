from pathlib import Path

import pytest

from kernelskill.config import load_settings
from kernelskill.errors import KernelskillError


def test_precedence_file_env_override(tmp_path: Path) -> None:
    home = tmp_path / "h"
    home.mkdir()
    (home / "kernelskill.toml").write_text('arch = "sm_80"\n[llm]\nmodel = "from-file"\ntimeout_s = 5\n')
    s = load_settings(home=home, environ={"KERNELSKILL_LLM_MODEL": "from-env"}, cwd=tmp_path)
    assert s.arch == "sm_80"
    assert s.llm.model == "from-env"
    assert s.llm.timeout_s == 5
    s2 = load_settings(home=home, overrides={"llm": {"model": "flag"}}, environ={}, cwd=tmp_path)
    assert s2.llm.model == "flag"
    assert s2.kb_dir == home / "kb"


def test_home_from_env(tmp_path: Path) -> None:
    s = load_settings(environ={"KERNELSKILL_HOME": str(tmp_path)}, cwd=tmp_path)
    assert s.home == tmp_path


def test_bad_toml_names_file(tmp_path: Path) -> None:
    (tmp_path / "kernelskill.toml").write_text("arch = \n")
    with pytest.raises(KernelskillError, match="kernelskill.toml"):
        load_settings(home=tmp_path, environ={}, cwd=tmp_path)


def test_bad_value_names_field(tmp_path: Path) -> None:
    with pytest.raises(KernelskillError, match="llm.timeout_s"):
        load_settings(home=tmp_path, environ={"KERNELSKILL_LLM_TIMEOUT_S": "soon"}, cwd=tmp_path)


def test_a_variable_that_names_no_setting_is_ignored_with_one_warning(tmp_path: Path, caplog) -> None:
    import logging

    from kernelskill import config

    config._warned.discard("KERNELSKILL_LOOP_NO_SUCH_THING")
    env = {"KERNELSKILL_HARNESS_HIDE": "/x", "KERNELSKILL_LOOP_NO_SUCH_THING": "3", "KERNELSKILL_LOOP_ROUNDS": "4"}
    with caplog.at_level(logging.WARNING, logger="kernelskill.config"):
        first = load_settings(home=tmp_path, environ=env, cwd=tmp_path)
        load_settings(home=tmp_path, environ=env, cwd=tmp_path)
    assert first.loop.rounds == 4
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and "KERNELSKILL_LOOP_NO_SUCH_THING" in warned[0] and "HIDE" not in warned[0]
    with pytest.raises(KernelskillError, match="loop.rounds"):
        load_settings(home=tmp_path, environ={**env, "KERNELSKILL_LOOP_ROUNDS": "many"}, cwd=tmp_path)
