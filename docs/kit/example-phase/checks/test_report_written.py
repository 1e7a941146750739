import pytest

import pytest_distcheck
from pytest_distcheck.committed import require_committed


@pytest.mark.local
@pytest.mark.dod("report-written")
def test_report_written(distcheck_workspace):
    path = distcheck_workspace.resolve("docs/report.md")
    if not path.exists():
        pytest_distcheck.pending("no report at docs/report.md")
    require_committed([path], distcheck_workspace.root)
    assert "bandwidth" in path.read_text(), "docs/report.md does not mention the bandwidth it measured"
