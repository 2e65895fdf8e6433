"""What a container's shell script would run, read without running it.

A pod's command is often a shell: ``bash /config/train.sh`` (the catalog's training entries),
``sh -c '...'`` (an MPI worker, a user's WorkloadRun). The simulated accelerator needs the
programs the script starts, each with its argv and environment as the shell builds them:
variables assigned and exported, ``$VAR``, ``${VAR}``, ``${VAR:-default}`` (and the other
POSIX forms) expanded, unquoted expansions split into words, ``if``/``case``/``for`` taken on
the values, ``exec`` ending the script, ``set -u`` failing on an unset variable with the
shell's own message. ``env [-i] [-u NAME] [NAME=VALUE]... COMMAND`` is read as the command in
the environment it sets.

Nothing is run: a program is recorded, never started; command substitutions (``$(...)``,
backticks) expand to nothing; ``while``/``until`` loops are not entered; every file test
(``[ -d PATH ]``...) is false except for the files given (the ConfigMap scripts the container
mounts); ``eval`` does nothing. Reading is linear in the script's length, and a script that
calls itself stops after a fixed number of steps.
"""

from __future__ import annotations

import ast
import fnmatch
import itertools
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from nvcre.sandbox.script_syntax import (
    ASSIGNMENT,
    NAME,
    AndOr,
    Case,
    For,
    Group,
    If,
    Loop,
    Node,
    Pipeline,
    ShellSyntaxError,
    Simple,
    Word,
    expansion_end,
    parse,
)

SHELLS = frozenset({"sh", "bash", "dash", "ash"})
#: Reserved words that end a compound command: never the start of a simple one.
_CLOSERS = frozenset({"then", "elif", "else", "fi", "do", "done", "esac", "}"})
#: Steps (commands run, loop turns) after which a script is taken as stuck and stops.
MAX_STEPS = 10_000
#: How deep scripts may run scripts and functions may call functions.
MAX_DEPTH = 16


@dataclass(frozen=True)
class Invocation:
    """A program the script starts: its argv and the environment it gets."""

    argv: tuple[str, ...]
    env: Mapping[str, str]


@dataclass(frozen=True)
class Script:
    """What running ``argv`` starts; ``error`` is what the shell printed when it stopped early."""

    invocations: tuple[Invocation, ...]
    exit_code: int = 0
    error: str | None = None


# ---------------------------------------------------------------------------------------------
# running (without running)


class _Exit(Exception):
    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


_ARITH_OPS: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Div: operator.floordiv,
    ast.Mod: operator.mod,
}


def _arith(expr: str, lookup: Callable[[str], str]) -> int:
    """``$((expr))`` over integers and variables: + - * / % and parentheses; else 0."""

    def value(node: ast.expr) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            raw = lookup(node.id).strip()
            return int(raw) if re.fullmatch(r"-?\d+", raw) else 0
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITH_OPS:
            right = value(node.right)
            if isinstance(node.op, ast.Div | ast.FloorDiv | ast.Mod) and right == 0:
                return 0
            return _ARITH_OPS[type(node.op)](value(node.left), right)
        raise ValueError(expr)

    text = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", r"\1", expr)
    if len(text) > 200:
        return 0
    try:
        return value(ast.parse(text.strip() or "0", mode="eval").body)
    except (SyntaxError, ValueError, RecursionError):
        return 0


@dataclass
class _Shell:
    name: str  #: ``$0`` and the name the shell's messages start with
    dash: bool  #: dash's message wording (``sh``), else bash's
    script_file: bool  #: run from a file (messages name it and the line)
    vars: dict[str, str]
    exported: set[str]
    files: Mapping[str, str]
    args: list[str] = field(default_factory=list)
    functions: dict[str, Node] = field(default_factory=dict)
    nounset: bool = False
    errexit: bool = False
    status: int = 0
    steps: int = 0
    depth: int = 0
    invocations: list[Invocation] = field(default_factory=list)

    # -- messages ------------------------------------------------------------------------------

    def message(self, line: int, text: str) -> str:
        if self.dash:
            return f"{self.name}: {line}: {text}"
        if self.script_file:
            return f"{self.name}: line {line}: {text}"
        return f"{self.name}: {text}"

    def unbound(self, name: str, line: int) -> _Exit:
        if self.dash:
            return _Exit(2, self.message(line, f"{name}: parameter not set"))
        return _Exit(1 if self.script_file else 127, self.message(line, f"{name}: unbound variable"))

    # -- expansion -----------------------------------------------------------------------------

    def lookup(self, name: str) -> str | None:
        if name.isdigit():
            index = int(name)
            if index == 0:
                return self.name
            return self.args[index - 1] if index <= len(self.args) else None
        special = {
            "#": str(len(self.args)),
            "?": str(self.status),
            "$": "1",
            "!": "",
            "-": "",
            "@": " ".join(self.args),
            "*": " ".join(self.args),
        }
        if name in special:
            return special[name]
        return self.vars.get(name)

    def parameter(self, raw: str, line: int) -> str:
        """The value of one expansion's text (``$X``, ``${X:-w}``, ``$(...)``, ``$((e))``)."""
        if raw.startswith("$(("):
            return str(_arith(raw[3:-2], lambda n: self.vars.get(n, "")))
        if raw.startswith("$("):
            return ""  # a command substitution: nothing is run
        body = raw[2:-1] if raw.startswith("${") else raw[1:]
        if body.startswith("#") and len(body) > 1:
            return str(len(self.lookup(body[1:]) or ""))
        match = NAME.match(body) or re.match(r"[0-9@*#?$!-]", body)
        if match is None:
            return raw
        name, rest = match.group(0), body[match.end() :]
        value = self.lookup(name)
        if not rest:
            if value is None and self.nounset and name not in ("@", "*"):
                raise self.unbound(name, line)
            return value or ""
        colon = rest.startswith(":")
        op, word = (rest[1:2], rest[2:]) if colon else (rest[:1], rest[1:])
        unset = value is None or (colon and value == "")
        if op == "-":
            return self.text(word, line) if unset else value or ""
        if op == "=":
            if unset:
                self.vars[name] = self.text(word, line)
            return self.vars.get(name, "")
        if op == "+":
            return "" if unset else self.text(word, line)
        if op == "?":
            if unset:
                raise _Exit(
                    1, self.message(line, f"{name}: {self.text(word, line) or 'parameter null or not set'}")
                )
            return value or ""
        if value is None and self.nounset:
            raise self.unbound(name, line)
        return value or ""  # pattern removal and other forms: the value as it is

    def text(self, raw: str, line: int) -> str:
        """``raw`` (the word of ``${X:-word}``) with quotes removed and expansions done."""
        out: list[str] = []
        i = 0
        while i < len(raw):
            c = raw[i]
            if c == "\\":
                out.append(raw[i + 1 : i + 2])
                i += 2
            elif c == "'":
                end = raw.find("'", i + 1)
                end = len(raw) if end < 0 else end
                out.append(raw[i + 1 : end])
                i = end + 1
            elif c == '"':
                continue_at = raw.find('"', i + 1)
                continue_at = len(raw) if continue_at < 0 else continue_at
                out.append(self.text(raw[i + 1 : continue_at].replace("'", "\\'"), line))
                i = continue_at + 1
            elif c == "$" and (end := expansion_end(raw, i)) > i + 1:
                out.append(self.parameter(raw[i:end], line))
                i = end
            else:
                out.append(c)
                i += 1
        return "".join(out)

    def fields(self, word: Word) -> list[str]:
        """``word`` after expansion and field splitting: an unquoted expansion is split on
        whitespace; an unquoted empty result is no field, a quoted one an empty field."""
        out: list[str] = []
        current = ""
        started = False  # a field is open (even an empty quoted string opens one)

        def close() -> None:
            nonlocal current, started
            if started:
                out.append(current)
            current, started = "", False

        for part in word.parts:
            if part.expand and part.quoted and part.text in ("$@", "${@}"):
                for k, arg in enumerate(self.args):  # "$@": one field per positional argument
                    if k:
                        close()
                    current += arg
                    started = True
                continue
            value = self.parameter(part.text, word.line) if part.expand else part.text
            if part.quoted or not part.expand:
                current += value
                started = started or part.quoted or value != ""
                continue
            pieces = value.split()
            if value[:1].isspace():
                close()
            for k, piece in enumerate(pieces):
                if k:
                    close()
                current += piece
                started = True
            if value[-1:].isspace():
                close()
        close()
        return out

    def words(self, words: Sequence[Word]) -> list[str]:
        return [f for w in words for f in self.fields(w)]

    # -- running -------------------------------------------------------------------------------

    def step(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise _Exit(1, self.message(0, "too many steps (the script loops)"))

    def run_list(self, body: Sequence[AndOr], *, checked: bool = False) -> int:
        for item in body:
            self.run_and_or(item, checked=checked)
        return self.status

    def run_and_or(self, item: AndOr, *, checked: bool) -> None:
        self.run_pipeline(item.first, checked=checked or bool(item.rest))
        for k, (op, pipeline) in enumerate(item.rest):
            if (op == "&&") == (self.status == 0):
                self.run_pipeline(pipeline, checked=checked or k < len(item.rest) - 1)

    def run_pipeline(self, pipeline: Pipeline, *, checked: bool) -> None:
        for command in pipeline.commands:
            self.run_node(command)
        if pipeline.negate:
            self.status = 0 if self.status else 1
        elif self.status and self.errexit and not checked:
            raise _Exit(self.status)

    def run_node(self, node: Node) -> None:
        self.step()
        if isinstance(node, Simple):
            self.simple(node)
        elif isinstance(node, If):
            for condition, body in node.branches:
                if self.run_list(condition, checked=True) == 0:
                    self.run_list(body)
                    return
            self.status = 0
            if node.otherwise is not None:
                self.run_list(node.otherwise)
        elif isinstance(node, For):
            values = self.args if node.words is None else self.words(node.words)
            self.status = 0
            for value in values:
                self.step()
                self.vars[node.name] = value
                self.run_list(node.body)
        elif isinstance(node, Case):
            subject = "".join(self.fields(node.word))
            self.status = 0
            for patterns, body in node.arms:
                if any(fnmatch.fnmatchcase(subject, "".join(self.fields(p)) or "") for p in patterns):
                    self.run_list(body)
                    return
        elif isinstance(node, Loop):
            self.status = 0
        elif isinstance(node, Group):
            if node.subshell:
                saved = (dict(self.vars), set(self.exported))
                self.run_list(node.body)
                self.vars, self.exported = saved
            else:
                self.run_list(node.body)
        else:
            self.functions[node.name] = node.body
            self.status = 0

    def simple(self, node: Simple) -> None:
        argv = self.words(node.words)
        values = {name: self.text_of(word) for name, word in node.assigns}
        if not argv:
            self.vars.update(values)
            self.status = 0
            return
        replaced = argv[0] == "exec"
        if replaced:
            argv = list(itertools.dropwhile(lambda a: a.startswith("-"), argv[1:]))
            if not argv:  # ``exec`` with redirections only
                self.status = 0
                return
        builtin = _BUILTINS.get(argv[0])
        if builtin is not None:
            builtin(self, argv[1:], node.line)
        elif argv[0] in self.functions:
            self.call(argv[0], argv[1:])
        else:
            self.program(argv, {k: v for k, v in self.vars.items() if k in self.exported} | values)
        if replaced:
            raise _Exit(self.status)

    def text_of(self, word: Word) -> str:
        """An assignment's value: expanded, never split."""
        return "".join(self.parameter(p.text, word.line) if p.expand else p.text for p in word.parts)

    def program(self, argv: list[str], env: dict[str, str]) -> None:
        """Record ``argv`` started with ``env``; a shell it starts is read in turn."""
        if argv[0].rsplit("/", 1)[-1] in SHELLS and self.depth < MAX_DEPTH:
            nested = resolve(argv, env, self.files, depth=self.depth + 1)
            self.invocations += nested.invocations
            self.status = nested.exit_code
            if nested.error is not None:
                raise _Exit(nested.exit_code, nested.error)
            return
        self.invocations.append(Invocation(tuple(argv), env))
        self.status = 0

    def call(self, name: str, args: list[str]) -> None:
        if self.depth >= MAX_DEPTH:
            raise _Exit(1, self.message(0, f"{name}: maximum function nesting level exceeded"))
        saved = self.args
        self.args, self.depth = args, self.depth + 1
        try:
            self.run_node(self.functions[name])
        finally:
            self.args, self.depth = saved, self.depth - 1


def _set_var(shell: _Shell, arg: str, *, export: bool) -> None:
    name, eq, value = arg.partition("=")
    if not NAME.fullmatch(name):
        return
    if eq:
        shell.vars[name] = value
    if export:
        shell.exported.add(name)


def _export(shell: _Shell, args: list[str], line: int) -> None:
    for arg in args:
        if not arg.startswith("-"):
            _set_var(shell, arg, export=True)
    shell.status = 0


def _declare(shell: _Shell, args: list[str], line: int) -> None:
    export = any(a.startswith("-") and "x" in a for a in args)
    for arg in args:
        if not arg.startswith("-"):
            _set_var(shell, arg, export=export)
    shell.status = 0


def _unset(shell: _Shell, args: list[str], line: int) -> None:
    for name in args:
        shell.vars.pop(name, None)
        shell.exported.discard(name)
        shell.functions.pop(name, None)
    shell.status = 0


def _set(shell: _Shell, args: list[str], line: int) -> None:
    flags, names, operands = _options(args)
    for flag, on in flags:
        if flag == "u":
            shell.nounset = on
        elif flag == "e":
            shell.errexit = on
    for name, on in names:
        if name in ("nounset", "errexit"):
            setattr(shell, name, on)
    if operands is not None:
        shell.args = operands
    shell.status = 0


def _options(args: Sequence[str]) -> tuple[list[tuple[str, bool]], list[tuple[str, bool]], list[str] | None]:
    """``set``-style options: (letters with on/off, ``-o NAME`` names with on/off, the operands
    after them or ``None`` when there are none). ``-euo pipefail`` is ``-e -u -o pipefail``."""
    flags: list[tuple[str, bool]] = []
    names: list[tuple[str, bool]] = []
    rest = list(args)
    while rest and rest[0][:1] in ("-", "+") and rest[0] not in ("-", "--"):
        arg = rest.pop(0)
        on = arg[0] == "-"
        if arg.startswith("--"):
            continue
        for letter in arg[1:]:
            if letter == "o":
                names.append((rest.pop(0) if rest else "", on))
            else:
                flags.append((letter, on))
    if rest and rest[0] in ("-", "--"):
        rest.pop(0)
        return flags, names, rest
    return flags, names, rest or None


def _test(shell: _Shell, args: list[str], line: int) -> None:
    if args and args[-1] == "]":
        args = args[:-1]
    shell.status = 0 if _evaluate(args, shell.files) else 1


def _evaluate(args: list[str], files: Mapping[str, str]) -> bool:
    """``test``/``[``: string and integer comparisons, ``!``, ``-a``/``-o``; files exist only
    when given."""
    if not args:
        return False
    if args[0] == "!":
        return not _evaluate(args[1:], files)
    for join in ("-o", "-a"):
        if join in args[1:-1]:
            at = args.index(join, 1)
            first, second = _evaluate(args[:at], files), _evaluate(args[at + 1 :], files)
            return (first or second) if join == "-o" else (first and second)
    if len(args) == 1:
        return args[0] != ""
    if len(args) == 2:
        unary, operand = args
        if unary == "-z":
            return operand == ""
        if unary == "-n":
            return operand != ""
        if unary in ("-e", "-f", "-r", "-s", "-x"):
            return operand in files
        if unary == "-d":
            return any(path.startswith(operand.rstrip("/") + "/") for path in files)
        return False
    if len(args) == 3:
        left, op, right = args
        if op in ("=", "=="):
            return left == right
        if op == "!=":
            return left != right
        numbers = {"-eq": operator.eq, "-ne": operator.ne, "-lt": operator.lt, "-le": operator.le}
        numbers |= {"-gt": operator.gt, "-ge": operator.ge}
        if op in numbers:
            try:
                return bool(numbers[op](int(left), int(right)))
            except ValueError:
                return False
    return False


def _status(code: int) -> Callable[[_Shell, list[str], int], None]:
    def builtin(shell: _Shell, args: list[str], line: int) -> None:
        shell.status = code

    return builtin


def _source(shell: _Shell, args: list[str], line: int) -> None:
    text = shell.files.get(args[0]) if args else None
    shell.status = 0
    if text is not None and shell.depth < MAX_DEPTH:
        shell.depth += 1
        try:
            shell.run_list(parse(text))
        finally:
            shell.depth -= 1


def _exit(shell: _Shell, args: list[str], line: int) -> None:
    code = int(args[0]) if args and args[0].lstrip("-").isdigit() else shell.status
    raise _Exit(code % 256)


def _shift(shell: _Shell, args: list[str], line: int) -> None:
    count = int(args[0]) if args and args[0].isdigit() else 1
    shell.args = shell.args[count:]
    shell.status = 0


_BUILTINS: dict[str, Callable[[_Shell, list[str], int], None]] = {
    "export": _export,
    "readonly": _declare,
    "declare": _declare,
    "typeset": _declare,
    "local": _declare,
    "unset": _unset,
    "set": _set,
    "[": _test,
    "test": _test,
    "true": _status(0),
    ":": _status(0),
    "false": _status(1),
    "source": _source,
    ".": _source,
    "exit": _exit,
    "shift": _shift,
    **{
        name: _status(0)
        for name in (
            "cd",
            "echo",
            "printf",
            "shopt",
            "trap",
            "ulimit",
            "umask",
            "wait",
            "eval",
            "alias",
            "hash",
        )
    },
}


def _shell_options(argv: Sequence[str]) -> tuple[str | None, list[str], set[str]]:
    """(the ``-c`` script or ``None``, the operands after it, the options turned on)."""
    flags, names, operands = _options(argv[1:])
    options = {letter for letter, on in flags if on}
    options |= {{"nounset": "u", "errexit": "e"}.get(name, "") for name, on in names if on}
    rest = operands or []
    command = (rest.pop(0) if rest else "") if "c" in options else None
    return command, rest, options


def resolve(
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    files: Mapping[str, str] | None = None,
    *,
    depth: int = 0,
) -> Script:
    """The programs ``argv`` starts in environment ``env`` (``files``: path -> text of the files
    a script may run, such as a ConfigMap's mounted keys). A command that is not a shell starts
    itself."""
    env = dict(env or {})
    files = files or {}
    if not argv:
        return Script(())
    base = argv[0].rsplit("/", 1)[-1]
    if base == "env":
        unwrapped = _env_command(argv, env)
        if unwrapped is not None:
            return resolve(unwrapped[0], unwrapped[1], files, depth=depth)
    if base not in SHELLS:
        return Script((Invocation(tuple(argv), env),))
    command, operands, options = _shell_options(argv)
    dash = base in ("sh", "dash", "ash")
    if command is not None:
        text, name, args, from_file = command, operands[0] if operands else base, operands[1:], False
    elif operands and operands[0] in files:
        text, name, args, from_file = files[operands[0]], operands[0], operands[1:], True
    else:
        return Script((Invocation(tuple(argv), env),))  # a script we cannot read: opaque
    shell = _Shell(
        name=name,
        dash=dash,
        script_file=from_file,
        vars=dict(env),
        exported=set(env),
        files=files,
        args=list(args),
        nounset="u" in options,
        errexit="e" in options,
        depth=depth,
    )
    try:
        shell.run_list(parse(text))
    except ShellSyntaxError as err:
        return Script(tuple(shell.invocations), 2, _syntax_message(shell, err, from_file))
    except _Exit as stop:
        return Script(tuple(shell.invocations), stop.code, stop.message)
    except RecursionError:
        return Script(tuple(shell.invocations), 2, shell.message(0, "script nested too deeply"))
    return Script(tuple(shell.invocations), shell.status)


def _env_command(argv: Sequence[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]] | None:
    """``env [-i] [-u NAME]... [NAME=VALUE]... COMMAND...`` as the command and the environment it
    gets; ``None`` when there is no command (``env`` prints the environment)."""
    rest, out = list(argv[1:]), dict(env)
    while rest and rest[0].startswith("-") and rest[0] != "--":
        option = rest.pop(0)
        if option in ("-i", "-", "--ignore-environment"):
            out = {}
        elif option in ("-u", "--unset") and rest:
            out.pop(rest.pop(0), None)
        elif option.startswith("--unset="):
            out.pop(option.partition("=")[2], None)
        elif option in ("-C", "--chdir") and rest:
            rest.pop(0)
    if rest and rest[0] == "--":
        rest.pop(0)
    while rest and ASSIGNMENT.match(rest[0]):
        name, _, value = rest.pop(0).partition("=")
        out[name] = value
    return (rest, out) if rest else None


def _syntax_message(shell: _Shell, err: ShellSyntaxError, from_file: bool) -> str:
    text = str(err)
    if len(text) == 1:  # an unterminated quote
        if shell.dash:
            return shell.message(err.line, "Syntax error: Unterminated quoted string")
        text = f"unexpected EOF while looking for matching `{text}'"
    if shell.dash:
        return shell.message(err.line, f"Syntax error: {text}")
    where = f"{shell.name}: line {err.line}" if from_file else f"{shell.name}: -c: line {err.line}"
    return f"{where}: {text}"


__all__ = ["MAX_STEPS", "SHELLS", "Invocation", "Script", "resolve"]
