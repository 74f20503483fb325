"""Secrets: values agents need (tokens, passwords) that the model must never see.

Declare them with :meth:`condukt.Agent.secrets` or the ``secrets=`` start
option, as a mapping from an environment-variable name to a provider::

    def secrets(self):
        return {
            "GH_TOKEN": condukt.secrets.env("GH_TOKEN"),
            "DB_PASSWORD": condukt.secrets.command(["op", "read", "op://vault/db/password"]),
            "API_KEY": condukt.secrets.static("..."),
            "SESSION": lambda: fetch_session(),     # any callable, sync or async
        }

Values are resolved once when the agent starts, exposed to ``Bash`` and
``Command`` subprocesses as environment variables, and every value of 4 or
more bytes is replaced by ``[REDACTED:NAME]`` in tool results before they
reach the history, events, telemetry, session stores and the model.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shlex
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs
import trio

from .otp import ConduktError

__all__ = ["MIN_REDACT_BYTES", "SecretError", "Secrets", "command", "env", "resolve_secrets", "static"]

#: Shorter values are not redacted: they would mangle ordinary text.
MIN_REDACT_BYTES = 4
# Used with fullmatch: `^...$` with match() would accept a trailing newline.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class SecretError(ConduktError):
    """A secret could not be resolved, or its name is not a valid variable name.

    The message names the secret, never its value.
    """


@attrs.frozen
class _Env:
    var: str
    default: str | None = None

    async def resolve(self, name: str) -> str:
        value = os.environ.get(self.var, self.default)
        if value is None:
            raise SecretError(f"secret {name}: environment variable {self.var} is not set")
        return value


@attrs.frozen
class _Static:
    value: str = attrs.field(repr=False)

    async def resolve(self, name: str) -> str:
        return self.value


@attrs.frozen
class _Command:
    argv: tuple[str, ...]
    timeout: float

    async def resolve(self, name: str) -> str:
        try:
            with trio.fail_after(self.timeout):
                result = await trio.run_process(
                    list(self.argv), capture_stdout=True, capture_stderr=True, check=False
                )
        except trio.TooSlowError:
            raise SecretError(f"secret {name}: `{self.argv[0]}` took longer than {self.timeout:g}s") from None
        except OSError as exc:
            raise SecretError(f"secret {name}: cannot run `{self.argv[0]}`: {exc.strerror or exc}") from None
        if result.returncode != 0:
            raise SecretError(f"secret {name}: `{self.argv[0]}` exited with status {result.returncode}")
        return result.stdout.decode("utf-8", "replace").rstrip("\r\n")


@attrs.frozen
class _Callable:
    fn: Callable[[], str | Awaitable[str]]

    async def resolve(self, name: str) -> str:
        value = self.fn()
        if inspect.isawaitable(value):
            value = await value
        return value


def env(var: str, *, default: str | None = None) -> Any:
    """The value of the environment variable ``var`` (``default`` if unset, else an error)."""
    return _Env(var, default)


def static(value: str) -> Any:
    """A fixed value (from your own configuration)."""
    return _Static(value)


def command(argv: Sequence[str] | str, *, timeout: float = 10.0) -> Any:
    """The stdout of a trusted command, e.g. ``["op", "read", "op://vault/item/field"]``.

    A string is split with :func:`shlex.split` (no shell). Fails on a
    non-zero exit or after ``timeout`` seconds.
    """
    args = tuple(shlex.split(argv) if isinstance(argv, str) else argv)
    if not args:
        raise ValueError("secrets.command needs a command")
    return _Command(args, timeout)


class Secrets:
    """Resolved secrets: name -> value, with redaction. Never shows values in ``repr``."""

    __slots__ = ("_pattern", "_values")

    def __init__(self, values: Mapping[str, str] | None = None, redact_also: Mapping[str, str] | None = None) -> None:
        self._values = dict(values or {})
        # ``redact_also``: values to hide that are not for subprocesses (the agent's API key).
        hidden = {**(redact_also or {}), **self._values}
        long_enough = {k: v for k, v in hidden.items() if len(v.encode("utf-8")) >= MIN_REDACT_BYTES}
        by_value = {value: name for name, value in long_enough.items()}
        for name, value in long_enough.items():
            # A tool returning a dict or list is JSON-encoded (and tools often
            # encode their own output): a value with quotes, backslashes,
            # control or non-ASCII characters then appears escaped.
            for ascii_only in (False, True):
                by_value.setdefault(json.dumps(value, ensure_ascii=ascii_only)[1:-1], name)
        self._pattern: tuple[re.Pattern[str], dict[str, str]] | None = None
        if by_value:
            # Longest first, so a value containing another is replaced whole.
            forms = sorted(by_value, key=len, reverse=True)
            self._pattern = (re.compile("|".join(re.escape(form) for form in forms)), by_value)

    @property
    def env(self) -> dict[str, str]:
        """The secrets as environment variables for a subprocess."""
        return dict(self._values)

    def names(self) -> list[str]:
        """The secret names."""
        return list(self._values)

    def __bool__(self) -> bool:
        return bool(self._values) or self._pattern is not None

    def hiding(self, extra: Mapping[str, str]) -> Secrets:
        """These secrets, also redacting ``extra`` (name -> value) without exposing it to tools."""
        return Secrets(self._values, {k: v for k, v in extra.items() if isinstance(v, str)})

    def redact(self, text: str) -> str:
        """``text`` with every secret value (4+ bytes) replaced by ``[REDACTED:NAME]``.

        The value's JSON-escaped forms (as in ``json.dumps`` output) are replaced too.
        """
        if self._pattern is None or not text:
            return text
        regex, by_value = self._pattern
        return regex.sub(lambda m: f"[REDACTED:{by_value[m.group(0)]}]", text)

    def __repr__(self) -> str:
        return f"<Secrets {sorted(self._values)}>"


#: The secrets of an agent that has none (shared: a Secrets never changes).
NO_SECRETS = Secrets()


async def resolve_secrets(spec: Mapping[str, Any] | None) -> Secrets:
    """Resolve every provider of ``spec`` (concurrently). Plain strings are static values.

    Raises :class:`SecretError` for an invalid name or a provider that fails
    (an exception from a custom callable is chained as the cause). When
    several fail, the first in ``spec`` order is raised; the first failure
    cancels the providers still running (``command`` subprocesses included).
    """
    if not spec:
        return NO_SECRETS
    values: dict[str, str] = {}
    providers: dict[str, Any] = {}
    for name, provider in spec.items():
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise SecretError(f"secret name {name!r} is not a valid environment variable name")
        if isinstance(provider, str):
            provider = _Static(provider)
        elif callable(provider) and not hasattr(provider, "resolve"):
            provider = _Callable(provider)
        elif not hasattr(provider, "resolve"):
            raise SecretError(f"secret {name}: not a provider (use secrets.env/static/command or a callable)")
        providers[name] = provider
    failures: dict[str, SecretError] = {}

    async def one(name: str, provider: Any) -> None:
        try:
            value = await provider.resolve(name)
        except SecretError as exc:
            failures[name] = exc
        except Exception as exc:
            # Only the type: the message of a user's exception may hold the value.
            failure = SecretError(f"secret {name}: provider raised {type(exc).__name__}")
            failure.__cause__ = exc
            failures[name] = failure
        else:
            if isinstance(value, str):
                values[name] = value
                return
            failures[name] = SecretError(f"secret {name}: provider returned {type(value).__name__}, not str")
        nursery.cancel_scope.cancel()

    # Failures are collected rather than raised so the caller gets one
    # SecretError, not an exception group from the nursery.
    async with trio.open_nursery() as nursery:
        for name, provider in providers.items():
            nursery.start_soon(one, name, provider)
    for name in providers:
        if name in failures:
            raise failures[name]
    return Secrets({name: values[name] for name in providers})
