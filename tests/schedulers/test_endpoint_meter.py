"""The endpoint meter (schedulers/on_node/endpoint_meter.py) as it runs on a node, with the
node's python3: between a client and a stand-in model server it passes answers unchanged
(streamed, sized, keep-alive), counts a streamed answer's tokens and times its first,
and logs what it saw with portal_metrics; with a command, it starts the server on the
port it chose and stops it when stopped."""

import json
import signal
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from devtools.ports import free_port
from tests.polling import until

ON_NODE = Path(__file__).resolve().parents[2] / "schedulers" / "on_node"
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
TOKENS = ["Beautiful", " is", " better", " than", " ugly"]


def event(content: str | None) -> bytes:
    delta = {"role": "assistant"} if content is None else {"content": content}
    body = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


class Model(BaseHTTPRequestHandler):
    """Streams TOKENS (a role-only event first, 20 ms apart, then [DONE]) in chunked
    encoding, or answers a sized JSON body; keep-alive."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if json.loads(body).get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            pieces = [event(None)] + [event(t) for t in TOKENS] + [b"data: [DONE]\n\n"]
            for piece in pieces:
                # an event split across two chunks, as servers do
                for part in (piece[:7], piece[7:]):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self.wfile.flush()
                time.sleep(0.02)
            self.wfile.write(b"0\r\n\r\n")
        else:
            answer = json.dumps({"echo": body.decode()}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)


@pytest.fixture
def model():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Model)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_port
    server.shutdown()


def start_meter(tmp_path, *argv: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ON_NODE),
        "PORTAL_METRICS_DIR": str(tmp_path / "metrics"),
        "PORTAL_ENDPOINT_METER_INTERVAL": "0.3",
        "PORTAL_SYSTEM_METRICS_INTERVAL": "0",
    }
    meter = subprocess.Popen(
        [PYTHON, "-m", "endpoint_meter", "--port", str(port), *argv], env=env, cwd=tmp_path
    )
    until(lambda: _answers(port), 20, "the meter")
    return meter, port


def _answers(port: int) -> bool:
    try:
        httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
        return True
    except httpx.HTTPError:
        return False


def logged(tmp_path) -> list[dict]:
    found = []
    for path in (tmp_path / "metrics").glob("*.jsonl"):
        found += [json.loads(line) for line in path.read_text().splitlines() if line]
    return found


def test_answers_pass_unchanged_and_a_streams_tokens_are_timed(tmp_path, model):
    meter, port = start_meter(tmp_path, "--upstream", f"127.0.0.1:{model}")
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            streamed = b""
            request = {"stream": True, "messages": []}
            with client.stream("POST", "/v1/chat/completions", json=request) as answer:
                assert answer.headers["content-type"] == "text/event-stream"
                for data in answer.iter_bytes():
                    streamed += data
            expected = event(None) + b"".join(event(t) for t in TOKENS) + b"data: [DONE]\n\n"
            assert streamed == expected
            sized = client.post("/invocations", json={"inputs": [[1, 2]]})  # the same connection
            assert sized.json() == {"echo": '{"inputs":[[1,2]]}'}

        def reported():
            values: dict = {}
            for row in logged(tmp_path):
                values.update(row["metrics"])
            return values if values.get("endpoint/requests", 0) >= 2 else None

        values = until(reported, 10, "the meter's report of both requests")
        assert 0 < values["endpoint/ttft_ms"] < 1000
        # 4 tokens after the first in ~80 ms: about 50 a second
        assert 20 < values["endpoint/tokens_per_second"] < 70, values
    finally:
        meter.terminate()
        meter.wait(10)


def test_with_a_command_it_starts_the_server_on_its_port_and_stops_it(tmp_path):
    (tmp_path / "hello.txt").write_text("hello")
    server = ["python3", "-m", "http.server", "@PORT@", "--bind", "127.0.0.1"]
    meter, port = start_meter(tmp_path, "--", *server)
    try:
        assert httpx.get(f"http://127.0.0.1:{port}/hello.txt", timeout=5).text == "hello"
        child = subprocess.run(
            ["pgrep", "-f", "http.server [0-9]+ --bind"], capture_output=True, text=True
        ).stdout.split()
        assert child
    finally:
        meter.send_signal(signal.SIGTERM)
        assert meter.wait(20) == 0
    until(
        lambda: not subprocess.run(["pgrep", "-f", f"--port {port} -- python3"]).returncode == 0,
        10,
        "the server stopped with the meter",
    )


def test_a_server_not_up_yet_is_a_502_and_its_end_ends_the_meter(tmp_path):
    script = textwrap.dedent(
        """
        import sys, time
        time.sleep(1)
        sys.exit(7)
        """
    )
    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ON_NODE)}
    meter = subprocess.Popen(
        [PYTHON, "-m", "endpoint_meter", "--port", str(port), "--", "python3", "-c", script],
        env=env,
    )
    until(lambda: _answers(port), 20, "the meter")
    assert httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5).status_code == 502
    assert meter.wait(20) == 7
