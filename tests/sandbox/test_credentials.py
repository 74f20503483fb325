"""Host credentials stay out of tool commands and out of what the model sees.

The node under test runs in a child Python process started with credentials
in its environment, so ``/proc/<pid>/environ`` (the environment a process
was started with) really holds them, as it would in production.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import condukt
from condukt.testing import ScriptedModel, call, reply

LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")
BWRAP = pytest.mark.skipif(
    shutil.which("bwrap") is None or not condukt.sandbox.Bubblewrap.available(),
    reason="bwrap is not installed or cannot make namespaces (Debian: apt-get install bubblewrap)",
)

HOST_ENV = {
    "ANTHROPIC_API_KEY": "sk-ant-host-key-0123456789",
    "DATABASE_URL": "postgres://app:hunter2-db-pass@db.internal/app",
    "STRIPE_KEY": "sk_live_stripe_abcdef",
    "SSH_AUTH_SOCK": "/tmp/ssh-agent-sock-xyz",
}

NODE = """
import json, os, pathlib, sys, trio, condukt
from condukt.testing import ScriptedModel, call, reply

async def main():
    commands, sandbox, cwd, tool, store_root = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
    commands = [c.replace("NODE_PID", str(os.getpid())) for c in commands]
    if tool == "cat":
        tools = [condukt.tools.Command(command="cat")]
        calls = [call("cat", {"args": c.split()}) for c in commands]
    else:
        tools = [condukt.tools.Bash]
        calls = [call("bash", {"command": c}) for c in commands]
    model = ScriptedModel([calls, reply("done"), reply("again")])
    options = {"sandbox": condukt.sandbox.Bubblewrap()} if sandbox == "bwrap" else {}
    store = condukt.sessions.DiskStore(store_root)
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=tools, cwd=cwd, session_store=store, **options)
        await agent.run("go")
        history = await agent.history()
        await agent.run("next")  # its request carries the first run's tool results
    print(json.dumps({
        "results": [m.text for m in history[2:-1]],
        "elsewhere": [repr(model.requests[-1])] + [p.read_text() for p in pathlib.Path(store_root).rglob("*") if p.is_file()],
    }))

trio.run(main)
"""


#: Credentials under names the first heuristics missed, and URLs whose userinfo holds a password.
WIDER_ENV = {
    "MYSQL_PWD": "mysql-pwd-value-123",
    "SMTP_PASS": "smtp-pass-value-456",
    "LDAP_PASSWD": "ldap-passwd-value-789",
    "GPG_PASSPHRASE": "gpg passphrase value",
    "PASS": "bare-pass-value-000",
    "PRIMARY_DB": "postgres://app:pg-userinfo-pass@db.internal:5432/app",
    "CACHE": "redis://:redis-userinfo-pass@cache.internal:6379/0",
    "AMQP_ADDR": "amqps://worker:amqp-userinfo-pass@mq.internal/vhost",
}


def node_run(
    tmp_path: Path, commands: list[str], sandbox: str = "default", tool: str = "bash",
    extra_env: dict[str, str] | None = None,
) -> list[str]:
    """Tool results from a node process whose own environment holds :data:`HOST_ENV`.

    The node keeps its session in a Disk store and runs a second time; the
    store's files and that second model request (which carries the tool
    results) are checked for credentials here, the results are returned.
    """
    env = {**os.environ, **HOST_ENV, **(extra_env or {})}
    store = tmp_path.parent / f"{tmp_path.name}-store"
    done = subprocess.run(
        [sys.executable, "-c", NODE, json.dumps(commands), sandbox, str(tmp_path), tool, str(store)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert len(out["elsewhere"]) >= 2, "the request and at least one snapshot file"
    assert_no_credential(out["elsewhere"])
    results: list[str] = out["results"]
    return results


def assert_no_credential(texts: list[str]) -> None:
    for text in texts:
        for value in [*HOST_ENV.values(), *WIDER_ENV.values(), "pg-userinfo-pass", "redis-userinfo-pass"]:
            assert value not in text, text


@LINUX
def test_no_host_credential_reaches_the_command_or_its_parent(tmp_path: Path) -> None:
    texts = node_run(
        tmp_path,
        [
            "env",
            "tr '\\0' '\\n' < /proc/$PPID/environ",
            "echo ${DATABASE_URL:-none} ${STRIPE_KEY:-none} ${SSH_AUTH_SOCK:-none}",
        ],
    )
    assert_no_credential(texts)
    assert texts[2] == "none none none"
    assert "PATH=" in texts[0] and "PATH=" in texts[1]


@LINUX
def test_a_credential_read_from_the_nodes_own_environ_is_redacted(tmp_path: Path) -> None:
    # Same user, no sandbox: the command can read the node's /proc entry. It
    # cannot be prevented locally (docs/sandboxes.md); the values are redacted.
    texts = node_run(tmp_path, ["tr '\\0' '\\n' < /proc/$(ps -o ppid= -p $PPID | tr -d ' ')/environ | sort"])
    assert_no_credential(texts)
    assert "ANTHROPIC_API_KEY=[REDACTED:ANTHROPIC_API_KEY]" in texts[0]
    assert "DATABASE_URL=[REDACTED:DATABASE_URL]" in texts[0]


@LINUX
def test_a_cat_grant_reading_the_nodes_environ_gets_redacted_values(tmp_path: Path) -> None:
    # A Command grant runs no shell, but `cat` can still read the node's own
    # /proc entry (same user, no sandbox: docs/sandboxes.md); the values are redacted.
    texts = node_run(tmp_path, ["/proc/NODE_PID/environ"], tool="cat")
    assert_no_credential(texts)
    assert "[REDACTED:STRIPE_KEY]" in texts[0] and "[REDACTED:ANTHROPIC_API_KEY]" in texts[0]


@LINUX
def test_wider_names_and_urls_with_a_password_are_redacted_from_the_nodes_environ(tmp_path: Path) -> None:
    # *_PWD, *_PASS, *PASSWD*, *PASSPHRASE*, and any value holding scheme://user:password@host.
    texts = node_run(tmp_path, ["/proc/NODE_PID/environ"], tool="cat", extra_env=WIDER_ENV)
    assert_no_credential(texts)
    for name in WIDER_ENV:
        assert f"{name}=[REDACTED:{name}]" in texts[0], name
    # The working directories are paths, not credentials: they stay readable.
    assert f"PWD={os.getcwd()}" in texts[0]


def test_the_credential_heuristics() -> None:
    from condukt.sandbox import CREDENTIAL_NAME, redact_host_credentials

    for name in ["MYSQL_PWD", "DB_PASS", "PASS", "SMTP_PASS_FILE", "LDAP_PASSWD", "KEY_PASSPHRASE", "SENTRY_DSN",
                 "DSN", "GH_TOKEN", "DATABASE_URL", "PGPASSWORD"]:
        assert CREDENTIAL_NAME.search(name), name
    for name in ["PWD", "OLDPWD", "PATH", "HOME", "LANG", "PASSAGE_COUNT"]:
        assert not CREDENTIAL_NAME.search(name), name
    environ = {"ORDINARY": "https://user:s3cret-pw@host/x", "PLAIN": "https://host/x", "SHORT": "ftp://u:pw@h"}
    text = "dsn https://user:s3cret-pw@host/x and again s3cret-pw, then https://host/x"
    assert redact_host_credentials(text, environ) == (
        "dsn [REDACTED:ORDINARY] and again [REDACTED:ORDINARY], then https://host/x"
    )


@LINUX
@BWRAP
def test_in_bubblewrap_no_host_credential_is_visible_by_any_means(tmp_path: Path) -> None:
    texts = node_run(
        tmp_path,
        [
            "env",
            "cat /proc/*/environ | tr '\\0' '\\n' | sort -u",
            "ls /proc | grep -c '^[0-9]'",
            f"cat /proc/{os.getpid()}/environ 2>&1 | head -c 200; echo",
        ],
        sandbox="bwrap",
    )
    assert_no_credential(texts)
    assert "HOME=/tmp/home" in texts[0]
    assert int(texts[2].split()[0]) <= 6  # only the sandbox's own processes (bwrap, bash, ls, grep...)


async def run_bash(tmp_path: Path, command: str, **options: object) -> str:
    model = ScriptedModel([call("bash", {"command": command}), reply("done")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[condukt.tools.Bash], cwd=tmp_path, **options)
        await agent.run("go")
        return (await agent.history())[2].text


async def test_declared_secrets_reach_the_command_and_are_redacted(tmp_path: Path) -> None:
    text = await run_bash(tmp_path, "echo $GH_TOKEN", secrets={"GH_TOKEN": "ghp_declared_value"})
    assert text == "[REDACTED:GH_TOKEN]"
