"""A flaky API server (issue 24): the fault proxy of ``faultproxy.py`` between convoy-batch
and the real API server, one fault per test during the tick that rolls out a new render,
then recovery ticks.

Each test runs the same story on two Clusters in the same ticks: Releases on ``staging``
reach the server through the proxy, a Release on ``direct`` reaches it straight (the run
that never failed). After recovery, every faulted Release must be where the direct one
is: its status, its inventory and its live objects, names aside.
"""

import time
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from tests.k8s.faultproxy import Fault, FaultProxy, applies, proxy_kubeconfig
from tests.k8s.k8s_scenario import KubeScenario, kube_cluster
from tests.support.scenario import FAILURE_POLICY, Result, release_yaml

TIMEOUT = 3.0  # the client time-out of the faulted ticks (CONVOY_K8S_TIMEOUT), seconds
MARGIN = 12.0  # seconds a tick may take beyond one time-out (a process, git, renders)
GONE = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${release}-gone}\ndata: {a: b}\n"
ADDED = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${release}-added}\ndata: {a: c}\n"


@dataclass
class Story:
    """Releases ``<case>-a``, ``<case>-b``... through the proxy and ``<case>-ref`` straight
    to the server, all at render 1 (Succeeded), then given render 2 (a new image, an object
    added, one removed)."""

    s: KubeScenario
    proxied: tuple[str, ...]
    reference: str

    @property
    def names(self) -> tuple[str, ...]:
        return (*self.proxied, self.reference)

    def render(self, version: int) -> None:
        for name in self.names:
            cluster = "staging" if name in self.proxied else "direct"
            release = release_yaml(name, spec_extra=FAILURE_POLICY).replace(
                "cluster: staging", f"cluster: {cluster}"
            )
            extra = {"gone.yaml": GONE} if version == 1 else {"added.yaml": ADDED}
            self.s.app(name, image=f"{version}.0", extra=extra, release=release)
        if version == 2:
            self.s.commit({f"apps/{n}/gone.yaml": None for n in self.names})

    def tick(self, minutes: float) -> Result:
        result = self.s.reconcile(*self.names, minutes=minutes)
        assert "Traceback" not in result.err, result.err
        return result

    def settle(self, minutes: float) -> None:
        """Ticks until every Release is healthy at its render: play the kubelet between."""
        assert self.tick(minutes).code == 0
        for name in self.names:
            self.s.ready(name)
        result = self.tick(minutes + 1)
        assert result.code == 0, result.err


def story(s: KubeScenario, proxy: FaultProxy, case: str, proxied: int = 2) -> Story:
    kubeconfig = proxy_kubeconfig(s.kube.kubeconfig, proxy, s.operator / "kubeconfig-proxy")
    direct = kube_cluster(s.kube.kubeconfig).replace("name: staging", "name: direct")
    s.commit(
        {"clusters/staging.yaml": kube_cluster(kubeconfig), "clusters/direct.yaml": direct},
        "a Cluster through the fault proxy, one straight to the server",
    )
    made = Story(s, tuple(f"{case}-{c}" for c in "abcdefgh"[:proxied]), f"{case}-ref")
    made.render(1)
    made.settle(0)
    made.render(2)
    return made


def faulted_tick(
    st: Story, monkeypatch: pytest.MonkeyPatch, minutes: float, names: tuple[str, ...] = ()
) -> Result:
    """The tick under the fault, in a process of its own (every line it prints), of
    ``names`` (default: every Release of the story)."""
    monkeypatch.setenv("CONVOY_K8S_TIMEOUT", str(TIMEOUT))
    now = f"2026-11-29T12:{minutes:02.0f}:00Z"
    result = st.s.cli_process("reconcile", *(names or st.names), "--now", now)
    monkeypatch.delenv("CONVOY_K8S_TIMEOUT")
    assert "Traceback" not in result.err, result.err
    return result


def error_lines(result: Result, names: tuple[str, ...]) -> dict[str, str]:
    """Release -> its one summary line (``name: Reason: message``); every other line on
    stderr is a log line of convoy-batch's naming a Release (no library's lines)."""
    found: dict[str, str] = {}
    for line in result.err.splitlines():
        level, _, logged = line.partition(" ")
        if level in ("WARNING", "ERROR") and logged.split(": ", 1)[0] in names:
            continue
        name = line.split(": ", 1)[0]
        assert name in names and name not in found, f"unexpected line: {line}\n{result.err}"
        found[name] = line
    return found


def confirmed(s: KubeScenario, name: str, ref: str) -> list[str]:
    """The inventory entries of a Release marked applied for render ``ref``."""
    inventory = yaml.safe_load((s.state / "inventory" / f"{name}.json").read_text())
    return [e["key"]["name"] for e in inventory["entries"] if e.get("applied_render_ref") == ref]


def snapshot(s: KubeScenario, name: str) -> dict[str, Any]:
    """What a Release reached, its name written R: status, inventory, live objects."""
    status = s.status(name)
    rollout, attempt = status["rollout"], status["lastAttempted"]
    ref = rollout["renderRef"]
    inventory = yaml.safe_load((s.state / "inventory" / f"{name}.json").read_text())
    live = s.kube.core.list_namespaced_config_map(name, label_selector=f"convoy.dev/release={name}")
    seen = {
        "rollout": (rollout["state"], rollout["reason"]),
        "attempt": (attempt["reason"], attempt["applied"], attempt["renderRef"] == ref),
        "lastHealthy is the rollout's render": status["lastHealthy"]["renderRef"] == ref,
        "inventory": sorted(
            (e["key"]["kind"], e["key"]["name"], e.get("applied_render_ref") == ref)
            for e in inventory["entries"]
        ),
        "configmaps": sorted(c.metadata.name for c in live.items),
        "image": s.deployment_image(name),
        "transitions": [c for c in s.status_log() if name in c and "RolledBack" in c],
    }
    return yaml.safe_load(yaml.safe_dump(seen).replace(name, "R"))


def converged(st: Story, minutes: float) -> None:
    """Recovery ticks, then every proxied Release is where the reference is."""
    st.settle(minutes)
    expected = snapshot(st.s, st.reference)
    assert expected["rollout"] == ["Succeeded", "Healthy"], expected
    assert expected["image"] == "example/R:2.0", expected
    for name in st.proxied:
        assert snapshot(st.s, name) == expected, name


@dataclass(frozen=True)
class Case:
    fault: Fault | None
    code: int
    """The faulted tick's exit code."""
    hit: str | None = None
    """The reason of each Release whose request the fault hit (None: none is an error)."""
    says: str = ""
    """What the message of each of them says."""
    others: frozenset[str] = frozenset({"Synced"})
    """The reasons the other proxied Releases may have."""


UNAVAILABLE = "ClusterUnavailable"
CASES = {
    "never-fails": Case(None, 0),
    "cut-in-the-headers": Case(
        Fault("cut-headers", applies, times=1), 1, UNAVAILABLE, "the answer was cut: HTTP 200"
    ),
    "cut-in-the-body": Case(
        Fault("cut-body", applies, times=1), 1, UNAVAILABLE, "no whole answer: Connection broken"
    ),
    "http-500-always": Case(Fault("status", status=500), 1, UNAVAILABLE, "HTTP 500: the fault"),
    "http-503-always": Case(Fault("status", status=503), 1, UNAVAILABLE, "HTTP 503: the fault"),
    "http-500-on-one-apply": Case(
        Fault("status", applies, times=1, status=500), 1, UNAVAILABLE, "HTTP 500: the fault"
    ),
    # A 429 with Retry-After: 1 is sent again within the tick, within a bound (3 tries of
    # one request, 10 s of waiting per Cluster and tick): the note says which bound ended it.
    "http-429-always": Case(
        Fault("status", status=429), 1, UNAVAILABLE, "HTTP 429: the fault proxy answers 429 ("
    ),
    "http-429-on-one-apply": Case(Fault("status", applies, times=1, status=429), 0),
    "http-429-without-retry-after-on-one-apply": Case(
        Fault("status", applies, times=1, status=429, retry_after=None),
        1,
        UNAVAILABLE,
        "HTTP 429: the fault proxy answers 429",
    ),
    "http-409-on-one-apply": Case(
        Fault("status", applies, times=1, status=409), 1, "ApplyFailed", "proxy answers 409"
    ),
    # After one request got no answer, the Cluster is not asked again in that tick: a
    # Release whose requests came later is ClusterUnavailable too ("not sent").
    "one-request-held": Case(
        Fault("hold", applies, times=1),
        1,
        UNAVAILABLE,
        f"no answer within {TIMEOUT:g}s",
        frozenset({"Synced", UNAVAILABLE}),
    ),
    "slow-answers": Case(Fault("slow", delay=0.2), 0),
}


def hit_releases(hits: list[str], names: tuple[str, ...]) -> set[str]:
    """The Releases whose requests the fault hit (every one for a request of none)."""
    hit = set()
    for request in hits:
        path = request.split("?", 1)[0] + "/"
        named = [n for n in names if f"/namespaces/{n}/" in path]
        hit.update(named or names)
    return hit


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_a_fault_during_a_rollout_is_reported_in_one_line_and_the_next_ticks_converge(
    case: str, kscenario: KubeScenario, proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    row = CASES[case]
    st = story(kscenario, proxy, case.replace("-", "")[:20])
    proxy.set(row.fault)
    result = faulted_tick(st, monkeypatch, minutes=2)
    hit = hit_releases(proxy.hits, st.proxied) if row.hit else set()
    proxy.set(None)
    assert result.code == row.code, result.err
    if row.fault is not None and row.hit is not None:
        assert len(hit) == (row.fault.times or len(st.proxied)), hit
    lines = error_lines(result, st.names)
    for name in st.proxied:
        attempt = kscenario.status(name)["lastAttempted"]
        expected = {row.hit} if name in hit else row.others
        assert attempt["reason"] in expected, (name, attempt)
        if name in hit:
            assert row.says in attempt["message"], attempt
        if attempt["reason"] != "Synced":
            assert lines[name] == f"{name}: {attempt['reason']}: {attempt['message']}"
            assert "objects applied" not in attempt["message"]
            assert not confirmed(kscenario, name, attempt["renderRef"]), name
    assert kscenario.status(st.reference)["lastAttempted"]["reason"] == "Synced"
    assert set(lines) <= set(st.proxied)
    converged(st, minutes=3)


def test_a_tick_of_several_releases_on_a_cluster_that_never_answers_ends_after_one_time_out(
    kscenario: KubeScenario, proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    st = story(kscenario, proxy, "hung", proxied=4)
    proxy.set(Fault("hold"))
    started = time.monotonic()
    result = faulted_tick(st, monkeypatch, minutes=2)
    elapsed = time.monotonic() - started
    held = list(proxy.hits)
    proxy.set(None)
    assert result.code == 1, result.err
    assert set(error_lines(result, st.names)) == set(st.proxied)
    for name in st.proxied:
        attempt = kscenario.status(name)["lastAttempted"]
        assert (attempt["reason"], attempt["applied"]) == ("ClusterUnavailable", False), attempt
        assert f"no answer within {TIMEOUT:g}s" in attempt["message"], attempt
    assert kscenario.status(st.reference)["lastAttempted"]["reason"] == "Synced"
    # Each request was sent once in the tick (discovery above all), then the Cluster was
    # not asked again: the tick waited out one time-out, not one per Release or request.
    assert len(held) == len(set(held)), held
    assert elapsed < TIMEOUT + MARGIN, f"{elapsed:.1f}s"
    converged(st, minutes=3)


def test_a_server_stopped_for_a_tick_then_restarted_is_unavailable_then_converges(
    kscenario: KubeScenario, proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The proxy forwards to a server that is gone (its client sees the connection cut);
    the reference Release sits this tick out (it shares the server) and never fails."""
    st = story(kscenario, proxy, "stopped")
    kscenario.kube.script("stop-apiserver")
    try:
        result = faulted_tick(st, monkeypatch, minutes=2, names=st.proxied)
    finally:
        kscenario.kube.script("start-apiserver")
    assert result.code == 1, result.err
    lines = error_lines(result, st.proxied)
    for name in st.proxied:
        attempt = kscenario.status(name)["lastAttempted"]
        assert (attempt["reason"], attempt["applied"]) == ("ClusterUnavailable", False), attempt
        assert lines[name] == f"{name}: ClusterUnavailable: {attempt['message']}"
    converged(st, minutes=3)
