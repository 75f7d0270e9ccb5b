"""SOPS secrets on a real API server: the encrypted Secret is applied decrypted (its
``stringData`` becomes the server's ``data``), a quiet tick compares the decrypted object
with the live one and writes nothing, and neither ``diff --live`` nor the state
directory shows the plaintext."""

import base64
from pathlib import Path

from tests.k8s.k8s_scenario import NAMESPACE, KubeScenario
from tests.k8s.test_k8s_scenarios import server_writes
from tests.renderers.test_sops import (
    PASSWORD,
    SECRETS,
    TOKEN,
    age_key,
    encrypt,
    holders,
    secret_yaml,
)
from tests.support.scenario import CONFIGMAP, DEPLOYMENT, FAILURE_POLICY, release_yaml


def release(name: str) -> str:
    source = f"{{path: apps/{name}, decryption: {{provider: sops, key: ops}}}}"
    return release_yaml(name, source=source, spec_extra=FAILURE_POLICY)


def state_files(s: KubeScenario) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in s.state.rglob("*") if p.is_file()}


def test_an_encrypted_secret_is_applied_decrypted_and_a_quiet_tick_writes_nothing(
    kscenario: KubeScenario, tmp_path: Path
) -> None:
    s, name = kscenario, "sopsweb"
    recipient = age_key(s.state, "ops.agekey")
    (s.state / "keys.yaml").write_text(
        f"keys:\n  ops:\n    age: {{file: ops.agekey}}\n    releases: [releases/{name}.yaml]\n"
    )
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    s.commit(
        {
            f"apps/{name}/namespace.yaml": NAMESPACE,
            f"apps/{name}/deployment.yaml": DEPLOYMENT.replace("IMAGE", "1.0"),
            f"apps/{name}/configmap.yaml": CONFIGMAP,
            f"apps/{name}/secret.enc.yaml": encrypt(secret_yaml(), recipient, scratch),
            f"releases/{name}.yaml": release(name),
        }
    )
    result = s.reconcile(name, minutes=0)
    assert result.code == 0, result.err
    secret = s.kube.core.read_namespaced_secret("db", name)
    assert base64.b64decode(secret.data["password"]).decode() == PASSWORD
    assert base64.b64decode(secret.data["token"]).decode() == TOKEN
    assert secret.metadata.labels["app"] == "web"
    s.ready(name)
    assert s.reconcile(name, minutes=1).code == 0
    assert s.status(name)["rollout"]["state"] == "Succeeded"

    before = server_writes(s, name)
    assert s.reconcile(name, minutes=10).code == 0  # due again: compared, not written
    assert server_writes(s, name) == before
    assert "drift" not in s.status(name)

    done = s.cli("diff", "--live", name, "--now", "2026-11-29T12:11:00Z")
    assert done.code == 0, done.err
    assert f"{name}: no change against the live cluster" in done.out, done.out
    assert holders({"diff": (done.out + done.err).encode()}) == []
    assert holders(state_files(s), SECRETS) == []
