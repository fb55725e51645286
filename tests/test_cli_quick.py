"""`fltr-audit --help` and `--version` answered without importing the commands
(fltr_audit/cli/quick.py): the same text as the full application, and no numpy or pandas."""

import subprocess
import sys
from pathlib import Path

import typer

from fltr_audit.cli import app, main, register_commands

REPO = Path(__file__).resolve().parents[1]


def test_quick_help_is_the_full_application_s_help(capsys):
    import fltr_audit.cli.report  # noqa: F401  (imported out of order, as another caller may: the order holds)

    assert main(["--help"]) == 0
    quick = capsys.readouterr().out
    register_commands()
    typer.main.get_command(app).main(args=["--help"], standalone_mode=False)
    full = capsys.readouterr().out
    assert quick == full and "audit-defense" in quick and "algorithms" in quick


def test_help_and_version_import_no_numpy_or_pandas():
    code = ("import sys; from fltr_audit.cli import main; main(['--help']); main(['--version']); "
            "print(sorted(m for m in ('numpy', 'pandas', 'fltr_audit.cli.audit') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(REPO), "PATH": ""})
    assert out.stdout.strip().splitlines()[-1] == "[]"
    assert "fltr-audit 0.1.0" in out.stdout
