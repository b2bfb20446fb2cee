"""kmon installs like a Python package: the built wheel, in a clean venv outside the checkout,
gives working commands, carries the local stack's Prometheus files, and its spark-submit entry
point loads ``kmon stream`` alone."""
from __future__ import annotations

import os
import site
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(root / "dist"), str(REPO)],
                   check=True, capture_output=True, timeout=600)
    wheel, = (root / "dist").glob("kmon-*.whl")
    env = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True, timeout=300)
    subprocess.run([str(env / "bin" / "pip"), "install", "-q", "--no-deps", "--disable-pip-version-check",
                    str(wheel)], check=True, capture_output=True, timeout=300)
    # the dependencies (pyspark alone is 300 MB) come from the test venv's site-packages; a bare path
    # line does not run that directory's .pth files, so the checkout's editable kmon stays out
    site_packages, = (env / "lib").glob("python3*/site-packages")
    (site_packages / "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return env


def run(venv: Path, *argv: str) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=venv.parent,
                          env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")})
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def test_the_installed_commands_answer_help(venv: Path) -> None:
    assert "collect" in run(venv, str(venv / "bin" / "kmon"), "--help").stdout
    assert "--zookeeper" in run(venv, str(venv / "bin" / "kmon"), "collect", "zk", "--help").stdout


def test_the_code_and_the_stack_files_come_from_the_wheel(venv: Path) -> None:
    shown = run(venv, str(venv / "bin" / "python"), "-c",
                "import kmon, streaming, collectors, dashboards.catalog as d; from stack import configs as c; "
                "print(kmon.__file__, streaming.__file__, collectors.__file__, d.DASHBOARD_DIR); "
                "print(c.PROMETHEUS_TEMPLATE.read_text()[:1], (c.RULES_DIR / 'kmon-alerts.yml').is_file(), "
                "c.ALERTMANAGER_CONFIG.is_file(), len(list(d.DASHBOARD_DIR.glob('*.json'))))").stdout.split("\n")
    assert all(path.startswith(str(venv)) for path in shown[0].split()), shown[0]
    in_checkout = len(list((Path(__file__).resolve().parents[2] / "dashboards").glob("*.json")))
    assert shown[1].split()[1:] == ["True", "True", str(in_checkout)]   # every dashboard, none left behind


def test_the_spark_submit_entry_point_loads_kmon_stream_alone(venv: Path) -> None:
    python = str(venv / "bin" / "python")
    assert "--bootstrap-servers" in run(venv, python, "-m", "streaming.submit", "--help").stdout
    loaded = run(venv, python, "-c", "import sys, streaming.submit; print(sorted(m for m in sys.modules if "
                 "m.split('.')[0] in ('kazoo', 'grafana_client', 'collectors', 'dashboards', 'cli', 'stack')))")
    assert loaded.stdout.strip() == "[]"
