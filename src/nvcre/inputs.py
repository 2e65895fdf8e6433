"""Reading what a user hands ``nvcrectl``: manifest files and logs, from a path or stdin (``-``).

Every problem is an ``InputError`` whose message names the source and says what is wrong in one
line: a missing or unreadable file, a directory, binary data, text that is not UTF-8, an empty
file, YAML that does not parse or holds something other than Kubernetes objects.

Manifests must be UTF-8 text. Logs are read more leniently, as real logs hold stray bytes (a
truncated multi-byte character, a NUL run left by ``copytruncate``): a log is refused only when
its first block is mostly not text; otherwise its lines are read as the controllers read them
(``nvcre.measure.lines``: an invalid byte reads as U+FFFD and the line still counts).
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO, Final

import yaml

from nvcre import yamlio

STDIN: Final = "-"
MAX_MANIFEST_BYTES: Final = 16 * 1024 * 1024
"""A manifest file larger than this is refused (the API server takes objects of 1.5 MiB)."""
MAX_MANIFEST_VALUES: Final = 1_000_000
"""Values (scalars, lists and maps) the documents of a manifest file may hold once its YAML
aliases are followed: a few lines of nested aliases can otherwise stand for billions."""
LOG_SNIFF_BYTES: Final = 64 * 1024
"""The first block of a log, judged text or binary before the log is read."""
LOG_BINARY_FRACTION: Final = 0.3
"""A log whose first block has more than this share of bytes that are neither text nor NUL
(control characters other than tab, newlines, form feed, backspace and escape; bytes that are
not UTF-8) is binary. NULs are not counted: ``copytruncate`` leaves runs of them in real logs."""

_TEXT_CONTROLS: Final = frozenset("\t\n\r\f\v\b\x1b")
_UTF16_32_BOMS: Final = (b"\xff\xfe", b"\xfe\xff")


NO_OBJECTS: Final = "no Kubernetes objects (only empty YAML documents)"


class InputError(ValueError):
    """Input a command cannot use; the one-line message starts with the source it came from."""


def label(source: str) -> str:
    """How messages name a source: its path, or ``<stdin>``."""
    return "<stdin>" if source == STDIN else source


def _stdin_bytes() -> BinaryIO:
    stream: BinaryIO | None = getattr(sys.stdin, "buffer", None)
    return stream if stream is not None else io.BytesIO(sys.stdin.read().encode())


def read_bytes(source: str, limit: int = MAX_MANIFEST_BYTES) -> bytes:
    """The bytes of a file or of stdin, at most ``limit`` of them."""
    try:
        if source == STDIN:
            data = _stdin_bytes().read(limit + 1)
        else:
            with open(source, "rb") as file:
                data = file.read(limit + 1)
    except OSError as error:
        raise InputError(f"{label(source)}: cannot read file: {error.strerror or error}") from error
    if len(data) > limit:
        raise InputError(f"{label(source)}: larger than {limit // (1024 * 1024)} MiB")
    return data


def manifest_text(source: str, data: bytes) -> str:
    """``data`` as the UTF-8 text of a manifest."""
    where = label(source)
    if not data.strip():
        raise InputError(f"{where}: empty file" if data == b"" else f"{where}: only whitespace")
    nul = data.find(b"\0")
    if nul >= 0 or data.startswith(_UTF16_32_BOMS):
        at = f" (a NUL byte at offset {nul})" if nul >= 0 else " (a UTF-16 or UTF-32 byte order mark)"
        raise InputError(f"{where}: binary data{at}; a manifest is UTF-8 YAML text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(
            f"{where}: not UTF-8 text (byte 0x{data[error.start]:02x} at offset {error.start})"
        ) from error


def _count_values(documents: list[Any], limit: int) -> bool:
    """Whether the documents hold at most ``limit`` values, shared ones (aliases) counted each
    time they are reached; iterative, and it stops at the limit (a cyclic alias never ends)."""
    stack, count = list(documents), 0
    while stack:
        count += 1
        if count > limit:
            return False
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def yaml_documents(source: str, text: str) -> list[Any]:
    """Every document of ``text`` that is not empty, or ``InputError`` when it is not YAML."""
    where = label(source)
    try:
        documents = [doc for doc in yamlio.load_all(text) if doc is not None]
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise InputError(f"{where}: not valid YAML{at}: {problem}") from error
    except RecursionError as error:
        raise InputError(f"{where}: not valid YAML: nested too deeply") from error
    if not _count_values(documents, MAX_MANIFEST_VALUES):
        raise InputError(f"{where}: more than {MAX_MANIFEST_VALUES:,} values once YAML aliases are expanded")
    return documents


def manifest_documents(source: str) -> list[dict[str, Any]]:
    """The Kubernetes objects of a manifest file or stdin: at least one, each a mapping."""
    return objects(source, yaml_documents(source, manifest_text(source, read_bytes(source))))


def objects(source: str, documents: list[Any]) -> list[dict[str, Any]]:
    """``documents`` (of :func:`yaml_documents`) when there is one or more and each is a mapping."""
    if not documents:
        raise InputError(f"{label(source)}: {NO_OBJECTS}")
    for index, document in enumerate(documents):
        if not isinstance(document, dict):
            what = "document" if len(documents) == 1 else f"document {index + 1}"
            raise InputError(
                f"{label(source)}: {what} is a YAML {_yaml_type(document)}, not a Kubernetes object (a mapping)"
            )
    return documents


_YAML_TYPES: Final = ((bool, "boolean"), (int | float, "number"), (str, "string"), (list, "list"))


def _yaml_type(value: Any) -> str:
    return next((name for kind, name in _YAML_TYPES if isinstance(value, kind)), type(value).__name__)


def _binary_share(sample: bytes) -> float:
    """The share of ``sample``'s characters that are not text, NULs left out."""
    text = sample.replace(b"\0", b"").decode("utf-8", errors="replace")
    if not text:
        return 0.0
    bad = sum(1 for char in text if char == "\ufffd" or (char < " " and char not in _TEXT_CONTROLS))
    return bad / len(text)


@contextmanager
def open_log(source: str) -> Iterator[BinaryIO]:
    """A log file (or stdin) as a binary stream, once its first block is judged to be text
    (split it into lines with :func:`nvcre.measure.lines.read_lines`)."""
    where = label(source)
    try:
        binary: Any = (
            _stdin_bytes() if source == STDIN else open(source, "rb", buffering=LOG_SNIFF_BYTES)  # noqa: SIM115
        )
    except OSError as error:
        raise InputError(f"{where}: cannot read file: {error.strerror or error}") from error
    try:
        if not hasattr(binary, "peek"):
            binary = io.BufferedReader(binary, LOG_SNIFF_BYTES)
        try:
            sample = binary.peek(LOG_SNIFF_BYTES)[:LOG_SNIFF_BYTES]
        except OSError as error:
            raise InputError(f"{where}: cannot read file: {error.strerror or error}") from error
        if not sample:
            raise InputError(f"{where}: empty file")
        if sample.startswith(_UTF16_32_BOMS):
            raise InputError(
                f"{where}: UTF-16 or UTF-32 text; logs are read as UTF-8 (convert it with iconv)"
            )
        share = _binary_share(sample)
        if share > LOG_BINARY_FRACTION:
            raise InputError(
                f"{where}: binary data, not a text log ({share:.0%} of its first "
                f"{LOG_SNIFF_BYTES // 1024} KiB is neither text nor NUL)"
            )
        yield binary
    finally:
        if source != STDIN:
            binary.close()
