"""The shell syntax :mod:`.script` reads: words with their quoting, tokens, and the tree of
commands (simple commands, pipelines, ``&&``/``||`` lists, ``if``, ``case``, ``for``, loops,
groups, functions). Here-document bodies and redirections are skipped; nothing is expanded.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
_OPERATORS = ("&&", "||", ";;", "<<-", "<<", ">>", ">&", "<&", "&>", ">|", ";", "&", "|", "(", ")", "<", ">")
#: Reserved words that end a compound command: never the start of a simple one.
_CLOSERS = frozenset({"then", "elif", "else", "fi", "do", "done", "esac", "}"})


@dataclass(frozen=True)
class Part:
    text: str
    quoted: bool
    expand: bool  #: ``text`` is an expansion (``$X``, ``${...}``, ``$(...)``, backticks)


@dataclass(frozen=True)
class Word:
    parts: tuple[Part, ...]
    line: int

    @property
    def literal(self) -> str | None:
        """The word's text when it is one unquoted literal (what a keyword must be)."""
        if len(self.parts) == 1 and not self.parts[0].quoted and not self.parts[0].expand:
            return self.parts[0].text
        return None


@dataclass(frozen=True)
class Op:
    text: str
    line: int


Token = Word | Op


class ShellSyntaxError(Exception):
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


def expansion_end(text: str, i: int) -> int:
    """Index just past the expansion starting with ``$`` at ``i`` (``i + 1``: a lone ``$``)."""
    nxt = text[i + 1 : i + 2]
    if nxt == "{":
        return _closing(text, i + 2, "{", "}")
    if nxt == "(":
        return _closing(text, i + 2, "(", ")")
    if nxt and (nxt.isdigit() or nxt in "@*#?$!-"):
        return i + 2
    match = NAME.match(text, i + 1)
    return match.end() if match else i + 1


class Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.line = 1
        self.heredocs: list[tuple[str, bool]] = []

    def tokens(self) -> list[Token]:
        out: list[Token] = []
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
                out.append(Op("\n", self.line))
                self.i += 1
                self.line += 1
                self._heredoc_bodies()
            elif (op := self._operator()) is not None:
                out.append(Op(op, self.line))
                self.i += len(op)
                if op in ("<<", "<<-"):
                    out.append(self._heredoc_start(op == "<<-"))
            else:
                out.append(self._word())
        return out

    def _operator(self) -> str | None:
        return next((op for op in _OPERATORS if self.text.startswith(op, self.i)), None)

    def _heredoc_start(self, strip: bool) -> Word:
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

    def _word(self) -> Word:
        text, line = self.text, self.line
        parts: list[Part] = []
        buf: list[str] = []

        def flush(quoted: bool) -> None:
            if buf:
                parts.append(Part("".join(buf), quoted, False))
                buf.clear()

        while self.i < len(text):
            c = text[self.i]
            if c in " \t\r\n" or self._operator() is not None:
                if c in "<>" and buf and "".join(buf).isdigit() and not parts:
                    buf.clear()  # a file descriptor number: ``2>&1``
                    return Word((), line)
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
                    raise ShellSyntaxError("'", line)
                parts.append(Part(text[self.i + 1 : end], True, False))
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
            parts.append(Part("", False, False))
        return Word(tuple(parts), line)

    def _double(self, parts: list[Part], line: int) -> None:
        text = self.text
        self.i += 1
        buf: list[str] = []
        while True:
            if self.i >= len(text):
                raise ShellSyntaxError('"', line)
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
                    parts.append(Part("".join(buf), True, False))
                    buf = []
                parts.append(self._expansion(quoted=True, line=line))
            else:
                if c == "\n":
                    self.line += 1
                buf.append(c)
                self.i += 1
        parts.append(Part("".join(buf), True, False))

    def _expansion(self, *, quoted: bool, line: int) -> Part:
        text, i = self.text, self.i
        if text[i] == "`":
            end = text.find("`", i + 1)
            if end < 0:
                raise ShellSyntaxError("`", line)
            self.i = end + 1
            return Part("$()", quoted, True)
        end = expansion_end(text, i)
        if end < 0:
            raise ShellSyntaxError("}" if text[i + 1] == "{" else ")", line)
        if end == i + 1:
            self.i = end
            return Part("$", quoted, False)
        self.line += text.count("\n", i, end)
        self.i = end
        return Part(text[i:end], quoted, True)


# ---------------------------------------------------------------------------------------------
# the syntax tree


@dataclass
class Simple:
    assigns: list[tuple[str, Word]]
    words: list[Word]
    line: int


@dataclass
class Pipeline:
    commands: list[Node]
    negate: bool


@dataclass
class AndOr:
    first: Pipeline
    rest: list[tuple[str, Pipeline]]


@dataclass
class If:
    branches: list[tuple[list[AndOr], list[AndOr]]]
    otherwise: list[AndOr] | None


@dataclass
class For:
    name: str
    words: list[Word] | None  #: ``None``: ``"$@"``
    body: list[AndOr]


@dataclass
class Case:
    word: Word
    arms: list[tuple[list[Word], list[AndOr]]]


@dataclass
class Loop:
    """``while``/``until``: parsed, never entered (its condition may wait on the world)."""


@dataclass
class Group:
    body: list[AndOr]
    subshell: bool


@dataclass
class Function:
    name: str
    body: Node


Node = Simple | If | For | Case | Loop | Group | Function


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.i = 0

    def _peek(self, offset: int = 0) -> Token | None:
        at = self.i + offset
        return self.tokens[at] if at < len(self.tokens) else None

    def _is(self, *words: str) -> bool:
        tok = self._peek()
        if isinstance(tok, Op):
            return tok.text in words
        return tok is not None and tok.literal in words

    def _line(self) -> int:
        tok = self._peek() or (self.tokens[-1] if self.tokens else None)
        return tok.line if tok is not None else 1

    def _expect(self, word: str) -> None:
        if not self._is(word):
            tok = self._peek()
            got = "end of file" if tok is None else (tok.text if isinstance(tok, Op) else "word")
            raise ShellSyntaxError(
                f"syntax error near unexpected token `{got.strip() or 'newline'}'", self._line()
            )
        self.i += 1

    def _newlines(self) -> None:
        while self._is("\n", ";"):
            self.i += 1

    def program(self) -> list[AndOr]:
        body = self._list(stop=())
        if self._peek() is not None:
            tok = self._peek()
            text = tok.text if isinstance(tok, Op) else (tok.literal or "word") if tok else ""
            raise ShellSyntaxError(f"syntax error near unexpected token `{text}'", self._line())
        return body

    def _list(self, stop: Sequence[str]) -> list[AndOr]:
        out: list[AndOr] = []
        while True:
            while self._is("\n", ";", "&"):
                self.i += 1
            tok = self._peek()
            if tok is None or self._is(*stop) or self._is(")", ";;"):
                return out
            out.append(self._and_or())

    def _and_or(self) -> AndOr:
        first = self._pipeline()
        rest: list[tuple[str, Pipeline]] = []
        while self._is("&&", "||"):
            op = self._peek()
            assert isinstance(op, Op)
            self.i += 1
            while self._is("\n"):
                self.i += 1
            rest.append((op.text, self._pipeline()))
        return AndOr(first, rest)

    def _pipeline(self) -> Pipeline:
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
        return Pipeline(commands, negate)

    def _command(self) -> Node:
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
            return Loop()
        if self._is("{", "("):  # a group in the current shell, or in a subshell
            subshell = self._is("(")
            close = ")" if subshell else "}"
            self.i += 1
            body = self._list(stop=(close,))
            self._expect(close)
            self._redirections()
            return Group(body, subshell=subshell)
        if self._is("function"):
            self.i += 1
            name = self._peek()
            self.i += 1
            if self._is("("):
                self.i += 2
            self._newlines()
            return Function(name.literal or "" if isinstance(name, Word) else "", self._command())
        tok, nxt = self._peek(), self._peek(1)
        if isinstance(tok, Word) and tok.literal and isinstance(nxt, Op) and nxt.text == "(":
            self.i += 2
            self._expect(")")
            self._newlines()
            return Function(tok.literal, self._command())
        return self._simple()

    def _redirections(self) -> None:
        while isinstance(tok := self._peek(), Op) and tok.text in (
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

    def _simple(self) -> Simple:
        line = self._line()
        assigns: list[tuple[str, Word]] = []
        words: list[Word] = []
        while (tok := self._peek()) is not None:
            if isinstance(tok, Op):
                if tok.text in ("<", ">", ">>", ">&", "<&", "&>", ">|", "<<", "<<-"):
                    self.i += 2
                    continue
                break
            self.i += 1
            if not tok.parts:  # a file descriptor number before a redirection
                continue
            if not assigns and not words and tok.literal in _CLOSERS:
                raise ShellSyntaxError(f"syntax error near unexpected token `{tok.literal}'", tok.line)
            first = tok.parts[0]
            match = ASSIGNMENT.match(first.text) if not first.quoted and not first.expand else None
            if not words and match:
                rest = (Part(first.text[match.end() :], False, False), *tok.parts[1:])
                assigns.append((match.group(1), Word(rest, tok.line)))
            elif tok.parts:
                words.append(tok)
        if not assigns and not words:
            tok = self._peek()
            text = (
                "newline"
                if tok is None or (isinstance(tok, Op) and tok.text == "\n")
                else getattr(tok, "text", "word")
            )
            raise ShellSyntaxError(f"syntax error near unexpected token `{text}'", line)
        return Simple(assigns, words, line)

    def _if(self) -> If:
        branches: list[tuple[list[AndOr], list[AndOr]]] = []
        otherwise: list[AndOr] | None = None
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
            return If(branches, otherwise)

    def _for(self) -> For:
        self.i += 1
        name = self._peek()
        self.i += 1
        words: list[Word] | None = None
        self._skip_newlines()
        if self._is("in"):
            self.i += 1
            words = []
            while isinstance(tok := self._peek(), Word):
                words.append(tok)
                self.i += 1
        self._newlines()
        self._expect("do")
        body = self._list(stop=("done",))
        self._expect("done")
        self._redirections()
        return For(name.literal or "" if isinstance(name, Word) else "", words, body)

    def _skip_newlines(self) -> None:
        while self._is("\n"):
            self.i += 1

    def _case(self) -> Case:
        self.i += 1
        word = self._peek()
        if not isinstance(word, Word):
            raise ShellSyntaxError("syntax error near `case'", self._line())
        self.i += 1
        self._skip_newlines()
        self._expect("in")
        arms: list[tuple[list[Word], list[AndOr]]] = []
        while True:
            self._skip_newlines()
            if self._is("esac"):
                self.i += 1
                break
            if self._is("("):
                self.i += 1
            patterns: list[Word] = []
            while isinstance(tok := self._peek(), Word):
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
        return Case(word, arms)


def parse(text: str) -> list[AndOr]:
    """``text`` as a list of commands; :class:`ShellSyntaxError` where the shells report one."""
    return _Parser(Lexer(text).tokens()).program()


__all__ = [
    "ASSIGNMENT",
    "NAME",
    "AndOr",
    "Case",
    "For",
    "Function",
    "Group",
    "If",
    "Lexer",
    "Loop",
    "Node",
    "Op",
    "Part",
    "Pipeline",
    "ShellSyntaxError",
    "Simple",
    "Token",
    "Word",
    "expansion_end",
    "parse",
]
