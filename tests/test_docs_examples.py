"""Every ```python block of the docs and the README runs.

A block runs as a script (one that calls ``trio.run(main)`` is a complete
program a reader can copy). A block starting with ``# test module`` is a
pytest file: its tests must pass (with pytest-trio's ``trio_mode``). When
the guide shows a block's output (a paragraph starting "Output" and then a
```text block, right after it), the block must print exactly that.

A block that is a fragment of a larger program, or needs what a reader
has and these tests do not, says so in an HTML comment right before its
fence, which neither GitHub nor the docs site shows::

    <!-- docs-test: after=calculator setup=anthropic context=node -->

- ``name=N`` names the block, for a later one's ``after=`` (names are
  unique across the guides);
- ``after=N`` runs block ``N`` first, in the same script: this block
  continues that one (the setups of the whole chain run first; from the
  first block with a context on, the chain runs in that context);
- ``setup=A,B`` runs the named :data:`SETUPS` first: local stand-ins for
  what a reader has (a provider behind ``ANTHROPIC_BASE_URL``, a Ray
  cluster, the tokens a service reads from its environment...);
- ``context=C`` or ``context=C:URL`` runs the block inside the named
  :data:`CONTEXTS`: with top-level ``await`` on trio (``trio``), in an
  open node (``node``) or in a cluster (``cluster``), as a service that runs until a request to
  ``URL`` is answered and a Ctrl-C ends it (``serving``: the URL's port must
  appear in the block, and the test moves it to a free port, so that two
  runs of the suite at once, or a reader's own server, never collide), or as an ASGI
  module whose ``app`` answers ``GET URL`` (``asgi``, ``asgi-trio``);
- ``file=PATH`` makes the block a file of a project, written there (under
  packages) and run by importing it: a later block ``after=`` it imports it
  the same way (``from .condukt_node import node``);
- ``needs=M,N``: modules the test extra brings; without them the block is
  skipped, saying what to install.

The blocks run offline: in an empty directory, without provider API keys
in the environment, on ``condukt.testing.ScriptedModel`` or the local
provider-format server ``condukt.testing.server``. To keep the file fast,
the blocks of one guide run in one interpreter, each in a fresh namespace,
a fresh directory and without the keys, base URLs and tokens an earlier
block set in the environment, its output captured
at the file descriptor level (so subprocesses' output counts too); a block
that fails there is run again alone in a fresh interpreter, as a reader
would run it, and that result is the one checked. Guides run concurrently,
a few at a time.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.parse
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDES = [*sorted(str(path.relative_to(ROOT)) for path in (ROOT / "docs").glob("*.md")), "README.md"]
TIMEOUT = 180.0  # a ceiling: the Ray guide's blocks each start a local cluster, slow on a loaded machine

_FENCE = re.compile(r"^(?:<!-- docs-test: ([^\n]*?) -->\n)?```python\n(.*?)^```$", re.S | re.M)
#: What may follow a program: "Output...:" then a text block holding what it prints.
_OUTPUT = re.compile(r"\n*Output[^\n]*:\n\n```text\n(.*?)^```$", re.S | re.M)
_PROGRAM = re.compile(r"\b(trio|asyncio)\.run\(")

#: Code run before a block that names it in ``setup=``, at the top of the same script.
SETUPS: dict[str, str] = {
    # A local provider-format server (condukt.testing.server) in a thread of this process, where a reader
    # has api.anthropic.com and api.openai.com: the providers read their base URLs from ANTHROPIC_BASE_URL
    # and OPENAI_BASE_URL, their keys from ANTHROPIC_API_KEY and OPENAI_API_KEY. It answers every request
    # with a short text.
    "anthropic": """
import os as _os, threading as _threading
import trio as _trio
from condukt.testing.server import ProtocolServer as _ProtocolServer, reply as _reply

_server = _ProtocolServer(responder=lambda request: _reply("OK."))
_started = _threading.Event()

async def _serve():
    async with _trio.open_nursery() as nursery:
        await nursery.start(_server.run)
        _started.set()

_threading.Thread(target=_trio.run, args=(_serve,), daemon=True).start()
_started.wait()
_os.environ["ANTHROPIC_BASE_URL"] = _os.environ["OPENAI_BASE_URL"] = _server.url
_os.environ["ANTHROPIC_API_KEY"] = _os.environ["OPENAI_API_KEY"] = "test-key"
""",
    # The key a reader has in a variable.
    "key": """
key = "sk-test"
""",
    # The imports of the observer guide, for its fragment shown without them.
    "imports": """
import functools
import os

import trio

import condukt
import condukt.web.observer
""",
    # The tokens a service reads from its environment.
    "tokens": """
import os as _os
_os.environ["API_TOKEN"] = _os.environ["OBSERVER_TOKEN"] = "dev-token"
""",
    # A local Ray for this interpreter, where a reader has a Ray cluster: the blocks of cluster.md share it
    # (a cluster opened on it leaves it open), and open_cluster(address=...) connects to it, as to any Ray
    # this process already initialized. Its workers (the node actors) have a stand-in Anthropic key, as
    # the reader's machines have a real one: agents spawned on them start (these blocks run none).
    "ray": """
import os as _os, sys as _sys, tempfile as _tempfile
import condukt
import condukt.ray

# Started from a directory that outlives this block's (Ray's processes start workers there).
_cwd = _os.getcwd()
_os.chdir(_tempfile.gettempdir())
try:
    _path = _os.pathsep.join(entry for entry in _sys.path if entry)
    condukt.ray.init(runtime_env={"env_vars": {"PYTHONPATH": _path, "ANTHROPIC_API_KEY": "test-key"}})
finally:
    _os.chdir(_cwd)
""",
    # A session store every node of a local cluster reaches.
    "sqlite-store": """
import os as _os
from condukt.sessions import SQLiteStore as _SQLiteStore
store = _SQLiteStore(_os.path.abspath("sessions.db"))
""",
}

#: How a block with ``context=`` runs: ``await block(name=value, ...)`` runs it with those names defined
#: (and the context's imports: a fragment's page has ``import condukt``).
CONTEXTS: dict[str, str] = {
    "node": """
import trio
import condukt

async def _context():
    async with condukt.open_node() as node:
        await block(node=node)

trio.run(_context)
""",
    # A block that awaits at top level, on trio, with nothing open for it.
    "trio": """
run_block()
""",
    # An ASGI module's ``app``, its lifespan run, asked GET {url} through Starlette's test client on asyncio.
    "asgi": """
run_block()
from starlette.testclient import TestClient as _TestClient
with _TestClient(app) as _client:
    _response = _client.get({url!r})
    assert _response.status_code == 200, (_response.status_code, _response.text)
""",
    # The same on trio (an app served by hypercorn on trio).
    "asgi-trio": """
run_block()
from starlette.testclient import TestClient as _TestClient
with _TestClient(app, backend="trio") as _client:
    _response = _client.get({url!r})
    assert _response.status_code == 200, (_response.status_code, _response.text)
""",
    # A service that runs until interrupted: once {url} answers (any HTTP status), a Ctrl-C ends it.
    "serving": """
import os as _os, signal as _signal, threading as _threading, time as _time, urllib.error as _urlerror, urllib.request as _urlrequest

_answered = []

def _visit():
    deadline = _time.monotonic() + 30
    while not _answered and _time.monotonic() < deadline:
        try:
            with _urlrequest.urlopen({url!r}, timeout=5) as response:
                _answered.append(response.status)
        except _urlerror.HTTPError as error:
            _answered.append(error.code)
        except OSError:
            _time.sleep(0.1)
    _time.sleep(0.2)        # the connection's end
    # A real SIGINT, not _thread.interrupt_main(): that only sets a flag, which a
    # trio loop asleep in epoll_wait (an idle server) may not look at for ever.
    _os.kill(_os.getpid(), _signal.SIGINT)

def _interrupted(error):
    if isinstance(error, BaseExceptionGroup):
        return any(_interrupted(inner) for inner in error.exceptions)
    return isinstance(error, KeyboardInterrupt)

_threading.Thread(target=_visit, daemon=True).start()
try:
    run_block()
except BaseException as error:
    # The Ctrl-C may land in any of the service's tasks, which then end with it.
    if not (_answered and _interrupted(error)):
        raise
assert _answered, "nothing answered at {url}"
""",
    "cluster": """
import trio
import condukt
import condukt.ray

async def _context():
    async with condukt.ray.open_cluster(nodes=2) as cluster:
        await block(cluster=cluster)

trio.run(_context)
""",
}

#: Runs the block's source, compiled so that it may ``await`` at top level, in this script's namespace.
_HARNESS = """
import ast as _ast, inspect as _inspect
_block = compile({source}, "<the guide's block>", "exec", flags=_ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)

async def block(**names):
    globals().update(names)
    result = eval(_block, globals())
    if _inspect.iscoroutine(result):
        await result

def run_block():
    # The block; one that awaits at top level runs on trio.
    result = eval(_block, globals())
    if _inspect.iscoroutine(result):
        import trio
        trio.run(lambda: result)
"""


#: A free port of 127.0.0.1 for a ``serving`` block, in ``_PORT``.
_FREE_PORT = """
import re as _re, socket as _socket
with _socket.socket() as _probe:
    _probe.bind(("127.0.0.1", 0))
    _PORT = _probe.getsockname()[1]
"""


#: Writes the blocks with ``file=`` (the files of a project) in the script's directory, packages made.
_FILES = """
import os as _os, pathlib as _pathlib, sys as _sys
for _path, _text in {files!r}.items():
    _file = _pathlib.Path(_path)
    _file.parent.mkdir(parents=True, exist_ok=True)
    for _package in _file.parents[:-1]:
        (_package / "__init__.py").touch()
    _file.write_text(_text)
_sys.path.insert(0, _os.getcwd())
"""

#: Runs a block with ``file=`` by importing it, as the project it belongs to would.
_IMPORT = """
import importlib as _importlib, sys as _sys
for _name in [name for name in _sys.modules if name.split(".")[0] == {module!r}.split(".")[0]]:
    del _sys.modules[_name]
_importlib.import_module({module!r})
"""


@attrs.frozen
class Block:
    """A python block of a guide and how it runs."""

    id: str
    source: str
    output: str | None
    name: str | None = None
    after: str | None = None
    setup: tuple[str, ...] = ()
    context: str | None = None
    file: str | None = None
    needs: tuple[str, ...] = ()


def _directives(text: str | None) -> dict[str, str]:
    return dict(item.split("=", 1) for item in (text or "").split())


def _blocks() -> list[Block]:
    """Every python block; the id names the guide and line."""
    found = []
    for guide in GUIDES:
        text = (ROOT / guide).read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            line = text.count("\n", 0, match.start(2)) + 1
            shown = _OUTPUT.match(text, match.end())
            directives = _directives(match.group(1))
            found.append(
                Block(
                    f"{guide}:{line - 1}",
                    match.group(2),
                    shown.group(1) if shown else None,
                    name=directives.pop("name", None),
                    after=directives.pop("after", None),
                    setup=tuple(filter(None, directives.pop("setup", "").split(","))),
                    context=directives.pop("context", None),
                    file=directives.pop("file", None),
                    needs=tuple(filter(None, directives.pop("needs", "").split(","))),
                )
            )
            assert not directives, f"{guide}:{line}: unknown docs-test directives {sorted(directives)}"
    return found


def _is_test_module(source: str) -> bool:
    return source.lstrip().lower().startswith("# test module")


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.rstrip().splitlines()]


BLOCKS = _blocks()
NAMED = {block.name: block for block in BLOCKS if block.name}


def _chain(block: Block) -> list[Block]:
    """The blocks ``block`` continues from, first to last, then ``block``."""
    chain = [block]
    while chain[0].after is not None:
        chain.insert(0, NAMED[chain[0].after])
        assert len(chain) <= len(BLOCKS), f"{block.id}: 'after' goes round in a circle"
    return chain


def script(block: Block) -> str:
    """The script that runs ``block``: its setups, the blocks it continues, the block, in its context.

    The blocks of the chain before the first one with a context run as they
    are; from that one on, they run in its context.
    """
    chain = _chain(block)
    setups = list(dict.fromkeys(name for b in chain for name in b.setup))
    parts = [SETUPS[name] for name in setups]
    files = {b.file: b.source for b in chain if b.file}
    if files:
        parts.append(_FILES.format(files=files))
    if block.file:
        parts.append(_IMPORT.format(module=block.file.removesuffix(".py").replace("/", ".")))
        return "\n".join(parts)
    chain = [b for b in chain if not b.file]
    first = next((i for i, b in enumerate(chain) if b.context), len(chain))
    parts += [b.source for b in chain[:first]]
    if first < len(chain):
        source = "\n".join(b.source for b in chain[first:])
        context, _, url = chain[first].context.partition(":")
        source_expression, url_expression = repr(source), repr(url)
        if context == "serving":
            # The block's port, moved to one free now: fixed ports collide when two suites run at once.
            port = urllib.parse.urlsplit(url).port
            assert port is not None and re.search(rf"\b{port}\b", source), (
                f"{block.id}: a serving block binds the port of its URL, literally (the test moves it to a free one)"
            )
            parts.append(_FREE_PORT)
            source_expression = f"_re.sub(r'\\b{port}\\b', str(_PORT), {source!r})"
            url_expression = f"{url!r}.replace(':{port}', ':' + str(_PORT), 1)"
        parts += [
            _HARNESS.format(source=source_expression),
            CONTEXTS[context].replace("{url!r}", url_expression).replace("{url}", url),
        ]
    return "\n".join(parts)


def _missing(block: Block) -> list[str]:
    """The modules that ``block`` (``needs=``) and the blocks it continues import and this environment lacks."""
    return [name for b in _chain(block) for name in b.needs if importlib.util.find_spec(name) is None]


EXAMPLES = [
    (block.id, script(block), block.output)
    for block in BLOCKS
    if not _is_test_module(block.source) and not _missing(block)
]
TEST_MODULES = [(block.id, script(block)) for block in BLOCKS if _is_test_module(block.source)]


#: Environment variables that configure a provider or a service's token: the programs run without them
#: unless they set them.
_PROVIDER_SETTING = r"(ANTHROPIC_|OPENAI_|CONDUKT_).*|.*(_API_KEY|_BASE_URL|_TOKEN)"


def _provider_setting(name: str) -> bool:
    return re.fullmatch(_PROVIDER_SETTING, name) is not None


def _environment() -> dict[str, str]:
    """This environment without provider keys and base URLs, with ``src`` importable."""
    env = {name: value for name, value in os.environ.items() if not _provider_setting(name)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    return env


#: Runs the programs given as JSON on stdin, one after the other, and prints their outcomes as JSON.
_RUNNER = r"""
import json, os, re, sys, tempfile, traceback

sources, provider_setting = json.load(sys.stdin)
provider_setting = re.compile(provider_setting)
results = []
out = os.dup(1)
for source in sources:
    # What one program sets up for a provider (a key, a base URL) does not carry over to the next.
    for name in [name for name in os.environ if provider_setting.fullmatch(name)]:
        del os.environ[name]
    with tempfile.TemporaryDirectory() as cwd, tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        os.chdir(cwd)
        sys.stdout.flush(); sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(stdout.fileno(), 1); os.dup2(stderr.fileno(), 2)
        code = 0
        try:
            exec(compile(source, os.path.join(cwd, "example.py"), "exec"), {"__name__": "__main__"})
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stdout.flush(); sys.stderr.flush()
        os.dup2(saved[0], 1); os.dup2(saved[1], 2)
        os.close(saved[0]); os.close(saved[1])
        os.chdir("/")
        stdout.seek(0); stderr.seek(0)
        results.append([code, stdout.read().decode("utf-8", "replace"), stderr.read().decode("utf-8", "replace")])
os.write(out, json.dumps(results).encode())
"""


def _run_alone(source: str) -> tuple[int, str, str]:
    """Run ``source`` as a script in an empty directory: (exit code, stdout, stderr); code -1 on a timeout."""
    return _run_in_empty_directory("example.py", source, "example.py")


def _run_in_empty_directory(filename: str, source: str, *arguments: str) -> tuple[int, str, str]:
    """Write ``source`` to ``filename`` in an empty directory and run ``python *arguments`` there."""
    with tempfile.TemporaryDirectory() as cwd:
        Path(cwd, filename).write_text(source, encoding="utf-8")
        try:
            done = subprocess.run(
                [sys.executable, *arguments],
                cwd=cwd,
                env=_environment(),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            return -1, "", f"did not finish within {TIMEOUT:g}s"
    return done.returncode, done.stdout, done.stderr


def _run_guide(programs: list[tuple[str, str | None]]) -> list[tuple[int, str, str]]:
    """Run a guide's ``(source, output)`` programs in one interpreter; those that fail there, again alone.

    Failing includes printing something else than the guide shows: a
    program may see the runner (its threads, open files, processes).
    """
    sources = [source for source, _ in programs]
    try:
        done = subprocess.run(
            [sys.executable, "-c", _RUNNER],
            env=_environment(),
            input=json.dumps([sources, _PROVIDER_SETTING]),
            capture_output=True,
            text=True,
            timeout=TIMEOUT * 2,
        )
        results = [(code, out, err) for code, out, err in json.loads(done.stdout)]
    except (subprocess.TimeoutExpired, json.JSONDecodeError):
        results = []
    # A runner that died part way: the programs it did not report run alone.
    results += [(1, "", "")] * (len(sources) - len(results))
    return [
        result if result[0] == 0 and (output is None or _lines(result[1]) == _lines(output)) else _run_alone(source)
        for (source, output), result in zip(programs, results, strict=True)
    ]


def _run_test_module(source: str) -> tuple[int, str, str]:
    """Run ``source`` as a pytest file (trio_mode on) in an empty directory: (exit code, stdout, stderr)."""
    return _run_in_empty_directory(
        "test_example.py", source, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "trio_mode=true", "test_example.py"
    )


@pytest.fixture(scope="module")
def outcomes() -> dict[str, tuple[int, str, str]]:
    """Every program's and test module's (exit code, stdout, stderr), by id; all run at once, a few at a time."""
    by_guide: dict[str, list[tuple[str, str, str | None]]] = {}
    for name, source, output in EXAMPLES:
        by_guide.setdefault(name.rsplit(":", 1)[0], []).append((name, source, output))
    # The guides on Ray take longest: they start first.
    slow = {name.rsplit(":", 1)[0] for name in (b.id for b in BLOCKS if "ray" in b.setup)}
    by_guide = dict(sorted(by_guide.items(), key=lambda item: item[0] not in slow))
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        futures = {
            guide: pool.submit(_run_guide, [(source, output) for _, source, output in programs])
            for guide, programs in by_guide.items()
        }
        modules = {name: pool.submit(_run_test_module, source) for name, source in TEST_MODULES}
        found = {name: future.result() for name, future in modules.items()}
        for guide, programs in by_guide.items():
            for (name, _, _), result in zip(programs, futures[guide].result(), strict=True):
                found[name] = result
        return found


def test_the_guides_have_complete_programs() -> None:
    for guide in ["docs/agents.md", "docs/capabilities.md", "docs/getting-started.md", "README.md"]:
        programs = [block for block in BLOCKS if block.id.startswith(f"{guide}:") and _PROGRAM.search(block.source)]
        assert programs, f"no complete program in {guide}"


def test_every_block_runs_and_says_what_it_continues() -> None:
    """No block is left out as an excerpt; every directive names a block, setup or context that exists."""
    excerpts = [block.id for block in BLOCKS if block.source.lstrip().lower().startswith("# excerpt")]
    assert excerpts == [], "make these blocks run (see this module's docstring)"
    names = [block.name for block in BLOCKS if block.name]
    assert len(names) == len(set(names)), "block names must be unique across the guides"
    for block in BLOCKS:
        assert block.after is None or block.after in NAMED, f"{block.id}: no block named {block.after!r}"
        assert set(block.setup) <= SETUPS.keys(), f"{block.id}: unknown setup in {block.setup}"
        context = (block.context or "").partition(":")[0]
        assert block.context is None or context in CONTEXTS, f"{block.id}: unknown context {block.context!r}"
        assert not (block.context and _is_test_module(block.source)), f"{block.id}: a test module has no context"


#: Blocks that need a package the test extra brings, skipped (saying what to install) where it is missing.
_NEEDING = [
    pytest.param(
        block.id,
        None,
        id=block.id,
        marks=pytest.mark.skip(reason=f"{block.id} needs {', '.join(_missing(block))}: pip install '.[test]'"),
    )
    for block in BLOCKS
    if _missing(block)
]


@pytest.mark.parametrize(("name", "output"), [(name, output) for name, _, output in EXAMPLES] + _NEEDING)
def test_example_runs(name: str, output: str | None, outcomes: dict[str, tuple[int, str, str]]) -> None:
    code, printed, errors = outcomes[name]
    assert code == 0, f"{name} exited {code}\n{printed}\n{errors}"
    if output is not None:
        assert _lines(printed) == _lines(output), f"{name} printed something else than the guide shows"


@pytest.mark.parametrize("name", [name for name, _ in TEST_MODULES])
def test_test_module_passes(name: str, outcomes: dict[str, tuple[int, str, str]]) -> None:
    code, printed, errors = outcomes[name]
    assert code == 0, f"{name}\n{printed}\n{errors}"
    assert " passed" in printed and " failed" not in printed
