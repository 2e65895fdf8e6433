"""``nvcrectl completion bash|zsh``: the scripts parse, and completing ``nvcrectl cert`` offers
``certification`` through the installed ``nvcrectl`` (the program the script calls back)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
NVCRECTL = BIN / "nvcrectl"
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def script(shell: str) -> str:
    done = subprocess.run(
        [NVCRECTL, "completion", shell], capture_output=True, text=True, env=ENV, check=True
    )
    assert done.stderr == ""
    return done.stdout


def run_shell(shell: str, code: str) -> str:
    done = subprocess.run([shell, "-c", code], capture_output=True, text=True, env=ENV, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def bash_complete(path: Path, words: str, cword: int) -> list[str]:
    """What the bash script at ``path`` offers for ``COMP_WORDS=(words)`` at ``COMP_CWORD=cword``."""
    offered = run_shell(
        "bash",
        f"source {path}; COMP_WORDS=({words}); COMP_CWORD={cword}; _nvcrectl_completion nvcrectl; "
        'printf "%s\\n" "${COMPREPLY[@]}"',
    )
    return offered.split()


def test_bash_script_parses_and_completes_cert_to_certification(tmp_path: Path) -> None:
    path = tmp_path / "nvcrectl.bash"
    path.write_text(script("bash"))
    subprocess.run(["bash", "-n", str(path)], check=True)
    assert bash_complete(path, "nvcrectl cert", 1) == ["certification"]
    assert {"cancel", "render", "status"} <= set(bash_complete(path, 'nvcrectl workloadrun ""', 2))
    assert bash_complete(path, 'nvcrectl node ""', 2) == ["history"]
    assert bash_complete(path, "nvcrectl fl", 1) == ["fleet"]


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_script_parses_registers_and_completes_cert_to_certification(tmp_path: Path) -> None:
    path = tmp_path / "_nvcrectl"
    path.write_text(script("zsh"))
    subprocess.run(["zsh", "-n", str(path)], check=True)
    registered = run_shell(
        "zsh", f"autoload -U compinit && compinit -u && source {path} && print $_comps[nvcrectl]"
    )
    assert registered.strip() == "_nvcrectl_completion"
    # what the script asks nvcrectl for (its COMP_WORDS/COMP_CWORD protocol), answered by nvcrectl
    env = {**ENV, "COMP_WORDS": "nvcrectl cert", "COMP_CWORD": "1", "_NVCRECTL_COMPLETE": "zsh_complete"}
    answer = subprocess.run(
        [NVCRECTL], capture_output=True, text=True, env=env, check=True
    ).stdout.splitlines()
    assert answer[:2] == ["plain", "certification"]


def test_an_unknown_shell_is_a_usage_error() -> None:
    done = subprocess.run([NVCRECTL, "completion", "fish"], capture_output=True, text=True, env=ENV)
    assert done.returncode == 2
    assert "'fish' is not one of 'bash', 'zsh'" in done.stderr
    assert "Traceback" not in done.stderr
