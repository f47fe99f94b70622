"""The packages' shell completion (packaging/completion/make_completion.py, run at package build
time): click's scripts, tried in the real bash and zsh against this checkout's xpu-cdi, which
answers the completion requests itself."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

REPO = Path(__file__).resolve().parents[2]
MAKE = REPO / "packaging/completion/make_completion.py"
# xpu-cdi is found on PATH by the scripts, as an installed one is
ENV = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": "/nonexistent"}


def script(shell: str, tmp_path: Path) -> Path:
    path = tmp_path / f"completion.{shell}"
    r = subprocess.run([sys.executable, str(MAKE), shell], capture_output=True, text=True, timeout=60, check=True)
    path.write_text(r.stdout)
    return path


def bash_complete(tmp_path: Path, words: List[str]) -> List[str]:
    """COMPREPLY for the command line *words* (the last one being completed), in bash."""
    code = (f"source {script('bash', tmp_path)}\n"
            f"COMP_WORDS=({' '.join(words)}); COMP_CWORD={len(words) - 1}\n"
            "_xpu_cdi_completion xpu-cdi\n"
            "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", code], capture_output=True, text=True, timeout=120,
                       env=ENV)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    return r.stdout.split()


def zsh_complete(tmp_path: Path, words: List[str]) -> List[str]:
    """What the zsh script offers for *words*: loaded through compinit (it registers itself with
    compdef), then run with compadd and _describe standing in for the completion widget's own,
    printing what they are given."""
    code = ("autoload -Uz compinit && compinit -u -D\n"  # -D: no dump file written anywhere
            f"source {script('zsh', tmp_path)}\n"
            "[[ $_comps[xpu-cdi] == _xpu_cdi_completion ]] || { print -u2 not registered; exit 3 }\n"
            "compadd() { for w in ${(P)${@[-1]}}; do print -- $w; done }\n"
            "_describe() { for w in ${(P)3}; do print -- ${w%%:*}; done }\n"
            f"words=({' '.join(words)}); CURRENT={len(words)}\n"
            "_xpu_cdi_completion\n")
    r = subprocess.run(["zsh", "-f", "-c", code], capture_output=True, text=True, timeout=120, env=ENV)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    # compinit -d FILE replaces FILE by a rename (`-d /dev/null` once made /dev/null a plain file)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    return r.stdout.split()


@pytest.fixture(params=["bash", "zsh"])
def complete(request: pytest.FixtureRequest) -> object:
    if shutil.which(request.param) is None:
        pytest.fail(f"{request.param} is missing: run `make deps` (scripts/install-deps.sh)")
    return bash_complete if request.param == "bash" else zsh_complete


def test_commands(complete: object, tmp_path: Path) -> None:
    got = complete(tmp_path, ["xpu-cdi", "d"])  # type: ignore[operator]
    assert {"device-plugin", "doctor", "dra-driver"} <= set(got) and "generate" not in got


def test_options_of_a_command_loaded_on_first_use(complete: object, tmp_path: Path) -> None:
    """The commands are built when first asked for (cli.COMMANDS): completion asks too."""
    got = complete(tmp_path, ["xpu-cdi", "exporter", "--li"])  # type: ignore[operator]
    assert "--listen" in got and "--interval" not in got


def test_choices(complete: object, tmp_path: Path) -> None:
    got = complete(tmp_path, ["xpu-cdi", "device-plugin", "--log-format", "''"])  # type: ignore[operator]
    assert {"text", "json"} <= set(got)


def test_the_script_is_click_s_for_this_program(tmp_path: Path) -> None:
    """What `_XPU_CDI_COMPLETE=bash_source xpu-cdi` prints, byte for byte (docs/operations.md says so)."""
    exe = str(Path(sys.executable).parent / "xpu-cdi")
    for shell in ("bash", "zsh"):
        ours = script(shell, tmp_path).read_text()
        theirs = subprocess.run([exe], capture_output=True, text=True, timeout=60,
                                env=dict(os.environ, _XPU_CDI_COMPLETE=f"{shell}_source")).stdout
        assert ours == theirs and "xpu-cdi" in ours


def test_unknown_shell_is_a_usage_error() -> None:
    r = subprocess.run([sys.executable, str(MAKE), "fish"], capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout) == (2, "") and r.stderr.startswith("usage: make_completion.py bash|zsh")


def test_both_packages_generate_and_install_them() -> None:
    """Made from the built package at build time, installed where each distribution's shells look."""
    rules = (REPO / "packaging/deb/debian/rules").read_text()
    spec = (REPO / "packaging/rpm/xpu-cdi.spec").read_text()
    for shell, deb_path, rpm_path in (("bash", "usr/share/bash-completion/completions/xpu-cdi",
                                       "%{bash_completions_dir}/xpu-cdi"),
                                      ("zsh", "usr/share/zsh/vendor-completions/_xpu-cdi",
                                       "%{zsh_completions_dir}/_xpu-cdi")):
        assert f"packaging/completion/make_completion.py {shell} \\\n\t  > debian/xpu-cdi/{deb_path}\n" in rules
        assert f"make_completion.py {shell} > build/completion/{Path(rpm_path).name}\n" in spec
        assert f"%{{buildroot}}{rpm_path}\n" in spec and f"\n{rpm_path}\n" in spec
