"""``make screenshot``: the README's picture of the Releases at a glance, taken again.

1. Starts the example (``run_example.py``, as ``make run`` does) in a temporary state
   directory on a free port, so a ``make run`` in ``.convoy/example`` is left alone.
2. Waits, through the webserver's GraphQL API, until the ``state`` check of ``release``
   reads api failed (rolled back) and web passed: about two minutes.
3. Opens **Assets > release > Checks > state > Partitions** in headless Chromium, selects
   api, and saves the page as a PNG (default ``docs/release-view.png``), made smaller by
   ``optipng`` when it is installed; then the asset's own **Partitions** tab, api red
   (failed), beside it (``docs/partitions-view.png``), and the Catalog
   (``docs/catalog-view.png``).
4. Stops the example; its state directory is removed.

Needs Chromium (Debian: ``apt-get install chromium``); installs nothing. The page is an
application that renders after it loads, and the check's Partitions tab and a partition
are chosen by clicks, so Chromium is driven through its DevTools protocol on a pipe
(``--remote-debugging-pipe``: JSON messages ending in a NUL byte, on its file descriptors
3 and 4), with no library. Does I/O: processes, files, HTTP.
"""

import argparse
import base64
import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

PROJECT = Path(__file__).resolve().parent.parent
RUN_EXAMPLE = PROJECT / "scripts" / "run_example.py"
DEFAULT_OUTPUT = PROJECT / "docs" / "release-view.png"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
ROLLBACK_TIMEOUT = 600.0
PAGE_TIMEOUT = 60.0
WINDOW = "1400x960"
RELEASE = "api"
"""The Release the picture selects: the one that rolls back."""
T = TypeVar("T")

CHECK_PARTITIONS = """
{ assetNodeOrError(assetKey: {path: ["release"]}) { ... on AssetNode {
  assetCheckOrError(checkName: "state") { ... on AssetCheck { partitionStatuses {
    ... on AssetCheckDefaultPartitionStatuses { succeededPartitions failedPartitions } } } } } } }
"""
"""The README's query: the Releases that the check's partition list shows green and red."""
CHECK_PAGE = "/assets/release?view=checks&checkDetail=state"
PARTITIONS_PAGE = "/assets/release?view=partitions"
PARTITIONS_PICTURE = "partitions-view.png"
"""The asset's Partitions tab, written beside the check's picture."""
CATALOG_PAGE = "/assets"
CATALOG_PICTURE = "catalog-view.png"
"""The Catalog, written beside the check's picture."""

BROWSER_SETTINGS = """try {
  localStorage.setItem("communityNux", '"1"');
  localStorage.setItem("dagster-nav-collapsed", "true");
} catch (e) {}"""
"""Before the UI loads: its community dialog (opened once per browser) seen, and its
navigation collapsed to icons, which leaves the width to the check."""
CLICK = """((text, selector) => {
  const found = [...document.querySelectorAll(selector)]
    .filter((e) => e.textContent.trim() === text || e.dataset.tooltip === text).pop();
  if (found) found.click();
  return !!found;
})(%s, %s)"""
"""Clicks the last element matching ``selector`` whose text (or tooltip) is ``text`` (the
check's tabs come after the asset's, which has a Partitions tab too)."""
SHOWS = "document.body.innerText.includes(%s)"


def wait_for(what: str, probe: Callable[[], T | None], timeout: float) -> T:
    """Poll ``probe`` every second until it returns a value, at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(1)
    raise SystemExit(f"screenshot: no {what} within {timeout:.0f}s")


# --- the example ----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def graphql(base: str, query: str) -> dict[str, Any] | None:
    body = json.dumps({"query": query}).encode()
    request = urllib.request.Request(f"{base}/graphql", body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            answer: dict[str, Any] = json.load(response)
            return answer
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
        return None


def rolled_back(base: str) -> bool:
    """The check's partitions read api failed and web passed, as the picture shows them."""
    answer = graphql(base, CHECK_PARTITIONS) or {}
    node = (answer.get("data") or {}).get("assetNodeOrError") or {}
    statuses = (node.get("assetCheckOrError") or {}).get("partitionStatuses") or {}
    failed = statuses.get("failedPartitions") or []
    passed = statuses.get("succeededPartitions") or []
    return RELEASE in failed and "web" in passed


@contextlib.contextmanager
def example(state: Path, port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``run_example.py`` in its own process group, stopped as Ctrl-C stops it; the end of
    its output is printed when something failed."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, str(RUN_EXAMPLE), str(state), "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield process
    except BaseException:
        print(log.read_text(errors="replace")[-3000:], file=sys.stderr)
        raise
    finally:
        stop_group(process)


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGINT to the group (dg dev stops its children), then SIGKILL what is left
    (a code server can outlive dg dev until its heartbeat times out)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGINT)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=30)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def wait_for_rollback(process: subprocess.Popen[bytes], base: str) -> None:
    def probe() -> bool:
        if process.poll() is not None:
            raise SystemExit(f"screenshot: the example ended ({process.returncode})")
        return rolled_back(base)

    wait_for("rollback of api in the UI", probe, ROLLBACK_TIMEOUT)


# --- Chromium through the DevTools protocol -------------------------------------------------


class Browser:
    """Headless Chromium with one page, driven through the DevTools protocol on a pipe."""

    def __init__(self, chromium: str, profile: Path, size: tuple[int, int]) -> None:
        ours_in, theirs_out = os.pipe()  # Chromium writes to its fd 4
        theirs_in, ours_out = os.pipe()  # Chromium reads from its fd 3
        flags = [
            "--headless",
            "--remote-debugging-pipe",
            f"--user-data-dir={profile}",
            f"--window-size={size[0]},{size[1]}",
            "--hide-scrollbars",
            "--no-first-run",
            "--disable-gpu",
        ]
        if os.geteuid() == 0:
            flags.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox

        def pipe_ends() -> None:  # in the child; 3 and 4 may hold one of the ends: move first
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (theirs_in, theirs_out)]
            for number, fd in zip((3, 4), high, strict=True):
                os.dup2(fd, number)

        self.process = subprocess.Popen(
            [chromium, *flags, "about:blank"],
            preexec_fn=pipe_ends,
            pass_fds=(3, 4),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(theirs_in)
        os.close(theirs_out)
        self.reader = os.fdopen(ours_in, "rb")
        self.writer = os.fdopen(ours_out, "wb")
        self.last_id = 0
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        width, height = size
        self.page("Page.enable")  # without it, scripts for new documents are not run
        self.page(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self.last_id += 1
        message: dict[str, Any] = {"id": self.last_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        self.writer.write(json.dumps(message).encode() + b"\0")
        self.writer.flush()
        while True:  # events come in between: skipped
            answer = json.loads(self.read_message())
            if answer.get("id") == self.last_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                result: dict[str, Any] = answer.get("result", {})
                return result

    def read_message(self) -> bytes:
        chunks = []
        while (byte := self.reader.read(1)) != b"\0":
            if not byte:
                raise RuntimeError("chromium closed its DevTools pipe")
            chunks.append(byte)
        return b"".join(chunks)

    def page(self, method: str, **params: Any) -> dict[str, Any]:
        return self.call(method, self.session, **params)

    def evaluate(self, expression: str) -> Any:
        return self.page("Runtime.evaluate", expression=expression)["result"].get("value")

    def until(self, what: str, expression: str) -> None:
        wait_for(what, lambda: self.evaluate(expression), PAGE_TIMEOUT)

    def click(self, text: str, selector: str) -> None:
        self.until(f"{text!r} to click", CLICK % (json.dumps(text), json.dumps(selector)))

    def close(self) -> None:
        with contextlib.suppress(OSError, RuntimeError):
            self.call("Browser.close")
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def capture(chromium: str, url: str, profile: Path, size: tuple[int, int]) -> bytes:
    """The check's Partitions tab with api selected, once its result is shown."""
    browser = Browser(chromium, profile, size)
    try:
        browser.page("Page.addScriptToEvaluateOnNewDocument", source=BROWSER_SETTINGS)
        browser.page("Page.navigate", url=url)
        browser.until("check view", SHOWS % json.dumps("Execution history"))
        browser.click("Partitions", '[role="tab"]')
        browser.click(RELEASE, "[data-tooltip]")
        browser.until("rolled-back result of api", SHOWS % json.dumps("RolledBack (Unhealthy)"))
        time.sleep(2)  # the last icons and fonts
        shot = browser.page("Page.captureScreenshot", format="png")
        return base64.b64decode(shot["data"])
    finally:
        browser.close()


def capture_view(
    chromium: str, url: str, profile: Path, size: tuple[int, int], shows: str, select: bool
) -> bytes:
    """A page, once it shows ``shows``: the asset's Partitions tab, api selected
    (``select``), its partitions coloured by their status, or the Catalog (what api's
    partition shows is not waited for: a pause)."""
    browser = Browser(chromium, profile, size)
    try:
        browser.page("Page.addScriptToEvaluateOnNewDocument", source=BROWSER_SETTINGS)
        browser.page("Page.navigate", url=url)
        browser.until(url, SHOWS % json.dumps(shows))
        if select:
            browser.click(RELEASE, "[data-tooltip]")
        time.sleep(4)  # api's partition, the last icons and fonts
        shot = browser.page("Page.captureScreenshot", format="png")
        return base64.b64decode(shot["data"])
    finally:
        browser.close()


# --- main -----------------------------------------------------------------------------------


def find_chromium() -> str:
    for name in BROWSERS:
        if found := shutil.which(name):
            return found
    raise SystemExit("screenshot: Chromium is not installed; on Debian: apt-get install chromium")


def optimise(png: Path) -> None:
    if shutil.which("optipng"):
        subprocess.run(["optipng", "-quiet", "-o2", str(png)], check=False)


def window_size(text: str) -> tuple[int, int]:
    width, _, height = text.partition("x")
    return int(width), int(height)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "output",
        nargs="?",
        default=DEFAULT_OUTPUT,
        type=Path,
        help="the PNG to write (default docs/release-view.png)",
    )
    parser.add_argument(
        "--size",
        default=WINDOW,
        type=window_size,
        help="the window, WIDTHxHEIGHT in pixels (default %(default)s)",
    )
    args = parser.parse_args(argv)
    chromium = find_chromium()
    output = args.output.resolve()
    with tempfile.TemporaryDirectory(prefix="convoy-screenshot-") as temp:
        work, port = Path(temp), free_port()
        print(f"screenshot: the example on http://127.0.0.1:{port}", flush=True)
        with example(work / "example", port, work / "example.log") as process:
            base = f"http://127.0.0.1:{port}"
            print("screenshot: waiting for api to roll back (about two minutes)", flush=True)
            wait_for_rollback(process, base)
            png = capture(chromium, base + CHECK_PAGE, work / "chromium", args.size)
            partitions = capture_view(
                chromium, base + PARTITIONS_PAGE, work / "chromium-partitions", args.size,
                "Failed", select=True,
            )  # fmt: skip
            catalog = capture_view(
                chromium, base + CATALOG_PAGE, work / "chromium-catalog", args.size,
                "release", select=False,
            )  # fmt: skip
    pictures = {PARTITIONS_PICTURE: partitions, CATALOG_PICTURE: catalog}
    for path, data in ((output, png), *((output.with_name(n), d) for n, d in pictures.items())):
        path.write_bytes(data)
        optimise(path)
        print(f"screenshot: wrote {path} ({path.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
