"""The rollout decisions of SPEC 5-7 and 10: pure functions of values.

- the transition table (:mod:`.plan`), the verdict on a render and the per-wave health
  check (:mod:`.verdict`), the wave gate (:mod:`.waves`);
- the status assembly and its commit message (:mod:`.status`), a Release at a glance
  (:mod:`.glance`), the decided change of a cluster (:mod:`.step`);
- what is due (:mod:`.due`), order between Releases (:mod:`.depends`), sync windows
  (:mod:`.windows`), a ReleaseSet's members (:mod:`.releaseset`), what becomes of a
  removed Release (:mod:`.retire`), what measurements conclude (:mod:`.analysis`).

Nothing here does I/O or reads the clock; nothing here imports dagster, git, ruamel,
yaml or kubernetes (a test checks this).
"""

from convoy_batch.rollout.plan import (
    Action,
    Plan,
    pinned_plan,
    plan_rollout,
    render_verdict,
    rollback_eligible,
)
from convoy_batch.rollout.status import (
    Outcome,
    RenderId,
    RollBack,
    assemble_status,
    commit_message,
)
from convoy_batch.rollout.verdict import Verdict, VerdictResult, deadline_start, verdict
from convoy_batch.rollout.waves import (
    GateDecision,
    GateKind,
    WavePlan,
    plan_waves,
    wave_health_gate,
)

__all__ = [
    "Action",
    "GateDecision",
    "GateKind",
    "Outcome",
    "Plan",
    "RenderId",
    "RollBack",
    "Verdict",
    "VerdictResult",
    "WavePlan",
    "assemble_status",
    "commit_message",
    "deadline_start",
    "pinned_plan",
    "plan_rollout",
    "plan_waves",
    "render_verdict",
    "rollback_eligible",
    "verdict",
    "wave_health_gate",
]
