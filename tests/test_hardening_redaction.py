"""Secrets never enter events, prompts or exchange files: known values (the environment's secret
variables, the API key of kernelskill.toml) and secret shapes (``sk-...`` keys, private-key blocks) are
replaced by ``[redacted]`` wherever a run writes or sends text."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelskill.config import load_settings
from kernelskill.pipeline.loop.agents import messages_for
from kernelskill.pipeline.loop.llm import LLMClient
from kernelskill.pipeline.runs import EVENTS, EventLog, Paused
from kernelskill.pipeline.runs.exchange import Answer, Exchange
from kernelskill.pipeline.runs.redact import REDACTED, Redactor

ENV_KEY = "sk-envsecret-0123456789abcdef"
CLOUD = "cloud-secret-value-42"
TOML_KEY = "toml-api-key-9f8e7d6c"
SHAPED = "sk-proj-AbCdEfGhIjKlMnOpQrStUv"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7probe\n-----END RSA PRIVATE KEY-----"
ALL = (ENV_KEY, CLOUD, TOML_KEY, SHAPED, "MIIEowIBAAKCAQEA7probe")


@pytest.fixture
def secrets_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / "kernelskill.toml").write_text(f'[llm]\nprovider = "exchange"\napi_key = "{TOML_KEY}"\n')
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    monkeypatch.setenv("MY_CLOUD_SECRET", CLOUD)
    return home


def _leak(text: str) -> list[str]:
    return [s for s in ALL if s in text]


def test_redactor_knows_env_values_and_shapes(secrets_env: Path) -> None:
    r = Redactor()
    text = r.text(f"key={ENV_KEY} cloud={CLOUD} shaped={SHAPED}\n{PEM}\nplain words stay")
    assert _leak(text) == [] and text.count(REDACTED) == 4 and "plain words stay" in text


def test_events_prompts_and_exchange_files_hold_no_secret(secrets_env: Path, tmp_path: Path) -> None:
    settings = load_settings(home=secrets_env)
    run = tmp_path / "run"
    run.mkdir()
    log = EventLog(run / EVENTS)
    client = LLMClient(settings.llm, log_=log)  # registers the API key read from kernelskill.toml
    failure = f"RuntimeError: auth failed for {TOML_KEY} (env {ENV_KEY}); {SHAPED}\n{PEM}"
    log.append("gpu", "eval", {"message": failure, "nested": [{"stderr": CLOUD}]}, step="r00.eval")
    messages = messages_for("diagnoser", gpu={"name": "H200", "arch": "sm_90", "notes": failure},
                            task_source="# task", kernel_source=f"# kernel {ENV_KEY}",
                            failure={"status": "runtime_error", "message": failure, "build_log": CLOUD},
                            memory={"attempts": [], "repairs": [], "total_attempts": 0})
    assert _leak(str(messages)) == []  # the rendered prompt
    with pytest.raises(Paused):
        client.chat("diagnoser", [*messages, {"role": "user", "content": failure}], step="r00.diagnose.1")
    prompt = (run / "exchange" / "r00.diagnose.1.prompt.md").read_text()
    request = (run / "exchange" / "r00.diagnose.1.request.json").read_text()
    assert _leak(prompt) == [] and _leak(request) == [] and REDACTED in prompt
    Exchange(run).put_answer(Answer(id="r00.diagnose.1", text=f'{{"root_cause": "{CLOUD}"}}'))
    client.chat("diagnoser", messages, step="r00.diagnose.1")
    stored = (run / EVENTS).read_text()
    assert "llm_call" in stored and _leak(stored) == [], _leak(stored)


def test_encoded_forms_of_a_known_value_are_redacted() -> None:
    import base64
    import urllib.parse

    secret = "plain-looking-value-1234"
    r = Redactor([secret, secret + "/+="])
    inside = f"config: token={secret} end".encode()
    for text in (base64.b64encode(inside).decode(), base64.urlsafe_b64encode(b"?" + inside).decode(),
                 base64.encodebytes(b"ab" + inside * 3).decode(), inside.hex(), inside.hex().upper(),
                 "https://x/?q=" + urllib.parse.quote(secret + "/+=", safe="")):
        out = r.text(text)
        assert REDACTED in out, text
        assert secret not in out and secret.encode().hex() not in out.lower()
    assert r.text("nothing secret here, just words") == "nothing secret here, just words"


def test_secret_files_beside_the_run_are_registered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelskill.pipeline.runs import redact

    monkeypatch.setattr(redact, "_registered", set())
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "kernelskill.toml").write_text('[llm]\napi_key = "home-key-abcdef"\napi_key_env = "SOME_VAR_NAME"\n'
                                           '[other]\nservice_token = "svc-token-123456"\n')
    (work / ".env").write_text('# x\nexport A="quoted-value-1"\nB=bare-value-2 # comment\nshort=abc\n')
    monkeypatch.chdir(work)
    redact.register_settings(type("S", (), {"home": home, "llm": None})())
    known = set(redact.secret_values({}))
    assert {"home-key-abcdef", "svc-token-123456", "quoted-value-1", "bare-value-2"} <= known
    assert "SOME_VAR_NAME" not in known and "abc" not in known
