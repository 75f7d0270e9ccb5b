"""Plain (``render`` unset or ``{type: Plain}``): the files under ``source.path`` as they
are, read from git at the source's revision, through the render pipeline. No export, no
process: its render key is what it was before renderers existed."""

from convoy_batch.deployers.base import Capabilities
from convoy_batch.models import Cluster, Release
from convoy_batch.renderers.base import Reader, decryption_inputs, source_path
from convoy_batch.renderers.charts import ChartResolver
from convoy_batch.renderers.pipeline import Render, render
from convoy_batch.repo.source import SourceResolver


class Plain:
    may_vary = False
    reads_server = False

    def revision(self, release: Release, sources: SourceResolver, charts: ChartResolver) -> str:
        """The last commit that changed ``source.path``."""
        return sources.revision(release)

    def watched_revision(
        self, release: Release, sources: SourceResolver, charts: ChartResolver
    ) -> str:
        return self.revision(release, sources, charts)

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

    def subject(self, release: Release) -> str:
        return source_path(release)


PLAIN = Plain()
