"""`kmon mcp` as an agent reaches it, through the MCP SDK's own client (stdio and streamable HTTP),
answering from a real API server over views and a history built by hand (tests/unit/test_api.py's)."""
import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from cli import api_answers
from stack.process import free_port
from tests.support import eventually
from tests.unit.test_api import NOW, serving

KMON = str(Path(sys.executable).with_name("kmon"))


def calls(server, *asked: tuple[str, dict]) -> list[tuple[bool, str]]:
    """Each (tool, arguments) in one session of the SDK's client: whether it is an error, and its text."""
    async def go() -> list[tuple[bool, str]]:
        answers = []
        async with Client(server, read_timeout_seconds=60) as client:
            for tool, arguments in asked:
                result = await client.call_tool(tool, arguments)
                answers.append((result.is_error, "\n".join(c.text for c in result.content)))
        return answers
    return asyncio.run(go())


def call(server, tool: str, **arguments) -> tuple[bool, str]:
    return calls(server, (tool, arguments))[0]


@pytest.fixture
def served(tmp_path: Path):
    with serving(tmp_path) as both:
        yield both


def stdio(url: str, *more: str) -> StdioServerParameters:
    return StdioServerParameters(command=KMON, args=["mcp", "--api-url", url, *more], env=dict(os.environ))


def test_the_three_tools_over_stdio(served):
    _, url = served
    (error, health), (changed_error, changed), (explained_error, explained) = calls(
        stdio(url), ("cluster_health", {}), ("what_changed", {"since": "1d", "kind": "broker_gone"}),
        ("explain", {"entity": "partition:t:0", "cluster": "c1"}))
    assert not error
    assert "Cluster c1 (ZooKeeper mode)" in health and "controller: broker 1 (epoch 4)" in health
    assert "brokers: up 1, 2; down 3" in health
    assert "- broker 3 down since 2026-11-18T11:06:35.000Z" in health
    assert "t:1 under min ISR: ISR [2] of replicas [2, 3, 1], leader 2, min ISR 2" in health
    assert "group g (classic) stalled (t:0 stalled)" in health

    assert not changed_error and changed.splitlines() == [
        "1 transitions in the last 1d (kind broker_gone), oldest first (1 broker_gone):",
        "2026-11-18T11:06:35.000Z  c1  broker_gone  broker 3  broker 3"]

    assert not explained_error
    assert explained.startswith("partition:t:0 in cluster c1: one partition's leader, ISR and epochs.")
    assert "Now: leader 1, ISR [1, 2]" in explained and "How it got there (its last 7 transitions):" in explained
    assert "What else changed within 5 minutes of 2026-11-18T11:06:35.006Z (1 broker_gone):" in explained


def test_a_bad_request_is_a_tool_error_that_says_why(served):
    _, url = served
    (error, said), (unknown, about) = calls(stdio(url), ("what_changed", {"since": "yesterday"}),
                                            ("explain", {"entity": "broker:9", "cluster": "c1"}))
    assert error and "since 'yesterday' is not a duration" in said
    assert unknown and "404 no entity 'c1/broker:9'" in about
    error, said = call(stdio("http://127.0.0.1:1"), "cluster_health")
    assert error and "kmon's API at http://127.0.0.1:1 does not answer" in said


def test_streamable_http_serves_the_same_tools(served):
    _, url = served
    port = free_port()
    server = subprocess.Popen([KMON, "mcp", "--api-url", url, "--transport", "streamable-http", "--mcp-port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def answers() -> bool:
            try:
                return not call(f"http://127.0.0.1:{port}/mcp", "cluster_health")[0]
            except Exception:
                return False
        eventually(answers, 30, "kmon mcp's HTTP endpoint")
        assert "down 3" in call(f"http://127.0.0.1:{port}/mcp", "cluster_health")[1]
    finally:
        server.terminate()
        server.wait(30)


def test_without_an_api_url_or_a_stack_it_says_what_to_give(tmp_path: Path):
    said = subprocess.run([KMON, "mcp", "--dir", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert said.returncode == 2 and said.stderr.startswith("kmon mcp: no --api-url, and no local stack")
    creds = tmp_path / "creds.yml"
    creds.write_text("basic_auth: {username: a, pasword: b}\n")
    said = subprocess.run([KMON, "mcp", "--api-url", "http://x", "--api-credentials-file", str(creds)],
                          capture_output=True, text=True, timeout=60)
    assert said.returncode == 2 and said.stderr == (f"kmon mcp: credentials file {creds}: basic_auth: unknown key "
                                                    "pasword (known: password, password_file, username)\n")


def test_times_are_exact_and_say_how_long_ago():
    now_ms = int(NOW * 1000)
    assert api_answers.when(now_ms - 125_500, now_ms) == "since 2026-11-18T11:04:34.500Z (2m 5s ago)"
    assert api_answers.ago(now_ms - 3 * 86_400_000 - 7_200_000, now_ms) == "3d 2h ago"
    assert api_answers.when(None, now_ms) == "since before kmon saw it"
