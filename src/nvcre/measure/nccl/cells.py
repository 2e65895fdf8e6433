"""Table cells as nccl-tests prints them: integers, ``%g``/``%f`` numbers, ``N/A``.

Everything here is a plain string check (no regular expression), so a cell is judged in time
linear in its length and never raises.
"""

from __future__ import annotations

_NUMBER_START = frozenset("0123456789.+-")
_NUMBER_END = frozenset("0123456789.")
_NOT_FINITE = frozenset({"inf", "-inf", "+inf", "nan", "-nan", "+nan"})
INT64_LIMIT = 1 << 63
NOT_AVAILABLE = "N/A"


def is_count(text: str) -> bool:
    """A non-negative decimal integer below 2**63 (sizes, element counts)."""
    if not (text.isascii() and text.isdecimal()):
        return False
    return len(text) < 19 or (len(text) == 19 and int(text) < INT64_LIMIT)


def is_integer(text: str) -> bool:
    """A decimal integer, possibly negative (the ``root`` column prints ``-1``)."""
    return is_count(text[1:]) if text[:1] == "-" else is_count(text)


def number(text: str) -> float | None:
    """A number in any form C's ``printf`` gives (``12.5``, ``6e+06``, ``1.04858e+06``, ``inf``);
    None for anything else (Python-only forms such as ``1_000``, ``infinity`` or non-ASCII digits)."""
    if not text or len(text) > 32 or not text.isascii() or "_" in text:
        return None
    if text[0] not in _NUMBER_START:
        return float(text) if text.lower() in _NOT_FINITE else None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if text[-1] in _NUMBER_END or text.lower() in _NOT_FINITE else None


def finite(value: float) -> bool:
    return value == value and abs(value) != float("inf")


def is_number(text: str) -> bool:
    return number(text) is not None


def count_value(text: str) -> int | None:
    """A ``#wrong`` cell (``%g`` of a count: ``0``, ``3``, ``1.04858e+06``) as an int; None for
    ``N/A`` and anything that is not a non-negative finite number."""
    if is_count(text):
        return int(text)
    value = number(text)
    if value is None or not finite(value) or value < 0:
        return None
    return round(value)


def is_word(text: str) -> bool:
    """A data type or reduction op (``float``, ``bfloat16``, ``f8e4m3``, ``sum``, ``none``)."""
    return text[:1].isascii() and text[:1].isalpha()


def trailing_count(token: str) -> str | None:
    """The digits a token ends with when a prefix is glued to them (``<stdout>:137438953472``
    when ``%12li`` fills the whole width): the prefix must end in punctuation, never a letter,
    digit, sign or dot, so ``x86`` or ``-1`` are not split."""
    end = len(token)
    start = end
    while start > 0 and token[start - 1].isdecimal():
        start -= 1
    if start in (0, end) or token[start - 1].isalnum() or token[start - 1] in ".+-":
        return None
    digits = token[start:]
    return digits if is_count(digits) else None
