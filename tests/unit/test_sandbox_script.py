"""Reading a container's shell script without running it: what it starts, with which argv and env.

Each case's expected argv is what bash (or dash, for ``sh``) itself builds for the same script:
``test_cases_agree_with_the_real_shells`` runs the cases' scripts through the machine's shells
(with every program replaced by a function that prints its argv), so the expectations are the
real shells' answers, not this module's opinion.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nvcre import catalog
from nvcre.sandbox.script import MAX_STEPS, resolve

#: (script, env, the argv of each program it starts)
CASES: list[tuple[str, dict[str, str], list[list[str]]]] = [
    ('X="a b"; run $X "$X"', {}, [["run", "a", "b", "a b"]]),
    (
        "run ${N:-8} ${N-unset} ${E:-d} ${E-d} ${E:+alt} ${N:+alt}",
        {"E": ""},
        [["run", "8", "unset", "d"]],
    ),
    ('run "${M:=7}" $M', {}, [["run", "7", "7"]]),
    ('A=1 run; echo "$A"; B=2; export B; run2', {}, [["run"], ["run2"]]),
    ("run '$X' \"\\$X\" \\$X", {"X": "v"}, [["run", "$X", "$X", "$X"]]),
    ('T="--a 1"; if [ "$V" = "-1" ]; then T="--a 2"; fi; run $T', {"V": "5"}, [["run", "--a", "1"]]),
    ('T="--a 1"; if [ "$V" = "-1" ]; then T="--a 2"; fi; run $T', {"V": "-1"}, [["run", "--a", "2"]]),
    ('if [ -d /opt/x ]; then run a; elif [ -n "$V" ]; then run b; else run c; fi', {}, [["run", "c"]]),
    ('case "$K" in a|b) run ab;; *) run other;; esac', {"K": "b"}, [["run", "ab"]]),
    ('case "$K" in a|b) run ab;; *) run other;; esac', {"K": "z"}, [["run", "other"]]),
    ("for n in 1 2; do run $n; done", {}, [["run", "1"], ["run", "2"]]),
    ("[ 3 -gt 2 ] && run yes || run no", {}, [["run", "yes"]]),
    ("[ 1 -gt 2 ] && run yes || run no", {}, [["run", "no"]]),
    ('f() { run "$1" $#; }; f x y', {}, [["run", "x", "2"]]),
    ("run $((2 * 3 + 1)) $(hostname) `date` x", {}, [["run", "7", "x"]]),
    ("cat <<EOF > /tmp/out\n$(not run)\nEOF\nrun after 2>&1 >/dev/null", {}, [["cat"], ["run", "after"]]),
    ("run a \\\n  b # c d\n# run e\n", {}, [["run", "a", "b"]]),
    ("exec run 1; run 2", {}, [["run", "1"]]),
    ('set -- p q; run "$@" $2', {}, [["run", "p", "q", "q"]]),
    ("( X=1; run $X ); run ${X:-none}", {}, [["run", "1"], ["run", "none"]]),
]


@pytest.mark.parametrize(("script", "env", "expected"), CASES)
def test_what_a_script_starts(script: str, env: dict[str, str], expected: list[list[str]]) -> None:
    found = resolve(["bash", "-c", script], env)
    assert (found.exit_code, found.error) == (0, None)
    assert [list(p.argv) for p in found.invocations] == expected


#: Stand in for every program the cases start: each prints its argv as a JSON line on fd 3.
_STUBS = """exec 3>&1 >/dev/null
_emit() { python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$@" >&3; }
run() { _emit run "$@"; }
run2() { _emit run2 "$@"; }
cat() { _emit cat "$@"; }
hostname() { :; }
date() { :; }
"""


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("python3") is None, reason="needs bash")
@pytest.mark.parametrize(("script", "env", "expected"), [c for c in CASES if "exec " not in c[0]])
def test_cases_agree_with_bash(script: str, env: dict[str, str], expected: list[list[str]]) -> None:
    done = subprocess.run(
        ["bash", "-c", _STUBS + script], env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True
    )
    assert [json.loads(line) for line in done.stdout.splitlines()] == expected


def test_the_environment_a_program_gets_is_the_exported_variables() -> None:
    found = resolve(["sh", "-c", "A=1; export B=2; C=3 run; export A; run2"], {"HOME": "/root"})
    first, second = found.invocations
    assert first.env == {"HOME": "/root", "B": "2", "C": "3"}
    assert second.env == {"HOME": "/root", "B": "2", "A": "1"}


def test_set_u_fails_on_an_unset_variable_with_each_shells_own_message() -> None:
    """bash names the script file and line (exit 1), or just the variable under -c (127); dash
    says "parameter not set" (exit 2): the messages real bash 5.2 and dash print."""
    script = "set -euo pipefail\nrun ${TRAIN_ITERS}\n"
    from_file = resolve(["/bin/bash", "/config/train.sh"], {}, {"/config/train.sh": script})
    assert (from_file.exit_code, from_file.error) == (
        1,
        "/config/train.sh: line 2: TRAIN_ITERS: unbound variable",
    )
    inline = resolve(["bash", "-c", script])
    assert (inline.exit_code, inline.error) == (127, "bash: TRAIN_ITERS: unbound variable")
    dash = resolve(["sh", "-c", script])
    assert (dash.exit_code, dash.error) == (2, "sh: 2: TRAIN_ITERS: parameter not set")
    assert resolve(["bash", "-c", script], {"TRAIN_ITERS": "5"}).invocations[0].argv == ("run", "5")
    assert resolve(["bash", "-c", "set -u; run ${X:-} ${X-d}"]).invocations[0].argv == ("run", "d")


def test_syntax_errors_end_the_script_as_the_shells_do() -> None:
    assert resolve(["bash", "-c", 'run "unterminated']).error == (
        "bash: -c: line 1: unexpected EOF while looking for matching `\"'"
    )
    assert resolve(["sh", "-c", "run 'x"]).error == "sh: 1: Syntax error: Unterminated quoted string"
    broken = resolve(["bash", "-c", "run a\nfi"])
    assert broken.exit_code == 2 and broken.error is not None and "line 2" in (broken.error or "")


def test_set_e_stops_at_a_failing_command_outside_a_condition() -> None:
    stopped = resolve(["bash", "-c", "set -e; run 1; false; run 2"])
    assert ([p.argv for p in stopped.invocations], stopped.exit_code) == ([("run", "1")], 1)
    kept = resolve(["bash", "-c", "set -e; false || true; if false; then :; fi; run 2"])
    assert [p.argv for p in kept.invocations] == [("run", "2")]


def test_a_script_runs_the_files_it_is_given_and_nothing_else() -> None:
    files = {"/config/train.sh": "exec torchrun pretrain_gpt.py --train-iters ${TRAIN_ITERS}"}
    wrapper = "rm -rf /opt/amazon\nunset NCCL_NET_PLUGIN\nexec /bin/bash /config/train.sh"
    found = resolve(["/bin/bash", "-c", wrapper], {"TRAIN_ITERS": "9", "NCCL_NET_PLUGIN": "ofi"}, files)
    removal, training = found.invocations
    assert removal.argv == ("rm", "-rf", "/opt/amazon")
    assert training.argv == ("torchrun", "pretrain_gpt.py", "--train-iters", "9")
    assert "NCCL_NET_PLUGIN" not in training.env
    assert resolve(["bash", "/missing.sh"]).invocations[0].argv == ("bash", "/missing.sh")
    assert resolve(["bash", "-c", "[ -f /config/train.sh ] && run"], {}, files).invocations[0].argv == (
        "run",
    )


def test_a_program_that_is_not_a_shell_starts_itself() -> None:
    argv = ["timeout", "3600", "/opt/amazon/openmpi/bin/mpirun", "-x", "PATH=$PATH:/opt/amazon/efa/bin"]
    (program,) = resolve(argv, {"A": "1"}).invocations
    assert (list(program.argv), dict(program.env)) == (argv, {"A": "1"})


def test_env_runs_its_command_in_the_environment_it_sets() -> None:
    argv = ["/usr/bin/env", "-u", "OMPI_MCA_btl_tcp_if_include", "NCCL_DEBUG=INFO", "mpirun", "-N", "4"]
    (program,) = resolve(argv, {"OMPI_MCA_btl_tcp_if_include": "eth0", "HOME": "/root"}).invocations
    assert (program.argv, dict(program.env)) == (
        ("mpirun", "-N", "4"),
        {"HOME": "/root", "NCCL_DEBUG": "INFO"},
    )
    (nested,) = resolve(["env", "-i", "X=1", "sh", "-c", "run $X $HOME"], {"HOME": "/root"}).invocations
    assert (nested.argv, dict(nested.env)) == (("run", "1"), {"X": "1"})
    assert resolve(["env", "A=1"]).invocations[0].argv == ("env", "A=1")  # prints the environment


def test_loops_that_wait_on_the_world_are_not_entered_and_runaway_scripts_stop() -> None:
    assert [p.argv for p in resolve(["sh", "-c", "while true; do run; done; run done"]).invocations] == [
        ("run", "done")
    ]
    runaway = resolve(["bash", "-c", "f() { f; }; f"])
    assert runaway.exit_code == 1 and "nesting" in (runaway.error or "")
    many = resolve(["bash", "-c", "for i in " + " ".join(["x"] * (MAX_STEPS + 10)) + "; do :; done; run"])
    assert many.exit_code == 1 and not many.invocations


def test_the_mpi_workers_script_starts_sshd() -> None:
    lib = Path(catalog.__file__).parent / "entries" / "_lib" / "runtime"
    keys = (lib / "copy-ssh-keys.sh").read_text()
    script = (lib / "sshd-worker.sh").read_text().replace('{{ lib("runtime/copy-ssh-keys.sh") }}', keys)
    found = resolve(["sh", "-c", script])
    assert found.exit_code == 0 and found.invocations[-1].argv == ("/usr/sbin/sshd", "-De")


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from([*"ab $={}()[]'\"\\;&|<>#\n-:+`!*?", "if ", "fi", "then ", "case ", "do "]),
        max_size=60,
    ).map("".join)
)
def test_any_text_reads_without_raising(text: str) -> None:
    found = resolve(["bash", "-c", text], {"a": "1"})
    assert found.exit_code >= 0
