"""AWS Bedrock's Converse API end to end against the local server: ``bedrock:<model id>``.

Wire shapes from the Bedrock API reference: Converse
(https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html), ConverseStream
(https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html) and its
events (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStreamOutput.html);
the binary framing from AWS's event stream encoding
(https://docs.aws.amazon.com/transcribe/latest/dg/event-stream.html); signatures from Signature
Version 4 (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html),
checked by a verifier written from that page and proven on AWS's published SigV4 test suite vectors
(get-vanilla, post-vanilla), and against botocore's own signer.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import json
import struct
import zlib
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import condukt
from condukt.events import Retry, TextDelta, ThinkingDelta
from condukt.messages import AssistantMessage, DocumentBlock, ImageBlock, StopReason, ThinkingBlock, Usage
from condukt.providers import (
    AuthenticationFailed,
    BedrockModel,
    CorruptFrame,
    InvalidRequest,
    MissingCredentials,
    ModelRefused,
    ProviderUnavailable,
    UnsupportedSetting,
    resolve_model,
)
from condukt.testing.server import Fault, ProtocolServer, Raw, Reply, Status, event_frame, reply, tool_use

from .helpers import Weather, collect, tokens

botocore = pytest.importorskip("botocore", reason="botocore ([bedrock] extra) is not installed")
# The decoder is condukt's (botocore's is several times slower per frame: benchmarks/providers_cloud.py);
# botocore's EventStreamBuffer checks it below.

MODEL = "anthropic.claude-sonnet-4-5-20250929-v1:0"
KEY_ID = "AKIDEXAMPLE"
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
TOKEN = "session-token-example"
streaming = pytest.mark.parametrize("stream", [True, False], ids=["stream", "plain"])


@pytest.fixture(autouse=True)
def no_ambient_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """No credentials, profile or region from this machine: each test says what it gives."""
    for name in (
        "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
        "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_BEARER_TOKEN_BEDROCK", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
    ):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


async def spawn(
    node: condukt.Node, server: ProtocolServer, *, stream: bool = True, model: str = MODEL, **options: Any
) -> condukt.AgentHandle:
    model_options: dict[str, Any] = {
        "region": "us-east-1",
        "aws_access_key_id": KEY_ID,
        "aws_secret_access_key": SECRET,
        "aws_session_token": TOKEN,
        "stream": stream,
    }
    model_options.update(options.pop("model_options", {}))
    agent: condukt.AgentHandle = await node.spawn(
        condukt.Agent,
        model=f"bedrock:{model}",
        base_url=server.url,
        tools=[Weather],
        model_options=model_options,
        **options,
    )
    return agent


# ---------------------------------------------------------------------------- an independent SigV4 verifier


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def sigv4_signature(
    method: str, url: str, headers: dict[str, str], signed: list[str], body: bytes, secret: str, amz_date: str, scope: str
) -> str:
    """The signature per AWS's "Create a signed AWS API request" page (not botocore's code).

    Canonical request: method, the URI-encoded path (each segment encoded again, as every service
    but S3 wants), the sorted query, the signed headers lower-cased with trimmed values, their names,
    and the body's SHA-256; string to sign: algorithm, date, scope, the canonical request's SHA-256;
    key: HMAC chain of date, region, service and "aws4_request" from "AWS4" + secret.
    """
    parts = urlsplit(url)
    path = "/".join(quote(segment, safe="-_.~") for segment in (parts.path or "/").split("/"))
    query = "&".join(sorted(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, _, v in (p.partition("=") for p in parts.query.split("&") if p)))
    lower = {name.lower(): " ".join(value.split()) for name, value in headers.items()}
    canonical_headers = "".join(f"{name}:{lower[name]}\n" for name in signed)
    canonical = "\n".join([method, path, query, canonical_headers, ";".join(signed), hashlib.sha256(body).hexdigest()])
    string_to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    date, region, service, _ = scope.split("/")
    key = _hmac(_hmac(_hmac(_hmac(("AWS4" + secret).encode(), date), region), service), "aws4_request")
    return hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()


@pytest.mark.parametrize(
    ("method", "url", "expected"),
    [  # AWS's SigV4 test suite: get-vanilla, post-vanilla, get-vanilla-query-order-key-case
        ("GET", "https://example.amazonaws.com/", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
        ("POST", "https://example.amazonaws.com/", "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"),
        ("GET", "https://example.amazonaws.com/?Param2=value2&Param1=value1", "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"),
    ],
)
def test_the_verifier_reproduces_aws_published_vectors(method: str, url: str, expected: str) -> None:
    headers = {"Host": "example.amazonaws.com", "X-Amz-Date": "20150830T123600Z"}
    scope = "20150830/us-east-1/service/aws4_request"
    assert sigv4_signature(method, url, headers, ["host", "x-amz-date"], b"", SECRET, "20150830T123600Z", scope) == expected


def verify(request: Any, url: str, secret: str = SECRET) -> dict[str, str]:
    """Check a recorded request's SigV4 signature; the parsed Authorization fields."""
    authorization = request.headers["authorization"]
    algorithm, _, rest = authorization.partition(" ")
    assert algorithm == "AWS4-HMAC-SHA256"
    fields = dict(item.strip().split("=", 1) for item in rest.split(","))
    signed = fields["SignedHeaders"].split(";")
    assert {"host", "x-amz-date"} <= set(signed)
    scope = fields["Credential"].split("/", 1)[1]
    expected = sigv4_signature("POST", url, request.headers, signed, request.raw, secret, request.headers["x-amz-date"], scope)
    assert hmac.compare_digest(fields["Signature"], expected), "the signature does not verify"
    return fields


# ---------------------------------------------------------------------------- the wire


@streaming
async def test_plain_and_streamed_answers_carry_a_signature_that_verifies(node: condukt.Node, server: ProtocolServer, stream: bool) -> None:
    server.add(reply("Hello from Bedrock.", usage=(12, 4)))
    agent = await spawn(node, server, stream=stream, system_prompt="Be brief.")
    events, result = await collect(agent, "hi")
    assert result.result == "Hello from Bedrock."
    if stream:
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello from Bedrock."
    [request] = server.requests
    method = "converse-stream" if stream else "converse"
    assert request.path == f"/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/{method}"
    assert request.protocol == "bedrock" and request.model == MODEL
    assert request.body == {
        "system": [{"text": "Be brief."}],
        "toolConfig": {"tools": [{"toolSpec": {"name": "get_weather", "description": Weather.description, "inputSchema": {"json": Weather.parameters}}}]},
        "messages": [{"role": "user", "content": [{"text": "hi"}]}],
    }
    fields = verify(request, server.url + request.path)
    assert fields["Credential"].startswith(f"{KEY_ID}/") and fields["Credential"].endswith("/us-east-1/bedrock/aws4_request")
    assert request.headers["x-amz-security-token"] == TOKEN
    assert SECRET not in json.dumps(request.headers)
    [*_, answer] = await agent.history()
    assert isinstance(answer, AssistantMessage) and tokens(answer.usage) == Usage(12, 4) and answer.model == MODEL


async def test_the_signature_is_botocores_and_a_tampered_request_fails(node: condukt.Node, server: ProtocolServer) -> None:
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    server.add(reply("ok"))
    agent = await spawn(node, server)
    await agent.run("hi")
    [request] = server.requests
    url = server.url + request.path
    # botocore's signer, given the request as the server saw it and its timestamp, signs the same.
    again = AWSRequest(method="POST", url=url, data=request.raw, headers={"Content-Type": request.headers["content-type"]})
    again.context["timestamp"] = request.headers["x-amz-date"]
    again.headers["X-Amz-Date"] = request.headers["x-amz-date"]
    again.headers["X-Amz-Security-Token"] = TOKEN
    signer = SigV4Auth(Credentials(KEY_ID, SECRET, TOKEN), "bedrock", "us-east-1")
    signature = signer.signature(signer.string_to_sign(again, signer.canonical_request(again)), again)
    assert request.headers["authorization"].endswith(f"Signature={signature}")
    request.raw = request.raw.replace(b"hi", b"ho")
    with pytest.raises(AssertionError, match="does not verify"):
        verify(request, url)


async def test_each_attempt_is_signed_anew(node: condukt.Node, server: ProtocolServer, autojump_clock: Any) -> None:
    server.add(Status(429, "Too many requests, please wait before trying again.", headers=(("retry-after", "2"),)), reply("ok"))
    agent = await spawn(node, server)
    events, result = await collect(agent, "hi")
    assert result.result == "ok" and sum(isinstance(e, Retry) for e in events) == 1
    for request in server.requests:
        verify(request, server.url + request.path)


@streaming
async def test_tool_round_trip(node: condukt.Node, server: ProtocolServer, stream: bool) -> None:
    server.add(reply(tools=tool_use("get_weather", {"location": "Lima"}, id="tooluse_1")), reply("Warm."))
    agent = await spawn(node, server, stream=stream)
    assert await agent.run("Weather?") == "Warm."
    first, second = server.requests
    assert second.body["messages"][1:] == [
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "tooluse_1", "name": "get_weather", "input": {"location": "Lima"}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "Temperature: 70F in Lima"}], "status": "success"}}]},
    ]


@pytest.mark.parametrize(
    ("status", "kind", "message"),
    [
        (429, "ThrottlingException", "Too many requests, please wait before trying again."),
        (429, "ModelNotReadyException", "The model is not ready to serve inference requests."),
        (503, "ServiceUnavailableException", "The service is unavailable. Try again later."),
    ],
)
async def test_throttling_and_unavailable_are_retried(node: condukt.Node, server: ProtocolServer, status: int, kind: str, message: str, autojump_clock: Any) -> None:
    server.add(Status(status, message, error_type=kind), reply("ok"))
    agent = await spawn(node, server)
    events, result = await collect(agent, "hi")
    assert result.result == "ok"
    [retry] = [e for e in events if isinstance(e, Retry)]
    assert kind in retry.reason


@pytest.mark.parametrize(
    ("status", "kind", "message", "error"),
    [
        (400, "ValidationException", "The provided model identifier is invalid.", InvalidRequest),
        (404, "ResourceNotFoundException", "Model not found.", InvalidRequest),
        (403, "AccessDeniedException", "You don't have access to the model with the specified model ID.", AuthenticationFailed),
        (403, "UnrecognizedClientException", "The security token included in the request is invalid.", AuthenticationFailed),
    ],
)
async def test_4xx_are_typed(node: condukt.Node, server: ProtocolServer, status: int, kind: str, message: str, error: type[Exception]) -> None:
    server.add(Status(status, message, error_type=kind))
    agent = await spawn(node, server, model="anthropic.claude-does-not-exist-v9:0")
    with pytest.raises(error) as caught:
        await agent.run("hi")
    assert caught.value.error_type == kind and caught.value.status_code == status  # type: ignore[attr-defined]
    assert message in str(caught.value)
    assert len(server.requests) == 1


async def test_a_wrong_region_is_the_providers_4xx(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(Status(403, "Credential should be scoped to a valid region.", error_type="InvalidSignatureException"))
    agent = await spawn(node, server, model_options={"region": "mars-north-1"})
    with pytest.raises(AuthenticationFailed, match="scoped to a valid region"):
        await agent.run("hi")
    assert "/mars-north-1/bedrock/aws4_request" in server.requests[0].headers["authorization"]


async def test_a_stream_throttled_mid_way(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(Fault(reply("a long answer that is cut"), after=3, kind="error", error_type="throttlingException", message="Too many tokens"))
    agent = await spawn(node, server)
    events, stream = await collect(agent, "hi")
    assert stream.error is not None and stream.error.error_type == "RateLimited" and "Too many tokens" in stream.error.message
    assert any(isinstance(e, TextDelta) for e in events)
    assert len(server.requests) == 1 and list(await agent.history()) == []


async def test_a_model_stream_error_mid_way_is_unavailable(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(Fault(reply("partial answer"), after=2, kind="error", error_type="modelStreamErrorException", message="boom"))
    agent = await spawn(node, server)
    with pytest.raises(ProviderUnavailable, match="boom"):
        await agent.run("hi")


async def test_a_corrupt_frame_is_a_typed_error(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(Fault(reply("some text first"), after=3, kind="garbage"))
    agent = await spawn(node, server)
    with pytest.raises(CorruptFrame, match="message CRC32 mismatch"):
        await agent.run("hi")
    assert len(server.requests) == 1  # text had been streamed: not retried


def _model() -> BedrockModel:
    model = resolve_model(f"bedrock:{MODEL}", region="us-east-1", aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET)
    assert isinstance(model, BedrockModel)
    return model


def test_frames_decode_with_their_crcs_checked() -> None:
    """The server's frames (written from the encoding page) decode, cut anywhere; each damage is caught."""
    model = _model()
    frames = b"".join(
        event_frame({":event-type": kind, ":content-type": "application/json", ":message-type": "event"}, json.dumps(data).encode())
        for kind, data in [
            ("messageStart", {"role": "assistant"}),
            ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hi"}}),
            ("messageStop", {"stopReason": "end_turn"}),
            ("metadata", {"usage": {"inputTokens": 3, "outputTokens": 1}}),
        ]
    )
    deltas, message = model.decode_stream(frames[i : i + 7] for i in range(0, len(frames), 7))
    assert deltas == [TextDelta("Hi")] and message.text == "Hi" and message.usage == Usage(3, 1)
    total, _ = struct.unpack(">II", frames[:8])
    assert zlib.crc32(frames[:8]) == struct.unpack(">I", frames[8:12])[0]
    for offset in (5, 20, total - 6):  # in the prelude, the headers, the payload
        damaged = bytearray(frames)
        damaged[offset] ^= 0xFF
        with pytest.raises(CorruptFrame, match="CRC32 mismatch"):
            model.decode_stream([bytes(damaged)])


@given(
    frames=st.lists(
        st.tuples(
            st.dictionaries(st.text(min_size=1, max_size=20), st.text(max_size=50), max_size=4),
            st.binary(max_size=300),
        ),
        min_size=1,
        max_size=6,
    ),
    cut=st.integers(min_value=1, max_value=64),
)
@settings(max_examples=60, deadline=None)
def test_the_decoder_reads_what_botocores_parser_reads(frames: list[tuple[dict[str, str], bytes]], cut: int) -> None:
    """botocore's EventStreamBuffer is the reference: same headers and payloads, whatever the chunking."""
    from botocore.eventstream import EventStreamBuffer

    from condukt.providers.bedrock import FrameDecoder

    body = b"".join(event_frame({":event-type": "x", **headers}, payload) for headers, payload in frames)
    reference = EventStreamBuffer()
    reference.add_data(body)
    expected = [(message.headers.get(":event-type"), bytes(message.payload)) for message in reference]
    decoder = FrameDecoder()
    got = [(frame.event, frame.payload) for i in range(0, len(body), cut) for frame in decoder.feed(body[i : i + cut])]
    assert got == expected


async def test_reasoning_streams_and_its_signature_goes_back(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(
        Reply(thinking="Let me think.", tool_calls=(tool_use("get_weather", {"location": "Rome"}, id="t1"),), signature="sig-xyz"),
        reply("Done."),
    )
    agent = await spawn(node, server, thinking_level="low")
    events, result = await collect(agent, "Weather?")
    assert result.result == "Done."
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == "Let me think."
    first, second = server.requests
    assert first.body["additionalModelRequestFields"] == {"thinking": {"type": "enabled", "budget_tokens": 4096}}
    assert first.body["inferenceConfig"]["maxTokens"] > 4096
    assistant = second.body["messages"][1]["content"]
    assert assistant[0] == {"reasoningContent": {"reasoningText": {"text": "Let me think.", "signature": "sig-xyz"}}}
    history = await agent.history()
    thinking = [b for m in history if isinstance(m, AssistantMessage) for b in m.content if isinstance(b, ThinkingBlock)]
    assert thinking == [ThinkingBlock("Let me think.", "sig-xyz", None, "bedrock")]


async def test_redacted_reasoning_is_sent_back_as_it_came(node: condukt.Node, server: ProtocolServer) -> None:
    body = {
        "output": {"message": {"role": "assistant", "content": [{"reasoningContent": {"redactedContent": "ZW5jcnlwdGVk"}}, {"toolUse": {"toolUseId": "t1", "name": "get_weather", "input": {"location": "Oslo"}}}]}},
        "stopReason": "tool_use",
        "usage": {"inputTokens": 5, "outputTokens": 2, "cacheReadInputTokens": 100, "cacheWriteInputTokens": 7},
    }
    server.add(Raw(json.dumps(body).encode(), content_type="application/json"), reply("ok"))
    agent = await spawn(node, server, stream=False)
    assert await agent.run("x") == "ok"
    assert server.requests[1].body["messages"][1]["content"][0] == {"reasoningContent": {"redactedContent": "ZW5jcnlwdGVk"}}
    first = next(m for m in await agent.history() if isinstance(m, AssistantMessage))
    assert tokens(first.usage) == Usage(5, 2, 100, 7)


async def test_images_documents_and_cache_points(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(reply("seen"))
    agent = await spawn(node, server, stream=False, system_prompt="S", model_options={"prompt_cache": True})
    png = base64.b64encode(b"\x89PNG fake").decode()
    doc = DocumentBlock.from_text("a,b\n1,2", "text/csv", title="My data: v2.csv")
    assert await agent.run("look", images=[ImageBlock("image/png", png)], documents=[doc]) == "seen"
    body = server.requests[0].body
    assert body["system"] == [{"text": "S"}, {"cachePoint": {"type": "default"}}]
    assert body["toolConfig"]["tools"][-1] == {"cachePoint": {"type": "default"}}
    assert body["messages"][0]["content"] == [
        {"text": "look"},
        {"image": {"format": "png", "source": {"bytes": png}}},
        {"document": {"format": "csv", "name": "My data v2 csv", "source": {"bytes": doc.data}}},
        {"cachePoint": {"type": "default"}},
    ]
    assert server.requests[0].documents == [body["messages"][0]["content"][2]]


@pytest.mark.parametrize("reason", ["guardrail_intervened", "content_filtered"])
async def test_a_guardrail_stop_raises_model_refused(node: condukt.Node, server: ProtocolServer, reason: str) -> None:
    body = {"output": {"message": {"role": "assistant", "content": [{"text": "Sorry, blocked."}]}}, "stopReason": reason, "usage": {"inputTokens": 1, "outputTokens": 1}}
    server.add(Raw(json.dumps(body).encode(), content_type="application/json"))
    agent = await spawn(node, server, stream=False)
    with pytest.raises(ModelRefused) as caught:
        await agent.run("x")
    assert caught.value.stop_reason == StopReason.CONTENT_FILTER


async def test_settings_go_to_inference_config_and_seed_is_refused(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(reply("ok"))
    agent = await spawn(node, server, stream=False)
    settings = condukt.ModelSettings(temperature=0.3, top_p=0.8, max_tokens=50, stop=["STOP"])
    assert await agent.run("x", model_settings=settings) == "ok"
    assert server.requests[0].body["inferenceConfig"] == {"maxTokens": 50, "temperature": 0.3, "topP": 0.8, "stopSequences": ["STOP"]}
    with pytest.raises(UnsupportedSetting, match="Bedrock Converse.*seed"):
        await agent.run("x", model_settings={"seed": 1})
    assert len(server.requests) == 1


# ---------------------------------------------------------------------------- credentials and region


async def test_missing_credentials_name_what_to_set_and_send_nothing(node: condukt.Node, server: ProtocolServer) -> None:
    agent = await spawn(node, server, model_options={"aws_access_key_id": None, "aws_secret_access_key": None, "aws_session_token": None})
    with pytest.raises(MissingCredentials, match="AWS_ACCESS_KEY_ID") as caught:
        await agent.run("hi")
    assert "AWS_PROFILE" in str(caught.value)
    assert server.requests == []


async def test_expired_credentials_that_cannot_be_renewed_send_nothing(node: condukt.Node, server: ProtocolServer) -> None:
    from botocore.credentials import RefreshableCredentials

    past = (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)).isoformat()

    def refresh() -> dict[str, str]:
        return {"access_key": KEY_ID, "secret_key": SECRET, "token": TOKEN, "expiry_time": past}

    expired = RefreshableCredentials.create_from_metadata(refresh(), refresh, "test")
    agent = await spawn(node, server, model_options={"aws_access_key_id": None, "aws_secret_access_key": None, "credentials": expired})
    with pytest.raises(MissingCredentials, match="AWS_ACCESS_KEY_ID") as caught:
        await agent.run("hi")
    assert SECRET not in str(caught.value) and TOKEN not in str(caught.value)
    assert server.requests == []


async def test_the_credential_chain_finds_environment_credentials(node: condukt.Node, server: ProtocolServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDFROMENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    server.add(reply("ok"))
    agent = await node.spawn(condukt.Agent, model=f"bedrock:{MODEL}", base_url=server.url)
    assert await agent.run("hi") == "ok"
    [request] = server.requests
    fields = verify(request, server.url + request.path)
    assert fields["Credential"].startswith("AKIDFROMENV/") and "/eu-west-3/bedrock/" in fields["Credential"]
    assert "x-amz-security-token" not in request.headers


async def test_a_region_is_required_and_sets_the_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(MissingCredentials, match="AWS_REGION"):
        resolve_model(f"bedrock:{MODEL}", aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-south-1")
    model = resolve_model(f"bedrock:{MODEL}", aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET)
    assert model.base_url == "https://bedrock-runtime.ap-south-1.amazonaws.com"  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="invalid model id"):
        resolve_model("bedrock:not a model", region="us-east-1", aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET)


async def test_a_bedrock_api_key_is_a_bearer_token_without_signing(node: condukt.Node, server: ProtocolServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "bedrock-api-key-123")
    server.add(reply("ok"))
    agent = await node.spawn(condukt.Agent, model=f"bedrock:{MODEL}", base_url=server.url, model_options={"region": "us-west-2"})
    assert await agent.run("hi") == "ok"
    [request] = server.requests
    assert request.headers["authorization"] == "Bearer bedrock-api-key-123" and "x-amz-date" not in request.headers


async def test_secrets_echoed_in_an_error_are_redacted(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(Status(403, f"The request signature we calculated does not match ({SECRET}, {TOKEN})", error_type="InvalidSignatureException"))
    agent = await spawn(node, server)
    with pytest.raises(AuthenticationFailed) as caught:
        await agent.run("hi")
    assert SECRET not in str(caught.value) and TOKEN not in str(caught.value)
