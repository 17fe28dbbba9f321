"""CPU time to mask one large text of each shape that made masking quadratic, at 10 kB and 100 kB.

What every exit calls (:func:`planbook.outbound.mask_text`) on a word of base64, base64url
and hex (a step that returns an image or a key as text), a line of ``a=a=a=…``,
``"x":"x":…``, ``://`` repeated and ``Bearer `` repeated, each behind the word ``token`` so
the shape rule looks at it, and the same with a known secret of the process somewhere in it.
The issue's target: well under 0.5 s of CPU for 100 kB. The ratio 100 kB / 10 kB says how
the cost grows: about 10 when linear, about 100 when quadratic (the old pattern took 4 s
for 18 kB of base64url and 40 s for 40 kB).

Run: python benchmarks/masking.py [--quick]   (``--quick``: 1 kB and 10 kB, figures meaningless)
"""

from __future__ import annotations

import base64
import random
import sys
import time
from collections.abc import Callable

from planbook.outbound import mask_text, remember

TARGET_S = 0.5


def _bytes(n: int) -> bytes:
    return random.Random(n).randbytes(n)


SHAPES: dict[str, Callable[[int], str]] = {
    "base64 word": lambda n: base64.b64encode(_bytes(n))[:n].decode(),
    "base64url word": lambda n: base64.urlsafe_b64encode(_bytes(n))[:n].decode(),
    "hex word": lambda n: _bytes(n // 2 + 1).hex()[:n],
    "a=a=a=...": lambda n: "a=" * (n // 2),
    '"x":"x":...': lambda n: '"x":' * (n // 4),
    ":// repeated": lambda n: "://" * (n // 3),
    "Bearer repeated": lambda n: "Bearer " * (n // 7),
    "base64url word, a known secret inside": lambda n: (
        base64.urlsafe_b64encode(_bytes(n))[: n // 2].decode() + "Zq81-bench-secret"
        + base64.urlsafe_b64encode(_bytes(n + 1))[: n // 2].decode()),
}


def cpu(text: str, repeats: int) -> float:
    """Best CPU seconds of ``repeats`` maskings of ``text``."""
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        mask_text(text)
        best = min(best, time.process_time() - start)
    return best


def main(small: int, large: int, repeats: int) -> None:
    remember(["Zq81-bench-secret"])
    print(f"mask_text CPU, best of {repeats}: {small // 1000} kB and {large // 1000} kB")
    print(f"{'shape':40} {'small':>10} {'large':>10} {'ratio':>7}")
    worst = 0.0
    for name, make in SHAPES.items():
        a, b = cpu("token " + make(small), repeats), cpu("token " + make(large), repeats)
        worst = max(worst, b)
        print(f"{name:40} {a * 1000:8.2f}ms {b * 1000:8.2f}ms {b / max(a, 1e-9):7.1f}")
    verdict = "within" if worst < TARGET_S else "OVER"
    print(f"slowest {large // 1000} kB: {worst:.3f} s CPU ({verdict} the {TARGET_S} s target)")


if __name__ == "__main__":
    quick = "--quick" in sys.argv[1:]
    main(1_000 if quick else 10_000, 10_000 if quick else 100_000, 1 if quick else 5)
