"""Locally as on the platform: a .env file is read, the real environment wins, Procfile.dev."""

import subprocess
import sys

from tests.harness.cluster import ROOT, base_env

READ_SETTINGS = (
    "import runpy; from webapp.config import load_config;"
    "conf = runpy.run_path('{root}/webapp/gunicorn_conf.py'); config = load_config();"
    "print(conf['bind'], conf['workers'], config['LEADER_STALE_SECONDS'],"
    " config['INSTANCE_NAME'])"
)


def gunicorn_settings(cwd, **env: str) -> list[str]:
    """Return bind, workers, LEADER_STALE_SECONDS and INSTANCE_NAME as gunicorn would read them."""
    environ = {k: v for k, v in base_env(None, PYTHONPATH=str(ROOT), **env).items()
               if k not in ("PORT", "WEB_CONCURRENCY", "LEADER_STALE_SECONDS", "INSTANCE_NAME",
                            "PYTHON_DOTENV_DISABLED") or k in env}
    result = subprocess.run([sys.executable, "-c", READ_SETTINGS.format(root=ROOT)], cwd=cwd,
                            env=environ, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_gunicorn_reads_a_dotenv_file_and_a_real_environment_variable_wins(tmp_path):
    (tmp_path / ".env").write_text("# local settings\nPORT=8123\nWEB_CONCURRENCY=3\n"
                                   "LEADER_STALE_SECONDS=7\nINSTANCE_NAME='from-dotenv'\n")
    project = tmp_path / "sub"  # found from a folder below, as the Flask CLI finds it
    project.mkdir()
    assert gunicorn_settings(project, WEB_CONCURRENCY="5", INSTANCE_NAME="real") == [
        "0.0.0.0:8123", "5", "7.0", "real"]


def test_without_a_dotenv_file_or_with_dotenv_disabled_the_defaults_hold(tmp_path):
    assert gunicorn_settings(tmp_path, INSTANCE_NAME="web.1") == [
        "0.0.0.0:8000", "2", "10.0", "web.1"]
    (tmp_path / ".env").write_text("PORT=8123\n")
    assert gunicorn_settings(tmp_path, INSTANCE_NAME="web.1", PYTHON_DOTENV_DISABLED="1")[0] == (
        "0.0.0.0:8000")  # as the tests' fleets run: a developer's .env changes nothing


def test_procfile_dev_migrates_first_then_runs_the_platforms_web_command():
    def processes(name: str) -> dict[str, str]:
        lines = (ROOT / name).read_text().splitlines()
        return dict(line.split(": ", 1) for line in lines if line and not line.startswith("#"))

    platform, local = processes("Procfile"), processes("Procfile.dev")
    assert list(local) == ["web"]  # no release process to stop web when it exits
    assert local["web"] == f"{platform['release']} && exec {platform['web']}"
