"""Client CPU per request of the cloud protocols (issue 35) against the OpenAI path, in the same run.

Workload: N agents (default 500), each run 2 model turns and 1 tool call,
against the protocol server (condukt.testing.server) in its own process
with 50 ms added to every request, for each protocol: ``openai:`` (the
baseline), ``azure:`` (Chat Completions, ``api-key``), ``vertex:``
(Gemini on Vertex AI, a bearer token), ``vertex-anthropic:`` (Claude's
``rawPredict``), ``bedrock:`` with a Bedrock API key (no signing) and
``bedrock:`` with SigV4 (botocore's signer on every request), with
``anthropic:`` and ``gemini:`` as reference rows (the Vertex AI rows speak
their protocols: a protocol that sends more events per answer costs more
per streamed request whoever hosts it). Client CPU
per request = this process's CPU time during the runs / requests. Rounds
alternate between the protocols; best of ``--rounds``. The ratio column is
each protocol's CPU per request over the OpenAI path's; the SigV4 row's
extra over the API-key row is the signing, also measured alone (botocore's
``SigV4Auth`` on one request body, per call). Then the event-stream
decoding of one streamed answer: condukt's ``FrameDecoder`` against
botocore's ``EventStreamBuffer``.

The last lines: genai-prices (the ``[prices]`` extra) on its own: its
import in a fresh interpreter, one model's first lookup, then a cost per
response by condukt's flat-rate path and by ``genai_prices.calc_price``.

    cd benchmarks && python providers_cloud.py [--agents 500] [--rounds 3]
"""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys
import time
from typing import Any, ClassVar

import trio

import condukt

LATENCY = 0.05
KEY_ID = "AKIDEXAMPLE"
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"


class Noop(condukt.Tool):
    """The tool every run calls once."""

    name = "noop"
    description = "Does nothing"
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    async def call(self, args: dict, context: condukt.ToolContext) -> str:
        return "ok"


def protocols(url: str) -> dict[str, dict[str, Any]]:
    """Start options of each protocol's agents, by label."""
    vertex = {"project": "bench-project", "location": "us-east5", "token": "ya29.bench"}
    bedrock = {"region": "us-east-1"}
    return {
        "openai (baseline)": {"model": "openai:bench", "api_key": "k", "base_url": url + "/v1"},
        "anthropic (reference)": {"model": "anthropic:claude-bench", "api_key": "k", "base_url": url},
        "gemini (reference)": {"model": "gemini:bench", "api_key": "k", "base_url": url},
        "azure (chat, api-key)": {"model": "azure:bench", "api_key": "k", "base_url": url},
        "vertex (gemini)": {"model": "vertex:bench", "base_url": url, "model_options": vertex},
        "vertex-anthropic": {"model": "vertex-anthropic:claude-bench", "base_url": url, "model_options": vertex},
        "bedrock (api key)": {"model": "bedrock:bench.model-v1:0", "api_key": "k", "base_url": url, "model_options": bedrock},
        "bedrock (SigV4)": {
            "model": "bedrock:bench.model-v1:0",
            "base_url": url,
            "model_options": {**bedrock, "aws_access_key_id": KEY_ID, "aws_secret_access_key": SECRET},
        },
    }


async def one_round(node: condukt.Node, options: dict[str, Any], n: int, stream: bool) -> float:
    """Client CPU seconds per request for ``n`` agents' runs."""
    model_options = {**options.get("model_options", {}), "stream": stream, "max_concurrency": None}
    start_options = {k: v for k, v in options.items() if k != "model_options"}
    agents = [
        await node.spawn(condukt.Agent, tools=[Noop], model_options=model_options, **start_options) for _ in range(n)
    ]
    gc.collect()
    results: list[str] = []

    async def run(agent: condukt.AgentHandle) -> None:
        results.append(await agent.run("go", timeout=60))

    cpu = time.process_time()
    async with trio.open_nursery() as nursery:
        for agent in agents:
            nursery.start_soon(run, agent)
    cpu = time.process_time() - cpu
    assert results == ["done"] * n, results[:3]
    for agent in agents:
        await agent.stop()
    return cpu / (2 * n)


def signing_cost(calls: int = 5000) -> float:
    """Seconds per SigV4 signature of a typical Converse body, by botocore's signer as condukt calls it."""
    from botocore.credentials import Credentials

    from condukt.providers.bedrock import sign

    frozen = Credentials(KEY_ID, SECRET).get_frozen_credentials()
    url = "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse"
    body = b'{"messages":[{"role":"user","content":[{"text":"' + b"x" * 2000 + b'"}]}]}'
    start = time.process_time()
    for _ in range(calls):
        sign(frozen, "us-east-1", url, body)
    return (time.process_time() - start) / calls


def decoding_rows(repeat: int = 3000) -> list[str]:
    """One streamed Bedrock answer's frames decoded by condukt's FrameDecoder and by botocore's parser."""
    from botocore.eventstream import EventStreamBuffer

    from condukt.providers.bedrock import FrameDecoder
    from condukt.testing.server import Reply, bedrock_frames

    frames = bedrock_frames(Reply("Hello there, this is a somewhat longer answer of text.", chunk=8))
    start = time.process_time()
    for _ in range(repeat):
        decoder = FrameDecoder()
        for frame in frames:
            decoder.feed(frame)
    ours = (time.process_time() - start) / repeat
    start = time.process_time()
    for _ in range(repeat):
        buffer = EventStreamBuffer()
        for frame in frames:
            buffer.add_data(frame)
            for message in buffer:
                message.headers.get(":event-type")
    theirs = (time.process_time() - start) / repeat
    return [
        f"event-stream decoding of a {len(frames)}-frame answer: condukt's FrameDecoder {ours * 1e6:.1f} us,"
        f" botocore's EventStreamBuffer {theirs * 1e6:.1f} us ({theirs / ours:.1f}x)"
    ]


def price_rows() -> list[str]:
    """genai-prices: import in a fresh interpreter, a first lookup, a cost per response both ways."""
    try:
        import genai_prices  # noqa: F401  (only to know it is installed; timed below in a fresh process)
    except ImportError:
        return ["genai-prices: not installed (pip install 'condukt[prices]')"]
    code = "import time; t = time.perf_counter(); import genai_prices; print(time.perf_counter() - t)"
    imported = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    from genai_prices import Usage as TableUsage
    from genai_prices import calc_price

    from condukt.messages import Usage
    from condukt.providers import _prices

    start = time.perf_counter()
    _prices._find("anthropic", "claude-sonnet-4-5")
    first = time.perf_counter() - start
    entry = _prices._TABLE[("anthropic", "claude-sonnet-4-5")]
    assert entry is not None
    usage = Usage(1200, 340, 5000, 800)
    calls = 20000
    start = time.process_time()
    for _ in range(calls):
        entry.cost(usage)
    fast = (time.process_time() - start) / calls
    table_usage = TableUsage(input_tokens=7000, output_tokens=340, cache_read_tokens=5000, cache_write_tokens=800)
    slow_calls = 2000
    start = time.process_time()
    for _ in range(slow_calls):
        calc_price(table_usage, "claude-sonnet-4-5", provider_id="anthropic")
    slow = (time.process_time() - start) / slow_calls
    return [
        f"genai-prices: import {imported * 1000:.0f} ms (fresh interpreter; condukt does it in a worker thread,"
        f" on a model's first priced answer); first lookup of a model {first * 1000:.2f} ms",
        f"cost per response: condukt's flat-rate path {fast * 1e6:.2f} us, genai_prices.calc_price {slow * 1e6:.1f} us"
        f" ({slow / fast:.0f}x)",
    ]


async def main(agents: int, rounds: int) -> None:
    import platform

    import botocore
    import httpx

    server = subprocess.Popen(
        [sys.executable, "-m", "condukt.testing.server", "--quiet", "--latency", str(LATENCY)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    url = server.stdout.readline().strip()  # its first line: the base URL
    try:
        print(
            f"{time.strftime('%Y-%m-%d')}, condukt {condukt.__version__}, Python {platform.python_version()},"
            f" trio {trio.__version__}, httpx {httpx.__version__}, botocore {botocore.__version__}"
        )
        print(
            f"protocol server in its own process, {LATENCY * 1000:.0f} ms per request; N={agents} agents,"
            f" each run = 2 turns + 1 tool call; best of {rounds}"
        )
        table = protocols(url)
        async with condukt.open_node() as node:
            for stream in (False, True):
                for options in table.values():  # warm-up: connections, a first price lookup per model
                    await one_round(node, options, 20, stream)
                best = {label: float("inf") for label in table}
                for round_number in range(rounds):
                    labels = list(table) if round_number % 2 == 0 else list(reversed(table))
                    for label in labels:
                        best[label] = min(best[label], await one_round(node, table[label], agents, stream))
                baseline = best["openai (baseline)"]
                mode = "streaming" if stream else "non-streaming"
                for label, cpu in best.items():
                    print(f"{mode:>13}  {label:<22} client CPU/request {cpu * 1e6:7.1f} us   ({cpu / baseline:.2f}x openai)")
                signed = best["bedrock (SigV4)"] - best["bedrock (api key)"]
                print(f"{mode:>13}  bedrock SigV4 signing in the runs: {signed * 1e6:+.1f} us/request")
        print(f"SigV4 signature alone (botocore's SigV4Auth, 2 KB body): {signing_cost() * 1e6:.1f} us per request")
        for line in decoding_rows() + price_rows():
            print(line)
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    trio.run(main, args.agents, args.rounds)
