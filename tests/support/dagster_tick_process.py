"""One ``convoy_tick`` Dagster run in a process of its own, on the instance of
``$DAGSTER_HOME``, started on a signal so that two of them race
(tests/dagster/test_dagster_postgres.py).

    python -m tests.support.dagster_tick_process REPO STATE NOW SPANS (schedule | wakeup NAME...)

``schedule``: the tick of the due Releases, tagged as the tick schedule's run; ``wakeup``:
the named Releases, tagged as the wake-up sensor's. Once everything is imported it prints
``ready`` and waits for a line on stdin; then it runs the job and prints the run's id and
whether it succeeded. Each Release's reconcile (inside its lock) appends ``pid name start
end`` (monotonic nanoseconds, one clock for every process) to SPANS: a spy on our own
``runner.handle_release``, so the test can see whether two reconciles of one Release ever
overlapped.
"""

import os
import sys
import time
from pathlib import Path
from typing import Any

import dagster as dg

from convoy_batch.assets import ConvoyResource, tick_job, tick_run_config
from convoy_batch.ticks import runner

TAGS = {
    "schedule": {"dagster/schedule_name": "convoy_tick"},
    "wakeup": {"dagster/sensor_name": "convoy_wakeups"},
}


def spy_on_reconciles(spans: Path) -> None:
    handle = runner.handle_release

    def timed(tick: Any, entry: Any) -> Any:
        start = time.monotonic_ns()
        try:
            return handle(tick, entry)
        finally:
            line = f"{os.getpid()} {entry.name} {start} {time.monotonic_ns()}\n"
            with spans.open("a") as out:  # O_APPEND: one short write, whole
                out.write(line)

    runner.handle_release = timed


def main(argv: list[str]) -> int:
    repo, state, now, spans, kind, *names = argv
    spy_on_reconciles(Path(spans))
    resource = ConvoyResource(repo=repo, state=state, now=now)
    config = tick_run_config(names)
    with dg.DagsterInstance.get() as instance:
        print("ready", flush=True)
        sys.stdin.readline()
        result = tick_job.execute_in_process(
            run_config=config,
            instance=instance,
            resources={"convoy": resource},
            tags=TAGS[kind],
            raise_on_error=False,
        )
    print(result.run_id, result.success, flush=True)
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
