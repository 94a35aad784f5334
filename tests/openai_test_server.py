"""A local OpenAI-compatible HTTP server (standard library only) that serves scripted answers and faults.

It listens on 127.0.0.1 at a random port and answers ``GET /v1/models`` and
``POST /v1/chat/completions``. Each request is matched to its step by the ``X-Kernelskill-Step``
header that :class:`kernelskill.pipeline.loop.llm.LLMClient` sends. A reply is one of:

- a string: the assistant's message;
- ``{"status": 429}`` / ``{"status": 500}``: an HTTP error (``retry_after`` optional);
- ``{"delay": 2.0, "text": "..."}``: answered late (makes a client with a short timeout give up);
- ``{"raw": "..."}``: a broken HTTP body (not JSON);
- a callable ``(step, role, body) -> reply``.

``script`` maps a step to a list of replies consumed in order; ``responder`` answers whatever the
script does not. Every request is recorded in ``requests`` (step, role, what was served).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Any
Responder = Callable[[str, str, dict[str, Any]], Reply]


class ScriptedOpenAI:
    def __init__(self, script: dict[str, list[Reply]] | None = None, responder: Responder | None = None,
                 model: str = "test-model") -> None:
        self.script = {k: list(v) for k, v in (script or {}).items()}
        self.responder = responder
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.model_list_calls = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle ---------------------------------------------------------------------------------
    def __enter__(self) -> ScriptedOpenAI:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> str:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802
                if self.path.rstrip("/").endswith("/models"):
                    owner.model_list_calls += 1
                    owner._send(self, 200, {"object": "list", "data": [
                        {"id": owner.model, "object": "model", "created": 0, "owned_by": "test"}]})
                else:
                    owner._send(self, 404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                step = self.headers.get("x-kernelskill-step") or "?"
                role = self.headers.get("x-kernelskill-role") or "?"
                owner._answer(self, step, role, body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self.base_url

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    # queries -------------------------------------------------------------------------------------
    def steps(self) -> list[str]:
        return [r["step"] for r in self.requests]

    def count(self, step: str) -> int:
        return sum(1 for r in self.requests if r["step"] == step)

    # serving -------------------------------------------------------------------------------------
    def _next_reply(self, step: str, role: str, body: dict[str, Any]) -> Reply:
        with self._lock:
            queue = self.script.get(step)
            reply = queue.pop(0) if queue else None
        if reply is None and self.responder is not None:
            reply = self.responder(step, role, body)
        if callable(reply):
            reply = reply(step, role, body)
        if reply is None:
            reply = {"status": 500, "message": f"test server: no scripted answer for step {step}"}
        return reply

    def _answer(self, handler: BaseHTTPRequestHandler, step: str, role: str, body: dict[str, Any]) -> None:
        reply = self._next_reply(step, role, body)
        record = {"step": step, "role": role, "t": time.time(), "messages": body.get("messages", []),
                  "served": reply if isinstance(reply, dict) else "text"}
        with self._lock:
            self.requests.append(record)
        if isinstance(reply, dict) and "delay" in reply:
            time.sleep(float(reply["delay"]))
            reply = reply.get("text", "")
        if isinstance(reply, dict) and "status" in reply:
            headers = {"retry-after": str(reply["retry_after"])} if "retry_after" in reply else {}
            self._send(handler, int(reply["status"]), {"error": {
                "message": reply.get("message", "scripted fault"), "type": "test", "code": reply["status"]}},
                headers)
            return
        if isinstance(reply, dict) and "raw" in reply:
            self._send_bytes(handler, 200, str(reply["raw"]).encode())
            return
        text = str(reply)
        prompt_chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
        usage = {"prompt_tokens": prompt_chars // 4 + 1, "completion_tokens": len(text) // 4 + 1}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        self._send(handler, 200, {
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", self.model),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": usage})

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, payload: dict[str, Any],
              headers: dict[str, str] | None = None) -> None:
        ScriptedOpenAI._send_bytes(handler, status, json.dumps(payload).encode(), headers)

    @staticmethod
    def _send_bytes(handler: BaseHTTPRequestHandler, status: int, data: bytes,
                    headers: dict[str, str] | None = None) -> None:
        try:
            handler.send_response(status)
            handler.send_header("content-type", "application/json")
            handler.send_header("content-length", str(len(data)))
            for k, v in (headers or {}).items():
                handler.send_header(k, v)
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
            pass


def serve_forever(script_path: str) -> None:  # pragma: no cover - manual use
    """``python tests/openai_test_server.py script.json``: serve a JSON script until Ctrl-C."""
    with open(script_path) as fh:
        script = json.load(fh)
    server = ScriptedOpenAI(script)
    print(server.start(), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":  # pragma: no cover
    import sys

    serve_forever(sys.argv[1])
