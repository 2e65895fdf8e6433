"""The goodput formula and the status number format (spec measurements 3.3)."""

from __future__ import annotations


def goodput(t_w: float, t_ch: float, t_re: float, t_rm: float, t_save: float) -> float:
    """``(t_w - (t_rm + t_ch) - t_re - t_save) / (t_w - t_re)``; 0 when the denominator is not
    positive or the numerator is negative."""
    denominator = t_w - t_re
    if denominator <= 0:
        return 0.0
    numerator = t_w - (t_rm + t_ch) - t_re - t_save
    if numerator < 0:
        return 0.0
    return numerator / denominator


def fmt(value: float) -> str:
    """A status number: fixed 6 decimals (``0.000000`` for zero)."""
    return f"{value:.6f}"


def number(text: object) -> float:
    """A status number read back; anything unparsable is 0."""
    try:
        value = float(str(text))
    except ValueError:
        return 0.0
    return value if value == value and abs(value) != float("inf") else 0.0
