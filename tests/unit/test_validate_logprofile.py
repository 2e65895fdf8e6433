"""`nvcrectl validate` compiles a LogProfile's patterns as the controllers will: what RE2 cannot
compile is reported with the field path before the GPUs run (fails on main: only the schema was
checked, so these profiles were OK until a measurement tried to use them)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from nvcre.cli.main import cli
from nvcre.measure.builtin import builtin_profiles
from nvcre.yamlio import dump

PROFILE = """\
apiVersion: nvcre.nvidia.com/v1alpha1
kind: LogProfile
metadata: {name: mine}
spec:
  timestamp: {layout: "2006-01-02T15:04:05Z07:00"}
  patterns:
    bandwidthResult:
      regex: '%s'
"""
ROW = r"size=(?P<size>\d+) alg=(?P<algBW>[\d.]+) bus=(?P<busBW>[\d.]+)"


def validate(path: Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_a_pattern_re2_cannot_compile_is_named(tmp_path: Path) -> None:
    path = tmp_path / "profile.yaml"
    path.write_text(PROFILE % (r"(?<=size=)" + ROW))
    code, _, err = validate(path)
    assert code == 1
    assert f"{path}: LogProfile/mine: spec.patterns.bandwidthResult.regex: invalid perl operator: (?<=" in err


def test_a_pattern_without_its_required_captures_is_named(tmp_path: Path) -> None:
    path = tmp_path / "profile.yaml"
    path.write_text(PROFILE % r"size=(?P<size>\d+)")
    code, _, err = validate(path)
    assert code == 1
    assert "spec.patterns.bandwidthResult.regex: must capture the named group(s) ['algBW', 'busBW']" in err


def test_good_and_builtin_profiles_are_ok(tmp_path: Path) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_text(
        PROFILE % ROW.replace("(?P<size>", "(?<size>")
        + "---\n"
        + "---\n".join(dump(p) for p in builtin_profiles())
    )
    code, out, err = validate(path)
    assert (code, err) == (0, "")
    assert out.count(": OK") == 1 + len(builtin_profiles())
