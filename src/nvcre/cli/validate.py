"""``nvcrectl validate FILE...``: check manifests offline."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import click

from nvcre.validation import ObjectReport, validate_file


def _files(paths: tuple[Path, ...]) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml"))
        else:
            yield path


@click.command("validate")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
def validate_command(paths: tuple[Path, ...]) -> None:
    """Validate nvcre manifests (files or directories of YAML) without a cluster.

    Reports every violation of the API schema with its field path. CEL rules that need the
    API server (immutability on update, for example) are checked at admission.
    """
    reports: list[ObjectReport] = [report for path in _files(paths) for report in validate_file(path)]
    failed = 0
    for report in reports:
        if report.ok:
            click.echo(f"{report.label}: OK")
            continue
        failed += 1
        for finding in report.findings:
            click.echo(f"{report.label}: {finding}", err=True)
    if failed:
        click.echo(f"{failed} of {len(reports)} objects invalid", err=True)
        sys.exit(1)
