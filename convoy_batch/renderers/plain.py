"""Plain (``render`` unset or ``{type: Plain}``): the files under ``source.path`` as they
are, read from git at the source's revision, through the render pipeline. No export, no
process: its render key is what it was before renderers existed."""

from convoy_batch.deployers.base import Capabilities
from convoy_batch.models import Cluster, Release
from convoy_batch.renderers.base import FromPath, Reader, decryption_inputs
from convoy_batch.renderers.pipeline import Render, render


class Plain(FromPath):
    def inputs(
        self, release: Release, reader: Reader, capabilities: Capabilities | None
    ) -> list[str]:
        """The listing's fingerprint and the operator's keys (no server is read)."""
        keys = decryption_inputs(release, reader.state_dir)
        return [reader.sources.listing(release).fingerprint, *keys]

    def render(
        self, release: Release, cluster: Cluster, reader: Reader, capabilities: Capabilities | None
    ) -> Render:
        return render(reader.sources.fetch(release), release, cluster)


PLAIN = Plain()
