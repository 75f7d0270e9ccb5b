"""Notifications (after Flux's notification-controller): Alerts in the GitOps repository
(:mod:`.alerts`) send the events of status commits (:mod:`.event`, :mod:`.commits`) to
providers the operator defines (:mod:`.providers`, :mod:`.payloads`, :mod:`.send`),
through an outbox in the state directory (:mod:`.outbox`) that delivers each event once
(:mod:`.notifier`, the part a tick calls).
"""

from convoy_batch.notify.alerts import ReleaseFacts
from convoy_batch.notify.notifier import Notifier, TickFacts

__all__ = ["Notifier", "ReleaseFacts", "TickFacts"]
