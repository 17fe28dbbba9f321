"""What the live view costs the user's kernel: a real kernel, as a notebook front end drives it.

A kernel is started through ``jupyter_client`` (ipykernel, as JupyterLab starts it) and runs a
1,000-step plan of no-op tools with ``%run_plan`` — its output displayed, so the view builds
its first display, sends widget updates and, when the run ends, replaces the display with
the run's static record — interleaved with the same run with ``--no-view``; best of N each.
Printed, measured in this run:

- the CPU ratio, view over no view: the kernel process's CPU time (``time.process_time()``,
  every thread of the kernel: its IOPub thread too), read in the kernel around the run, in
  the cell that runs it;
- the bytes the kernel sent on IOPub for one view run, by message type (JSON content and
  binary buffers: what the front end receives, and what a saved notebook keeps of the
  displays);
- the kernel's memory (resident set) before and after 20 more view runs, the Step objects
  still alive and the time of a full garbage collection then (a finished view should keep
  nothing beyond the result the user holds).

Targets (issue 26): CPU ≤ 1.3×; ≤ 300 kB for 1,000 steps; no growth after 20 view runs.
Runs keep no store (``%plan_store off``), so the ratio is the view's own cost.
``benchmarks/engine_overhead.py`` (section 4) measures the view headless: a ``PlanView``
with no display, no first display's HTML and no final record.

Run: python benchmarks/kernel_view.py [--steps 1000] [--repeats 5] [--runs 20] [--quick]

``--quick``: tiny sizes, one repeat (what the tests run to check the script still works;
its figures mean nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import tempfile
import time
from collections import defaultdict
from typing import Any

SETUP = """\
%load_ext planbook
%plan_store off
import gc, os, time, planbook

@planbook.tool
def noop(x: int) -> int:
    "Return x."
    return x

many = planbook.Plan(id="many", steps=[planbook.Step(id=str(i), tool="noop", args={{"x": i}})
                                       for i in range(1, {n} + 1)])


def rss_mib():
    "The kernel's resident memory now (Linux), else its peak (resource)."
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        import resource, sys
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def alive():
    "Step objects alive after a full collection, and that collection's time."
    from planbook.data.models import Step
    gc.collect()
    start = time.perf_counter()
    gc.collect()
    took = time.perf_counter() - start
    # type(), not isinstance(): a lazy module's proxy imports on a look at its __class__
    return sum(issubclass(type(o), Step) for o in gc.get_objects()), took
"""

#: one run, timed in the kernel, in the same cell (the cell's value is a short line, as a user's)
RUN = "_t0 = time.process_time()\nr = %run_plan many --max-steps {n} {flags}\n_cpu = time.process_time() - _t0"


def execute(kc: Any, code: str, timeout: float = 600) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run ``code`` on the kernel client ``kc``: its reply's content and its iopub messages, both
    matched to the request by ``parent_header.msg_id``."""
    msg_id = kc.execute(code)
    deadline = time.monotonic() + timeout
    messages: list[dict[str, Any]] = []
    while True:
        msg = kc.get_iopub_msg(timeout=max(deadline - time.monotonic(), 0.01))
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    while True:  # replies of earlier requests (kernel_info) may come first
        try:
            reply = kc.get_shell_msg(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty:
            raise AssertionError(f"no reply to {code[:60]!r}") from None
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply["content"], messages


class Kernel:
    """A kernel driven over ZMQ; replies matched by ``parent_header.msg_id``."""

    def __init__(self, cwd: str) -> None:
        from jupyter_client.manager import start_new_kernel

        env = {**os.environ, "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
        self.km, self.kc = start_new_kernel(kernel_name="python3", env=env, cwd=cwd, startup_timeout=120)

    def execute(self, code: str, timeout: float = 600) -> list[dict[str, Any]]:
        """Run ``code``; its iopub messages (fails on an error reply)."""
        reply, messages = execute(self.kc, code, timeout)
        if reply["status"] != "ok":
            raise AssertionError(f"{code[:60]!r}: {reply.get('ename')}: {reply.get('evalue')}")
        return messages

    def value(self, expression: str) -> Any:
        """``expression`` evaluated in the kernel (printed as JSON, read back)."""
        messages = self.execute(f"import json as _json; print(_json.dumps({expression}))")
        text = "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream")
        return json.loads(text)

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


def size(msg: dict[str, Any]) -> int:
    return len(json.dumps(msg["content"], default=str)) + sum(len(b) for b in msg.get("buffers") or [])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--runs", type=int, default=20, help="view runs before the memory is read")
    parser.add_argument("--quick", action="store_true", help="50 steps, one repeat, 2 runs: checks the script works")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.repeats, args.runs = 50, 1, 2
    n = args.steps
    with tempfile.TemporaryDirectory() as cwd:
        kernel = Kernel(cwd)
        try:
            kernel.execute(SETUP.format(n=n))
            kernel.execute(RUN.format(n=n, flags=""))  # warm up: imports, the ES module, first calls
            kernel.execute(RUN.format(n=n, flags="--no-view"))
            view_cpu, plain_cpu, shown = [], [], None
            for _ in range(args.repeats):  # interleaved, so machine noise hits both alike
                messages = kernel.execute(RUN.format(n=n, flags=""))
                view_cpu.append(kernel.value("_cpu"))
                shown = shown or messages
                kernel.execute(RUN.format(n=n, flags="--no-view"))
                plain_cpu.append(kernel.value("_cpu"))
            assert kernel.value("r.status") == "completed"
            assert shown is not None and any(m["msg_type"] == "display_data" for m in shown), "no display"
            rss_before = kernel.value("rss_mib()")
            steps_before, gc_before = kernel.value("alive()")
            for _ in range(args.runs):
                kernel.execute(RUN.format(n=n, flags=""))
            rss_after = kernel.value("rss_mib()")
            steps_after, gc_after = kernel.value("alive()")
        finally:
            kernel.close()

    best_view, best_plain = min(view_cpu), min(plain_cpu)
    print(f"{n} no-op steps, %run_plan in a real kernel, best of {args.repeats} (interleaved):")
    print(f"  CPU in the kernel: --no-view {best_plain * 1e3:.1f} ms, live view (displayed, record included) "
          f"{best_view * 1e3:.1f} ms -> ratio {best_view / best_plain:.2f} (target <= 1.3)")
    by_type: dict[str, list[int]] = defaultdict(list)
    for msg in shown:
        by_type[msg["msg_type"]].append(size(msg))
    total = sum(sum(v) for v in by_type.values())
    print(f"  IOPub bytes of a view run: {total / 1e3:.1f} kB in {len(shown)} messages "
          f"(target <= 300 kB for 1,000 steps), by type:")
    for kind, sizes in sorted(by_type.items(), key=lambda kv: -sum(kv[1])):
        print(f"    {kind:<22} {len(sizes):>5} messages {sum(sizes) / 1e3:>10.1f} kB")
    print(f"  kernel memory after {args.runs} view runs: {rss_before:.1f} -> {rss_after:.1f} MiB "
          f"({rss_after - rss_before:+.1f} MiB); live Step objects {steps_before} -> {steps_after}; "
          f"a full collection {gc_before * 1e3:.1f} -> {gc_after * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
