"""What the live view sends to the front end for a 1,000-step run, measured in a real kernel.

A kernel is started (ipykernel, as a notebook front end would), a 1,000-step plan is run
with ``%run_plan`` and the anywidget live view, and every iopub message of that cell is
counted: widget model opens, widget updates (and their bytes: JSON plus binary buffers),
displays and display updates. Each step takes ``--pace`` seconds (default 2 ms), so the run
lasts a few seconds and the throttle (at most ~10 updates a second) shows in the numbers.

Targets (issue "The live view, rebuilt"): at most ~10 updates/s; under 1.5 MB in all.
Before the rebuild: 1.19 MB with 33 comm opens and 86 updates.

Run: python benchmarks/view_traffic.py [--steps 1000] [--pace 0.002] [--quick]

``--quick``: tiny sizes, one repeat (what the tests run to check the script still works;
its figures mean nothing).
"""

from __future__ import annotations

import argparse
import os
import time

from kernel_view import execute, size  # one way to drive a kernel and count what it sends

SETUP = """\
%load_ext planbook
import time, planbook
@planbook.tool
def inc(x: int) -> int:
    "Add one (after a short pause)."
    time.sleep({pace})
    return x + 1
many = planbook.Plan(id="many", steps=[planbook.Step(id=str(i), tool="inc", args={{"x": i}}) for i in range(1, {n} + 1)])
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--pace", type=float, default=0.002)
    parser.add_argument("--quick", action="store_true", help="50 steps of 1 ms: checks the script works")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.pace = 50, 0.001
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3", env={**os.environ, "PYDEVD_DISABLE_FILE_VALIDATION": "1"})
    try:
        reply, _ = execute(kc, SETUP.format(pace=args.pace, n=args.steps))
        assert reply["status"] == "ok", reply
        started = time.monotonic()
        reply, messages = execute(kc, f"r = %run_plan many --max-steps {args.steps}\nr.status")
        wall = time.monotonic() - started
        assert reply["status"] == "ok", reply
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    opens = [m for m in messages if m["msg_type"] == "comm_open"]
    updates = [m for m in messages if m["msg_type"] == "comm_msg"]
    displays = [m for m in messages if m["msg_type"] in ("display_data", "update_display_data")]
    widget_bytes = sum(size(m) for m in opens + updates)
    total = sum(size(m) for m in messages)
    print(f"{args.steps} steps, {args.pace * 1000:.1f} ms each: the cell took {wall:.2f} s")
    print(f"  widget models opened: {len(opens)} ({sum(size(m) for m in opens) / 1e3:.1f} kB, the ES module included)")
    print(f"  widget updates: {len(updates)} ({sum(size(m) for m in updates) / 1e3:.1f} kB), "
          f"{len(updates) / wall:.1f} updates/s (target <= ~10)")
    print(f"  displays and display updates: {len(displays)} ({sum(size(m) for m in displays) / 1e3:.1f} kB)")
    print(f"  widget traffic: {widget_bytes / 1e6:.3f} MB; everything the cell sent: {total / 1e6:.3f} MB "
          f"(target < 1.5 MB; before the rebuild 1.19 MB)")
    print(f"  ratio to the target: {total / 1.5e6:.2f} of 1.5 MB, {len(updates) / wall / 10:.2f} of 10 updates/s")


if __name__ == "__main__":
    main()
