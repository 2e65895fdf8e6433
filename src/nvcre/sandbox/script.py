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

SHELLS = frozenset({"sh", "bash", "dash", "ash"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
_OPERATORS = ("&&", "||", ";;", "<<-", "<<", ">>", ">&", "<&", "&>", ">|", ";", "&", "|", "(", ")", "<", ">")
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
# words and tokens


@dataclass(frozen=True)
class _Part:
    text: str
    quoted: bool
    expand: bool  #: ``text`` is an expansion (``$X``, ``${...}``, ``$(...)``, backticks)


@dataclass(frozen=True)
class _Word:
    parts: tuple[_Part, ...]
    line: int

    @property
    def literal(self) -> str | None:
        """The word's text when it is one unquoted literal (what a keyword must be)."""
        if len(self.parts) == 1 and not self.parts[0].quoted and not self.parts[0].expand:
            return self.parts[0].text
        return None


@dataclass(frozen=True)
class _Op:
    text: str
    line: int


_Token = _Word | _Op


class _SyntaxError(Exception):
    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


def _closing(text: str, start: int, open_: str, close: str) -> int:
    """Index just past the ``close`` matching the ``open_`` before ``start`` (quotes skipped)."""
    depth, i = 1, start
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "'" and open_ == "(":
            end = text.find("'", i + 1)
            i = len(text) if end < 0 else end + 1
            continue
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


def _expansion_end(text: str, i: int) -> int:
    """Index just past the expansion starting with ``$`` at ``i`` (``i + 1``: a lone ``$``)."""
    nxt = text[i + 1 : i + 2]
    if nxt == "{":
        return _closing(text, i + 2, "{", "}")
    if nxt == "(":
        return _closing(text, i + 2, "(", ")")
    if nxt and (nxt.isdigit() or nxt in "@*#?$!-"):
        return i + 2
    match = _NAME.match(text, i + 1)
    return match.end() if match else i + 1


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.line = 1
        self.heredocs: list[tuple[str, bool]] = []

    def tokens(self) -> list[_Token]:
        out: list[_Token] = []
        text = self.text
        while self.i < len(text):
            c = text[self.i]
            if c in " \t\r":
                self.i += 1
            elif c == "\\" and text[self.i + 1 : self.i + 2] == "\n":
                self.i += 2
                self.line += 1
            elif c == "#":
                end = text.find("\n", self.i)
                self.i = len(text) if end < 0 else end
            elif c == "\n":
                out.append(_Op("\n", self.line))
                self.i += 1
                self.line += 1
                self._heredoc_bodies()
            elif (op := self._operator()) is not None:
                out.append(_Op(op, self.line))
                self.i += len(op)
                if op in ("<<", "<<-"):
                    out.append(self._heredoc_start(op == "<<-"))
            else:
                out.append(self._word())
        return out

    def _operator(self) -> str | None:
        return next((op for op in _OPERATORS if self.text.startswith(op, self.i)), None)

    def _heredoc_start(self, strip: bool) -> _Word:
        """The delimiter word after ``<<``; its body is skipped at the end of the line."""
        while self.text[self.i : self.i + 1] in (" ", "\t"):
            self.i += 1
        word = self._word()
        self.heredocs.append(("".join(p.text for p in word.parts), strip))
        return word

    def _heredoc_bodies(self) -> None:
        for delimiter, strip in self.heredocs:
            while self.i < len(self.text):
                end = self.text.find("\n", self.i)
                end = len(self.text) if end < 0 else end
                line = self.text[self.i : end]
                self.i = end + 1
                self.line += 1
                if (line.lstrip("\t") if strip else line) == delimiter:
                    break
        self.heredocs = []

    def _word(self) -> _Word:
        text, line = self.text, self.line
        parts: list[_Part] = []
        buf: list[str] = []

        def flush(quoted: bool) -> None:
            if buf:
                parts.append(_Part("".join(buf), quoted, False))
                buf.clear()

        while self.i < len(text):
            c = text[self.i]
            if c in " \t\r\n" or self._operator() is not None:
                if c in "<>" and buf and "".join(buf).isdigit() and not parts:
                    buf.clear()  # a file descriptor number: ``2>&1``
                    return _Word((), line)
                break
            if c == "\\":
                nxt = text[self.i + 1 : self.i + 2]
                if nxt == "\n":
                    self.line += 1
                else:
                    buf.append(nxt)
                self.i += 2
            elif c == "'":
                flush(False)
                end = text.find("'", self.i + 1)
                if end < 0:
                    raise _SyntaxError("'", line)
                parts.append(_Part(text[self.i + 1 : end], True, False))
                self.line += text.count("\n", self.i, end)
                self.i = end + 1
            elif c == '"':
                flush(False)
                self._double(parts, line)
            elif c == "$" or c == "`":
                flush(False)
                parts.append(self._expansion(quoted=False, line=line))
            else:
                buf.append(c)
                self.i += 1
        flush(False)
        if not parts:
            parts.append(_Part("", False, False))
        return _Word(tuple(parts), line)

    def _double(self, parts: list[_Part], line: int) -> None:
        text = self.text
        self.i += 1
        buf: list[str] = []
        while True:
            if self.i >= len(text):
                raise _SyntaxError('"', line)
            c = text[self.i]
            if c == '"':
                self.i += 1
                break
            if c == "\\" and text[self.i + 1 : self.i + 2] in ("$", "`", '"', "\\", "\n"):
                if text[self.i + 1] != "\n":
                    buf.append(text[self.i + 1])
                self.i += 2
            elif c in "$`":
                if buf:
                    parts.append(_Part("".join(buf), True, False))
                    buf = []
                parts.append(self._expansion(quoted=True, line=line))
            else:
                if c == "\n":
                    self.line += 1
                buf.append(c)
                self.i += 1
        parts.append(_Part("".join(buf), True, False))

    def _expansion(self, *, quoted: bool, line: int) -> _Part:
        text, i = self.text, self.i
        if text[i] == "`":
            end = text.find("`", i + 1)
            if end < 0:
                raise _SyntaxError("`", line)
            self.i = end + 1
            return _Part("$()", quoted, True)
        end = _expansion_end(text, i)
        if end < 0:
            raise _SyntaxError("}" if text[i + 1] == "{" else ")", line)
        if end == i + 1:
            self.i = end
            return _Part("$", quoted, False)
        self.line += text.count("\n", i, end)
        self.i = end
        return _Part(text[i:end], quoted, True)


# ---------------------------------------------------------------------------------------------
# the syntax tree


@dataclass
class _Simple:
    assigns: list[tuple[str, _Word]]
    words: list[_Word]
    line: int


@dataclass
class _Pipeline:
    commands: list[_Node]
    negate: bool


@dataclass
class _AndOr:
    first: _Pipeline
    rest: list[tuple[str, _Pipeline]]


@dataclass
class _If:
    branches: list[tuple[list[_AndOr], list[_AndOr]]]
    otherwise: list[_AndOr] | None


@dataclass
class _For:
    name: str
    words: list[_Word] | None  #: ``None``: ``"$@"``
    body: list[_AndOr]


@dataclass
class _Case:
    word: _Word
    arms: list[tuple[list[_Word], list[_AndOr]]]


@dataclass
class _Loop:
    """``while``/``until``: parsed, never entered (its condition may wait on the world)."""


@dataclass
class _Group:
    body: list[_AndOr]
    subshell: bool


@dataclass
class _Function:
    name: str
    body: _Node


_Node = _Simple | _If | _For | _Case | _Loop | _Group | _Function


class _Parser:
    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens = tokens
        self.i = 0

    def _peek(self, offset: int = 0) -> _Token | None:
        at = self.i + offset
        return self.tokens[at] if at < len(self.tokens) else None

    def _is(self, *words: str) -> bool:
        tok = self._peek()
        if isinstance(tok, _Op):
            return tok.text in words
        return tok is not None and tok.literal in words

    def _line(self) -> int:
        tok = self._peek() or (self.tokens[-1] if self.tokens else None)
        return tok.line if tok is not None else 1

    def _expect(self, word: str) -> None:
        if not self._is(word):
            tok = self._peek()
            got = "end of file" if tok is None else (tok.text if isinstance(tok, _Op) else "word")
            raise _SyntaxError(
                f"syntax error near unexpected token `{got.strip() or 'newline'}'", self._line()
            )
        self.i += 1

    def _newlines(self) -> None:
        while self._is("\n", ";"):
            self.i += 1

    def program(self) -> list[_AndOr]:
        body = self._list(stop=())
        if self._peek() is not None:
            tok = self._peek()
            text = tok.text if isinstance(tok, _Op) else (tok.literal or "word") if tok else ""
            raise _SyntaxError(f"syntax error near unexpected token `{text}'", self._line())
        return body

    def _list(self, stop: Sequence[str]) -> list[_AndOr]:
        out: list[_AndOr] = []
        while True:
            while self._is("\n", ";", "&"):
                self.i += 1
            tok = self._peek()
            if tok is None or self._is(*stop) or self._is(")", ";;"):
                return out
            out.append(self._and_or())

    def _and_or(self) -> _AndOr:
        first = self._pipeline()
        rest: list[tuple[str, _Pipeline]] = []
        while self._is("&&", "||"):
            op = self._peek()
            assert isinstance(op, _Op)
            self.i += 1
            while self._is("\n"):
                self.i += 1
            rest.append((op.text, self._pipeline()))
        return _AndOr(first, rest)

    def _pipeline(self) -> _Pipeline:
        negate = False
        if self._is("!"):
            negate = True
            self.i += 1
        commands = [self._command()]
        while self._is("|"):
            self.i += 1
            while self._is("\n"):
                self.i += 1
            commands.append(self._command())
        return _Pipeline(commands, negate)

    def _command(self) -> _Node:
        if self._is("if"):
            return self._if()
        if self._is("for"):
            return self._for()
        if self._is("case"):
            return self._case()
        if self._is("while", "until"):
            self.i += 1
            self._list(stop=("do",))
            self._expect("do")
            self._list(stop=("done",))
            self._expect("done")
            self._redirections()
            return _Loop()
        if self._is("{"):
            self.i += 1
            body = self._list(stop=("}",))
            self._expect("}")
            self._redirections()
            return _Group(body, subshell=False)
        if self._is("("):
            self.i += 1
            body = self._list(stop=(")",))
            self._expect(")")
            self._redirections()
            return _Group(body, subshell=True)
        if self._is("function"):
            self.i += 1
            name = self._peek()
            self.i += 1
            if self._is("("):
                self.i += 2
            self._newlines()
            return _Function(name.literal or "" if isinstance(name, _Word) else "", self._command())
        tok, nxt = self._peek(), self._peek(1)
        if isinstance(tok, _Word) and tok.literal and isinstance(nxt, _Op) and nxt.text == "(":
            self.i += 2
            self._expect(")")
            self._newlines()
            return _Function(tok.literal, self._command())
        return self._simple()

    def _redirections(self) -> None:
        while isinstance(tok := self._peek(), _Op) and tok.text in (
            "<",
            ">",
            ">>",
            ">&",
            "<&",
            "&>",
            ">|",
            "<<",
            "<<-",
        ):
            self.i += 2

    def _simple(self) -> _Simple:
        line = self._line()
        assigns: list[tuple[str, _Word]] = []
        words: list[_Word] = []
        while (tok := self._peek()) is not None:
            if isinstance(tok, _Op):
                if tok.text in ("<", ">", ">>", ">&", "<&", "&>", ">|", "<<", "<<-"):
                    self.i += 2
                    continue
                break
            self.i += 1
            if not tok.parts:  # a file descriptor number before a redirection
                continue
            if not assigns and not words and tok.literal in _CLOSERS:
                raise _SyntaxError(f"syntax error near unexpected token `{tok.literal}'", tok.line)
            first = tok.parts[0]
            match = _ASSIGNMENT.match(first.text) if not first.quoted and not first.expand else None
            if not words and match:
                rest = (_Part(first.text[match.end() :], False, False), *tok.parts[1:])
                assigns.append((match.group(1), _Word(rest, tok.line)))
            elif tok.parts:
                words.append(tok)
        if not assigns and not words:
            tok = self._peek()
            text = (
                "newline"
                if tok is None or (isinstance(tok, _Op) and tok.text == "\n")
                else getattr(tok, "text", "word")
            )
            raise _SyntaxError(f"syntax error near unexpected token `{text}'", line)
        return _Simple(assigns, words, line)

    def _if(self) -> _If:
        branches: list[tuple[list[_AndOr], list[_AndOr]]] = []
        otherwise: list[_AndOr] | None = None
        self._expect("if")
        while True:
            condition = self._list(stop=("then",))
            self._expect("then")
            body = self._list(stop=("elif", "else", "fi"))
            branches.append((condition, body))
            if self._is("elif"):
                self.i += 1
                continue
            if self._is("else"):
                self.i += 1
                otherwise = self._list(stop=("fi",))
            self._expect("fi")
            self._redirections()
            return _If(branches, otherwise)

    def _for(self) -> _For:
        self.i += 1
        name = self._peek()
        self.i += 1
        words: list[_Word] | None = None
        self._skip_newlines()
        if self._is("in"):
            self.i += 1
            words = []
            while isinstance(tok := self._peek(), _Word):
                words.append(tok)
                self.i += 1
        self._newlines()
        self._expect("do")
        body = self._list(stop=("done",))
        self._expect("done")
        self._redirections()
        return _For(name.literal or "" if isinstance(name, _Word) else "", words, body)

    def _skip_newlines(self) -> None:
        while self._is("\n"):
            self.i += 1

    def _case(self) -> _Case:
        self.i += 1
        word = self._peek()
        if not isinstance(word, _Word):
            raise _SyntaxError("syntax error near `case'", self._line())
        self.i += 1
        self._skip_newlines()
        self._expect("in")
        arms: list[tuple[list[_Word], list[_AndOr]]] = []
        while True:
            self._skip_newlines()
            if self._is("esac"):
                self.i += 1
                break
            if self._is("("):
                self.i += 1
            patterns: list[_Word] = []
            while isinstance(tok := self._peek(), _Word):
                patterns.append(tok)
                self.i += 1
                if self._is("|"):
                    self.i += 1
            self._expect(")")
            body = self._list(stop=("esac",))
            arms.append((patterns, body))
            if self._is(";;"):
                self.i += 1
        self._redirections()
        return _Case(word, arms)


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
    functions: dict[str, _Node] = field(default_factory=dict)
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
        match = _NAME.match(body) or re.match(r"[0-9@*#?$!-]", body)
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
            elif c == "$" and (end := _expansion_end(raw, i)) > i + 1:
                out.append(self.parameter(raw[i:end], line))
                i = end
            else:
                out.append(c)
                i += 1
        return "".join(out)

    def fields(self, word: _Word) -> list[str]:
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

    def words(self, words: Sequence[_Word]) -> list[str]:
        return [f for w in words for f in self.fields(w)]

    # -- running -------------------------------------------------------------------------------

    def step(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise _Exit(1, self.message(0, "too many steps (the script loops)"))

    def run_list(self, body: Sequence[_AndOr], *, checked: bool = False) -> int:
        for item in body:
            self.run_and_or(item, checked=checked)
        return self.status

    def run_and_or(self, item: _AndOr, *, checked: bool) -> None:
        self.run_pipeline(item.first, checked=checked or bool(item.rest))
        for k, (op, pipeline) in enumerate(item.rest):
            if (op == "&&") == (self.status == 0):
                self.run_pipeline(pipeline, checked=checked or k < len(item.rest) - 1)

    def run_pipeline(self, pipeline: _Pipeline, *, checked: bool) -> None:
        for command in pipeline.commands:
            self.run_node(command)
        if pipeline.negate:
            self.status = 0 if self.status else 1
        elif self.status and self.errexit and not checked:
            raise _Exit(self.status)

    def run_node(self, node: _Node) -> None:
        self.step()
        if isinstance(node, _Simple):
            self.simple(node)
        elif isinstance(node, _If):
            for condition, body in node.branches:
                if self.run_list(condition, checked=True) == 0:
                    self.run_list(body)
                    return
            self.status = 0
            if node.otherwise is not None:
                self.run_list(node.otherwise)
        elif isinstance(node, _For):
            values = self.args if node.words is None else self.words(node.words)
            self.status = 0
            for value in values:
                self.step()
                self.vars[node.name] = value
                self.run_list(node.body)
        elif isinstance(node, _Case):
            subject = "".join(self.fields(node.word))
            self.status = 0
            for patterns, body in node.arms:
                if any(fnmatch.fnmatchcase(subject, "".join(self.fields(p)) or "") for p in patterns):
                    self.run_list(body)
                    return
        elif isinstance(node, _Loop):
            self.status = 0
        elif isinstance(node, _Group):
            if node.subshell:
                saved = (dict(self.vars), set(self.exported))
                self.run_list(node.body)
                self.vars, self.exported = saved
            else:
                self.run_list(node.body)
        else:
            self.functions[node.name] = node.body
            self.status = 0

    def simple(self, node: _Simple) -> None:
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

    def text_of(self, word: _Word) -> str:
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
    if not _NAME.fullmatch(name):
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
            shell.run_list(_parse(text))
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


def _parse(text: str) -> list[_AndOr]:
    return _Parser(_Lexer(text).tokens()).program()


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
        shell.run_list(_parse(text))
    except _SyntaxError as err:
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
    while rest and _ASSIGNMENT.match(rest[0]):
        name, _, value = rest.pop(0).partition("=")
        out[name] = value
    return (rest, out) if rest else None


def _syntax_message(shell: _Shell, err: _SyntaxError, from_file: bool) -> str:
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
