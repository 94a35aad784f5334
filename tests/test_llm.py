"""LLMClient against the local OpenAI-compatible test server, through the real openai client over HTTP."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from kernelskill.config import LLMSettings, Price
from kernelskill.errors import KernelskillError
from kernelskill.pipeline.loop.llm import LLMClient, LLMError, parse_json_answer
from kernelskill.pipeline.runs import EVENTS
from tests.openai_test_server import ScriptedOpenAI

SCHEMA = {"type": "object", "required": ["method", "plan"],
          "properties": {"method": {"type": "string"}, "plan": {"type": "string", "minLength": 1}}}


def settings(url: str, **kw) -> LLMSettings:
    base = {"base_url": url, "model": "test-model", "api_key": "sk-test", "timeout_s": 5.0, "max_retries": 3,
            "backoff_s": 0.01, "prices": {"test-model": Price(input=2.0, output=8.0)}}
    return LLMSettings(**{**base, **kw})


def msgs(text: str = "hi") -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_chat_accounts_tokens_and_cost_and_logs_the_call(tmp_path: Path) -> None:
    with ScriptedOpenAI({"s1": ["hello there"]}) as server:
        client = LLMClient.from_settings(settings(server.base_url), run_dir=tmp_path)
        r = client.chat("planner", msgs("x" * 400), step="s1")
    assert r.text == "hello there"
    assert r.usage.prompt_tokens == 101 and r.usage.completion_tokens == 3
    assert r.cost_usd == pytest.approx((101 * 2.0 + 3 * 8.0) / 1e6)
    events = [json.loads(line) for line in (tmp_path / EVENTS).read_text().splitlines()]
    assert [(e["kind"], e["type"], e["step"]) for e in events] == [("llm", "llm_call", "s1")]
    assert events[0]["data"]["messages"][0]["content"] == "x" * 400
    assert events[0]["data"]["text"] == "hello there" and events[0]["data"]["role"] == "planner"
    assert server.requests[0]["role"] == "planner"


def test_retries_on_429_500_broken_body_and_timeout(tmp_path: Path) -> None:
    script = {"s": [{"status": 429, "retry_after": 0}, {"status": 500}, {"raw": "{not json"},
                    {"delay": 1.5, "text": "late"}, "finally"]}
    with ScriptedOpenAI(script) as server:
        client = LLMClient.from_settings(settings(server.base_url, timeout_s=0.4, max_retries=4), run_dir=tmp_path)
        r = client.chat("optimizer", msgs(), step="s")
        assert r.text == "finally" and r.attempts == 5
        assert [f.split()[0] for f in r.faults] == ["429", "500", "JSONDecodeError:", "APITimeoutError:"]
        assert server.count("s") == 5
        assert client.totals.requests == 5


def test_gives_up_after_bounded_retries(tmp_path: Path) -> None:
    with ScriptedOpenAI({"s": [{"status": 500}] * 5}) as server:
        client = LLMClient.from_settings(settings(server.base_url, max_retries=2), run_dir=tmp_path)
        with pytest.raises(LLMError, match="gave up after 3 attempts"):
            client.chat("planner", msgs(), step="s")
        assert server.count("s") == 3
        # the failure is logged for analysis, but the step stays unanswered: a resume asks again
        events = [json.loads(line) for line in (tmp_path / EVENTS).read_text().splitlines()]
        assert [(e["type"], e["step"]) for e in events] == [("llm_error", "s")]
        server.script["s"] = ["back"]
        again = LLMClient.from_settings(settings(server.base_url), run_dir=tmp_path).chat("planner", msgs(), step="s")
        assert again.text == "back" and server.count("s") == 4


def test_client_errors_are_not_retried(tmp_path: Path) -> None:
    with ScriptedOpenAI({"s": [{"status": 400, "message": "bad request"}]}) as server:
        client = LLMClient.from_settings(settings(server.base_url), run_dir=tmp_path)
        with pytest.raises(LLMError, match="400"):
            client.chat("planner", msgs(), step="s")
        assert server.count("s") == 1


def test_a_recorded_step_is_never_requested_again(tmp_path: Path) -> None:
    with ScriptedOpenAI({"s": ["first"]}) as server:
        LLMClient.from_settings(settings(server.base_url), run_dir=tmp_path).chat("planner", msgs(), step="s")
        again = LLMClient.from_settings(settings(server.base_url), run_dir=tmp_path).chat("planner", msgs(), step="s")
        assert again.text == "first" and again.from_log
        assert server.count("s") == 1


def test_complete_json_validates_and_retries_once(tmp_path: Path) -> None:
    good = '```json\n{"method": "coalesced_access", "plan": "use float4"}\n```'
    with ScriptedOpenAI({"j": ["no json here"], "j.retry": [good]}) as server:
        client = LLMClient.from_settings(settings(server.base_url), run_dir=tmp_path)
        value = client.complete_json("feature_fallback", "classify", SCHEMA, step="j")
        assert value == {"method": "coalesced_access", "plan": "use float4"}
        assert server.steps() == ["j", "j.retry"]
        assert "not usable" in server.requests[1]["messages"][-1]["content"]
    with ScriptedOpenAI({"k": ['{"method": 3}'], "k.retry": ['{"plan": ""}']}) as server:
        client = LLMClient.from_settings(settings(server.base_url), run_dir=tmp_path)
        with pytest.raises(LLMError, match="no valid JSON"):
            client.complete_json("feature_fallback", "classify", SCHEMA, step="k")


def test_parse_json_answer_reasons() -> None:
    assert parse_json_answer("nothing", SCHEMA) == (None, "no JSON object found")
    assert "missing required field 'plan'" in parse_json_answer('{"method": "a"}', SCHEMA)[1]
    assert "expected string" in parse_json_answer('{"method": 1, "plan": "p"}', SCHEMA)[1]
    assert parse_json_answer('Sure: {"method": "a", "plan": "p"} done', SCHEMA)[0] == {"method": "a", "plan": "p"}


def test_replay_answers_from_a_recorded_run_at_no_cost(tmp_path: Path) -> None:
    recorded, replayed = tmp_path / "a", tmp_path / "b"
    with ScriptedOpenAI({"s1": ["one"], "s2": ["two"]}) as server:
        live = LLMClient.from_settings(settings(server.base_url), run_dir=recorded)
        live.chat("planner", msgs(), step="s1")
        live.chat("optimizer", msgs(), step="s2")
    client = LLMClient.from_settings(LLMSettings(provider="replay", base_url=str(recorded)), run_dir=replayed)
    assert client.chat("optimizer", msgs(), step="s2").text == "two"
    r = client.chat("planner", msgs(), step="s1")
    assert r.text == "one" and r.cost_usd == 0.0 and r.provider == "replay"
    with pytest.raises(LLMError, match="no recorded answer for step s3"):
        client.chat("planner", msgs(), step="s3")


def test_endpoint_and_key_checks_are_one_line_errors(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = LLMClient.from_settings(settings(f"http://127.0.0.1:{port}/v1"))
    with pytest.raises(KernelskillError, match=f"cannot reach http://127.0.0.1:{port}/v1") as info:
        client.check_endpoint(timeout_s=1.0)
    assert "\n" not in str(info.value)
    with ScriptedOpenAI() as server:
        LLMClient.from_settings(settings(server.base_url)).check_endpoint()
        assert server.model_list_calls == 1
        nokey = LLMClient.from_settings(settings(server.base_url, api_key=None, api_key_env="KS_TEST_NO_SUCH_KEY"))
        with pytest.raises(KernelskillError, match="no API key"):
            nokey.check_endpoint()


def test_a_registered_provider_is_recorded_like_the_api(tmp_path: Path, monkeypatch) -> None:
    from kernelskill.pipeline.loop import llm as llm_module
    from kernelskill.pipeline.loop.llm import LLMResponse

    monkeypatch.setitem(llm_module.PROVIDERS, "by-hand",
                        lambda client, role, messages, step: LLMResponse(text=f"answer to {step}", provider="by-hand"))
    client = LLMClient.from_settings(LLMSettings(provider="by-hand"), run_dir=tmp_path)
    assert client.chat("planner", msgs(), step="r01.plan.1").text == "answer to r01.plan.1"
    again = LLMClient.from_settings(LLMSettings(provider="by-hand"), run_dir=tmp_path)
    assert again.chat("planner", msgs(), step="r01.plan.1").from_log
    with pytest.raises(KernelskillError, match="not available here"):
        LLMClient.from_settings(LLMSettings(provider="nope"))
