"""``condukt chat`` in a real terminal (tmux): typing while a run streams leaves a clean transcript.

tmux is a terminal emulator with a scrollback that can be read back
(``capture-pane``): what a user sees and what stays in their history once
the run is over. The run's answer is held mid-stream by the server
(``Fault(kind="gate")``) while the test types, so the typing happens
during the run whatever the machine's speed.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from condukt.testing.server import Fault, ProtocolServer, reply

from .helpers import ROOT, TIMEOUT

pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None, reason="needs tmux (Debian: apt-get install tmux; .ci/run installs it as root)"
)

#: rich's "dots" spinner frames (Braille patterns): none may stay in the scrollback.
SPINNER = re.compile("[\u2800-\u28ff]")
WORDS = " ".join(f"word{n:02d}" for n in range(1, 41))
ANSWER = f"The answer streams slowly: {WORDS}."
THINKING = "Let me think about this question carefully."


class Terminal:
    """One tmux session of its own (own server socket, no user configuration) running a command."""

    def __init__(self, socket: str) -> None:
        self.socket = socket

    async def tmux(self, *args: str) -> str:
        with trio.fail_after(TIMEOUT):
            done = await trio.run_process(
                ["tmux", "-L", self.socket, "-f", "/dev/null", *args], capture_stdout=True, check=True
            )
        return done.stdout.decode()

    async def start(self, command: str) -> None:
        """Start the session's server running ``command`` (the server lives on: it gets no pipe of ours)."""
        await trio.run_process(
            ["tmux", "-L", self.socket, "-f", "/dev/null", "new-session", "-d", "-s", "chat", "-x", "100", "-y",
             "30", command],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip

    async def screen(self) -> str:
        """What the terminal shows now."""
        return await self.tmux("capture-pane", "-p", "-t", "chat")

    async def transcript(self) -> str:
        """Everything: the scrollback and the screen."""
        return await self.tmux("capture-pane", "-p", "-S", "-", "-E", "-", "-t", "chat")

    async def wait_for(self, pattern: str) -> str:
        """The screen once ``pattern`` shows on it (the way pexpect's ``expect`` waits for output)."""
        screen = ""
        with trio.move_on_after(TIMEOUT):
            while True:
                screen = await self.screen()
                if re.search(pattern, screen, re.MULTILINE):
                    return screen
                await trio.sleep(0.05)
        raise AssertionError(f"{pattern!r} did not show within {TIMEOUT} s; the screen:\n{screen}")

    async def type(self, text: str, enter: bool = False) -> None:
        await self.tmux("send-keys", "-t", "chat", "-l", text)
        if enter:
            await self.tmux("send-keys", "-t", "chat", "Enter")

    async def key(self, name: str) -> None:
        await self.tmux("send-keys", "-t", "chat", name)


@pytest.fixture
async def chat(server: ProtocolServer, tmp_path: Path) -> AsyncIterator[Terminal]:
    """``condukt chat`` against ``server``, in a 100x30 tmux terminal; its last line says how it exited."""
    terminal = Terminal(f"condukt-test-{uuid.uuid4().hex[:8]}")
    command = shlex.join([
        "env", f"PYTHONPATH={ROOT / 'src'}", "OPENAI_API_KEY=k", "TERM=xterm-256color",
        sys.executable, "-m", "condukt", "chat", "--model", "openai:gpt-4o", "--base-url", f"{server.url}/v1",
        "--tools", "none", "--cwd", str(tmp_path),
    ])  # fmt: skip
    await terminal.start(f"{command}; echo \"[exit $?]\"; sleep 600")
    try:
        await terminal.wait_for(r"^you>$")  # (tmux leaves out trailing spaces)
        yield terminal
    finally:
        await terminal.tmux("kill-server")


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines() if line.strip()]


async def test_typing_during_a_streaming_run_leaves_a_clean_transcript(
    server: ProtocolServer, chat: Terminal
) -> None:
    server.add(
        # Thinking streams, then the answer holds until the gate opens: the spinner runs meanwhile.
        Fault(reply(ANSWER, thinking=THINKING, chunk=8), after=3, kind="gate"),
        reply("Steered answer."),  # the next turn of the same run, after the steer
        reply("Queued answer."),  # the prompt typed during the run, run after it
    )
    await chat.type("hello", enter=True)
    await chat.wait_for(r"Let me think")
    # Type a steer while the spinner turns: the input line keeps exactly what was typed.
    await chat.type("/steer be brief")
    frames = set()
    for _ in range(6):
        screen = await chat.wait_for(r"you> /steer be brief")
        lines = _lines(screen)
        assert lines[-1] == "you> /steer be brief", screen  # the line being typed is never written over
        assert [line for line in lines if "be brief" in line] == [lines[-1]]  # nor copied anywhere
        spinning = [line for line in lines if SPINNER.search(line)]
        assert len(spinning) == 1 and "thinking" in spinning[0], screen
        frames.add(SPINNER.search(spinning[0]).group())  # type: ignore[union-attr]
        await trio.sleep(0.1)
    assert len(frames) >= 2  # it did animate, above the input line
    await chat.key("Enter")
    await chat.type("a queued question", enter=True)
    await chat.wait_for(r"queued: a queued question")
    server.gate.set()
    await chat.wait_for(r"Queued answer\.[\s\S]*^you>$")
    await chat.key("C-d")
    await chat.wait_for(r"\[exit 0\]")

    transcript = await chat.transcript()
    lines = _lines(transcript)
    assert not SPINNER.search(transcript), transcript  # no spinner frame left behind
    assert transcript.count("word01") == 1 and transcript.count("word40.") == 1, transcript  # no half lines
    assert transcript.count(THINKING) == 1
    assert "queued:" not in transcript  # shown while it waited, not kept
    steer = lines.index("you> /steer be brief")
    queued = lines.index("you> a queued question")
    assert lines.index("you> hello") < lines.index(THINKING) < steer  # in the order things happened
    assert any("word40." in line for line in lines[:steer])
    assert lines[steer + 1] == "Steered answer."
    assert lines[steer + 2].startswith("2 turns")
    assert lines[queued + 1] == "Queued answer."  # the queued prompt heads its own answer
    assert lines[queued + 2].startswith("1 turn")
    assert [line for line in lines if line.startswith("you>")] == [
        "you> hello", "you> /steer be brief", "you> a queued question",
    ]  # fmt: skip
    assert len(server.requests) == 3
    assert "be brief" in str(server.requests[1].messages[-1])


async def test_ctrl_c_aborts_the_run_and_says_so_once(server: ProtocolServer, chat: Terminal) -> None:
    server.add(Fault(reply(ANSWER, chunk=8), after=3, kind="gate"))
    await chat.type("hello", enter=True)
    await chat.wait_for(r"The answer strea")
    await chat.key("C-c")
    await chat.wait_for(r"run aborted[\s\S]*^you>$")
    await chat.key("C-c")
    await chat.wait_for(r"Ctrl-C again")
    await chat.key("C-c")
    await chat.wait_for(r"\[exit 0\]")
    transcript = await chat.transcript()
    assert transcript.count("aborted") == 1, transcript
    assert "error" not in transcript.lower() and "aborting" not in transcript
    assert not SPINNER.search(transcript)
