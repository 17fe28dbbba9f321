"""A timeline of millisecond steps (issue 37 §5): its scale starts at the first start, so the bars
fill the width (they were slivers at the right of a run's few milliseconds of setup, labels cut to
"fe…"), and its axis never reads the same time twice ("0.1 ms | 0.1 ms")."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from planbook.data.timeline import Execution
from planbook.views import charts


def short_run() -> list[Execution]:
    """Three serial steps of 0.1 ms each, the first starting 5 ms after the run's first event."""
    return [Execution(i + 1, name, 1, 1, "main", 0.005 + i * 0.0001, 0.005 + (i + 1) * 0.0001, True)
            for i, name in enumerate(["fetch", "count", "report"])]


def test_the_scale_starts_at_the_first_start() -> None:
    page = charts.timeline_html(short_run(), origin=0.0)
    widths = [float(w) for w in re.findall(r'class="pb-bar pb-completed"[^>]*width:([\d.]+)%', page)]
    margins = [float(m) for m in re.findall(r'class="pb-bar pb-completed"[^>]*margin-left:([\d.]+)%', page)]
    assert margins[0] == 0 and all(w > 30 for w in widths), (margins, widths)  # a third of the width each
    assert "from the first start (+5.0 ms)" in page
    # a bar's title keeps the run's time (the pane's)
    assert re.search(r'title="#1 step fetch, attempt 1, revision 1, main: \+5\.0 ms → \+5\.1 ms', page)


def test_the_axis_never_reads_the_same_time_twice() -> None:
    page = charts.timeline_html(short_run(), origin=0.0)
    ticks = re.findall(r'class="pb-tick"[^>]*>([^<]+)</div>', page)
    assert len(ticks) >= 3 and len(set(ticks)) == len(ticks), ticks
    assert ticks[:3] == ["0", "0.05 ms", "0.10 ms"], ticks
    assert charts.tick_label(0.2, 0.2) == "200.0 ms" and charts.tick_label(2.5, 0.5) == "2.50 s"


def test_the_live_view_labels_ticks_as_the_record_does() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("no node to run planview.js's helpers")
    source = (Path(charts.__file__).parent / "static" / "planview.js").read_text(encoding="utf-8")
    cases = [(0.00005, 0.00005), (0.0001, 0.00005), (0.002, 0.001), (0.2, 0.2), (2.5, 0.5), (0.0, 0.1), (12.0, 2.0)]
    script = (source.replace("export default { initialize, render };", "") +
              f"\nconsole.log(JSON.stringify({json.dumps(cases)}.map(([t, s]) => tickLabel(t, s))));")
    out = subprocess.run([node, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [charts.tick_label(t, s) for t, s in cases]
