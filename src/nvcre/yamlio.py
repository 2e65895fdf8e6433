"""YAML through libyaml where PyYAML was built with it (as its wheels are): the same documents as
``yaml.safe_load``/``yaml.safe_dump``, several times faster, which a CLI's cold start and the
catalog's and charts' files feel. Errors are PyYAML's ``yaml.YAMLError`` either way."""

from __future__ import annotations

from typing import Any

import yaml

SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
SafeDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def load(text: str | bytes) -> Any:
    """The one document of ``text`` (``yaml.safe_load``)."""
    return yaml.load(text, Loader=SafeLoader)


def load_all(text: str | bytes) -> list[Any]:
    """Every document of ``text``, empty ones as ``None`` (``yaml.safe_load_all``)."""
    return list(yaml.load_all(text, Loader=SafeLoader))


def dump(data: Any, **options: Any) -> str:
    """``yaml.safe_dump(data, **options)``."""
    text: str = yaml.dump(data, Dumper=SafeDumper, **options)
    return text
