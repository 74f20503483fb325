"""The ``Command`` tool: one trusted executable, no shell, trusted environment."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ._output import MAX_BYTES, MAX_LINES
from ._subprocess import MAX_TIMEOUT, effective_timeout, format_result, run_command
from ._tool import Tool, ToolContext, ToolError

__all__ = ["Command", "GIT_REFUSED_OPTIONS"]

_DEFAULT_TIMEOUT = 120.0

#: Options a ``git`` grant refuses unless ``allow_git_config=True``: each lets
#: the arguments run another program (``-c alias.x='!cmd'``, ``core.sshCommand``,
#: ``--upload-pack=cmd``, a template's hooks...) or leave the working directory.
#: The first tuple applies before the subcommand, the second after it.
GIT_REFUSED_OPTIONS = (
    ("-c", "--config-env", "--exec-path", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "-C"),
    ("--upload-pack", "--receive-pack", "--exec", "--template", "--config"),
)
#: git subcommands where ``-u`` names a program to run on the remote side.
_GIT_UPLOAD_PACK = frozenset({"clone", "fetch", "pull", "ls-remote", "archive"})
#: What a hardened git grant runs with: no system or global configuration,
#: no hooks, no fsmonitor program, no ``ext::`` transport, no prompts.
_GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_ALLOW_PROTOCOL": "file:git:http:https:ssh",
}
_GIT_PREFIX = ("-c", "core.hooksPath=" + os.devnull, "-c", "core.fsmonitor=false")


class Command(Tool):
    """Expose one executable (``git``, ``gh``, ``mix``...) without a shell.

    Options: ``command`` (the executable, required), ``name`` and
    ``description`` (defaults derived from the command), ``env`` (variables
    set by trusted code, e.g. tokens: never shown to the model, never in
    history or events; their values are redacted from the output) and
    ``timeout`` (default seconds) and ``max_timeout`` (the most the model
    may ask for; one hour by default). The model passes ``args`` (a list of
    strings, no shell parsing), optionally ``cwd`` and ``timeout``.

    The subprocess runs in the agent's sandbox with its allowlisted
    environment (``PATH``, ``HOME``, locale..., ``TERM=dumb``, ``PAGER=cat``),
    the agent's secrets and ``env``.

    A grant is not a boundary by itself: many executables run arbitrary
    programs through their arguments (``find -exec``, ``xargs``, ``env``,
    ``awk 'BEGIN{system(...)}'``, ``tar --to-command``, ``git`` aliases...).
    Narrow it with ``subcommands`` (the first argument must be one of them)
    and ``arguments`` (regular expressions every argument must match in
    full). A ``git`` grant is hardened by default: the options in
    :data:`GIT_REFUSED_OPTIONS` (and ``-u`` for clone/fetch/pull) are
    refused, system and global configuration are ignored, hooks and
    ``core.fsmonitor`` are disabled (``allow_git_config=True`` turns this
    off). The repository's own ``.git/config`` still applies: a sandbox
    (:mod:`condukt.sandbox`) is the real boundary.
    """

    timeout = None  # enforced per call, with a process-group kill

    def __init__(
        self,
        *,
        command: str,
        name: str | None = None,
        description: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = _DEFAULT_TIMEOUT,
        max_timeout: float = MAX_TIMEOUT,
        subcommands: Sequence[str] | None = None,
        arguments: Sequence[str] | None = None,
        allow_git_config: bool = False,
    ) -> None:
        if not isinstance(command, str) or not command:
            raise ValueError("Command needs a non-empty command= option")
        env = {str(k): str(v) for k, v in (env or {}).items()}
        if subcommands is not None:
            if isinstance(subcommands, str) or not all(isinstance(x, str) and x for x in subcommands):
                raise TypeError("subcommands must be a list of non-empty strings")
            subcommands = tuple(subcommands)
        patterns = None
        if arguments is not None:
            if isinstance(arguments, str) or not all(isinstance(x, str) for x in arguments):
                raise TypeError("arguments must be a list of regular expressions (strings)")
            try:
                patterns = tuple(re.compile(x) for x in arguments)
            except re.error as exc:
                raise ValueError(f"arguments: invalid regular expression: {exc}") from None
        if not isinstance(allow_git_config, bool):
            raise TypeError("allow_git_config must be a bool")
        super().__init__(
            command=command,
            name=name,
            description=description,
            env=env,
            timeout=timeout,
            max_timeout=max_timeout,
            subcommands=subcommands,
            arguments=patterns,
            allow_git_config=allow_git_config,
        )

    @property
    def name(self) -> str:  # type: ignore[override]
        """The ``name`` option, else the executable's base name."""
        given = self.opts.get("name")
        if given:
            return str(given)
        return re.sub(r"[^A-Za-z0-9_-]", "_", os.path.basename(self.opts["command"]))[:64]

    @property
    def description(self) -> str:  # type: ignore[override]
        """The ``description`` option, else a generated one."""
        given = self.opts.get("description")
        if given:
            return str(given)
        return (
            f"Execute the trusted `{self.opts['command']}` command without shell parsing. "
            f"Pass arguments as an array of strings. Output is truncated to {MAX_LINES} lines or "
            f"{MAX_BYTES // 1024}KB. Environment variables come from trusted configuration, not from you."
        )

    parameters = {
        "type": "object",
        "properties": {
            "args": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Arguments to pass to the command",
            },
            "cwd": {"type": "string", "description": "Directory to run the command in"},
            "timeout": {"type": "number", "exclusiveMinimum": 0, "description": "Timeout in seconds"},
        },
        "additionalProperties": False,
    }

    async def call(self, args: dict[str, Any], context: ToolContext) -> Any:
        """Run the command with ``args["args"]``.

        Raises :class:`ToolError` when the executable is missing or not
        runnable, ``cwd`` is missing or outside a confined working directory,
        or it times out (with the output so far). Cancelled, it kills the
        process group (SIGKILL) and reaps the process before
        ``trio.Cancelled`` propagates.
        """
        cwd = context.resolve_path(args["cwd"]) if args.get("cwd") else context.cwd
        timeout = effective_timeout(args.get("timeout"), self.opts, _DEFAULT_TIMEOUT)
        trusted: dict[str, str] = self.opts["env"]
        command = self.opts["command"]
        argv = list(args.get("args", []))
        self._check_grant(argv)
        granted = trusted
        if self._hardened_git():
            granted = {**_GIT_ENV, **trusted}
            argv = [*_GIT_PREFIX, *argv]
        result = await run_command(context, [command, *argv], cwd=cwd, timeout=timeout, granted=granted)
        return format_result(result, timeout, redact={**context.secrets, **trusted})

    def _hardened_git(self) -> bool:
        return not self.opts["allow_git_config"] and os.path.basename(self.opts["command"]) in ("git", "git.exe")

    def _check_grant(self, argv: list[str]) -> None:
        """Raise :class:`ToolError` for arguments this grant does not allow."""
        subcommands = self.opts["subcommands"]
        if subcommands is not None:
            first = next((a for a in argv if not a.startswith("-")), None)
            if first not in subcommands:
                raise ToolError(f"{self.name}: allowed subcommands are {', '.join(subcommands)}; got {first!r}")
            if argv and argv[0].startswith("-"):
                raise ToolError(f"{self.name}: options must come after the subcommand")
        patterns = self.opts["arguments"]
        if patterns is not None:
            for arg in argv:
                if not any(p.fullmatch(arg) for p in patterns):
                    raise ToolError(f"{self.name}: argument {arg!r} is not allowed by this grant")
        if self._hardened_git():
            _check_git(argv)


def _check_git(argv: list[str]) -> None:
    """Refuse git arguments that can run other programs (see :data:`GIT_REFUSED_OPTIONS`)."""
    split = next((i for i, a in enumerate(argv) if not a.startswith("-")), len(argv))
    sub = argv[split] if split < len(argv) else None
    for position, arg in enumerate(argv):
        option = arg.split("=", 1)[0]
        if position < split:
            refused: tuple[str, ...] = GIT_REFUSED_OPTIONS[0]
            # -cNAME=VALUE and -Cpath are the same options, stuck to their value.
            hit = option in refused or arg[:2] in ("-c", "-C") and not arg.startswith("--")
        else:
            refused = GIT_REFUSED_OPTIONS[1]
            hit = option in refused or sub in _GIT_UPLOAD_PACK and arg[:2] == "-u" and not arg.startswith("--")
        if hit:
            raise ToolError(
                f"git: {option} is refused (it can make git run other programs or leave the working "
                "directory); a grant with allow_git_config=True allows it"
            )
