"""packaging/compose.yaml as users run it: Debian 12's docker-compose
(1.29, the Compose file format without Compose-v2-only keys) reads it,
and the services it starts are wired as the comments say."""
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

# The packaging tier: packaging/compose.yaml.
pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "packaging" / "compose.yaml"


@pytest.mark.skipif(shutil.which("docker-compose") is None,
                    reason="docker-compose is not installed (make deps)")
def test_docker_compose_1_29_reads_the_file():
    p = subprocess.run(["docker-compose", "-p", "tidemark-demo", "-f",
                        str(COMPOSE), "config"], capture_output=True,
                       cwd=str(ROOT), timeout=60)
    assert p.returncode == 0, p.stderr.decode()
    cfg = yaml.safe_load(p.stdout)
    tm = cfg["services"]["tidemark"]
    assert tm["environment"]["TIDEMARK_UPSTREAM_DEFAULT_URL"] == \
        "http://backend:8080"
    assert sorted(tm["networks"]) == ["back", "front"]
    assert list(cfg["services"]["app"]["networks"]) == ["front"]
    assert cfg["networks"]["back"]["internal"] is True
    assert cfg["services"]["app"]["depends_on"]["tidemark"]["condition"] \
        == "service_healthy"
