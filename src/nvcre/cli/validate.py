"""``nvcrectl validate FILE...``: check manifests offline."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from nvcre.cli.common import BAD_INPUT
from nvcre.inputs import STDIN, InputError, label, manifest_documents
from nvcre.validation import ObjectReport, log_profiles, validate_documents


def _sources(path: str) -> list[str]:
    """The files a path names: itself, or a directory's ``*.yaml``/``*.yml`` files below it."""
    if path == STDIN or not Path(path).is_dir():
        return [path]
    found = sorted(str(p) for p in Path(path).rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
    if not found:
        raise InputError(f"{path}: a directory without .yaml or .yml files")
    return found


@click.command("validate")
@click.argument("paths", nargs=-1, required=True)
def validate_command(paths: tuple[str, ...]) -> None:
    """Validate nvcre manifests (files, directories of YAML, or - for stdin) without a cluster.

    Reports every violation of the API schema with its field path, and what nvcre itself would
    refuse only after the workload ran: unknown threshold keys, CEL expressions that do not
    compile, exceed their limits or do not return a bool, a sampleInterval below 5s, LogProfile
    patterns that do not compile. CEL rules that need the API server (immutability on update,
    for example) are checked at admission. Exit 1 when an object is invalid, 2 when a file
    cannot be read as manifests.
    """
    loaded: list[tuple[str, list[dict[str, Any]]]] = []
    errors: list[str] = []
    for path in paths:
        try:
            sources = _sources(path)
        except InputError as error:
            errors.append(str(error))
            continue
        for source in sources:
            try:
                loaded.append((source, manifest_documents(source)))
            except InputError as error:
                errors.append(str(error))
    profiles = log_profiles(doc for _, documents in loaded for doc in documents)
    reports: list[ObjectReport] = [
        report
        for source, documents in loaded
        for report in validate_documents(documents, label(source), profiles)
    ]
    failed = 0
    for report in reports:
        for warning in report.warnings:
            click.echo(f"{report.label}: warning: {warning}", err=True)
        if report.ok:
            click.echo(f"{report.label}: OK")
            continue
        failed += 1
        for finding in report.findings:
            click.echo(f"{report.label}: {finding}", err=True)
    if failed:
        click.echo(f"{failed} of {len(reports)} objects invalid", err=True)
    for message in errors:
        click.echo(f"Error: {message}", err=True)
    if errors:
        sys.exit(BAD_INPUT)
    if failed:
        sys.exit(1)
