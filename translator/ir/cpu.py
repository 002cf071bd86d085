"""What the CPU running the checks does with 8-bit integer products.

x86 CPUs without VNNI multiply uint8 by int8 with ``vpmaddubsw``, which adds two products into a
saturating int16; the runtimes' integer kernels then either saturate or work around it (oneDNN
documents both in "Nuances of int8 computations",
https://uxlfoundation.github.io/oneDNN/dev_guide_int8_computations.html). Their results on such a
CPU can differ from the exact products a model means, by more than rounding: the checks and the
tests that compare integer kernels say which CPU they ran on.
"""
from __future__ import annotations

import functools
import platform


@functools.lru_cache(maxsize=1)
def flags() -> frozenset[str]:
    """The CPU's feature flags as Linux lists them (empty elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


@functools.lru_cache(maxsize=1)
def exact_int8_products() -> bool:
    """False on an x86 CPU without VNNI (AVX-512 VNNI, AVX-VNNI or AMX), where 8-bit dot products
    go through a saturating int16 sum; True on other CPUs and where the flags can't be read."""
    if platform.machine().lower() not in ("x86_64", "amd64", "i686", "x86"):
        return True
    f = flags()
    if not f:
        return True
    return bool(f & {"avx512_vnni", "avx_vnni", "amx_int8"})


def describe() -> str:
    """One phrase for reports and test reasons."""
    if exact_int8_products():
        return "a CPU with exact 8-bit dot products (VNNI or not x86)"
    return "an x86 CPU without VNNI (8-bit dot products through a saturating int16 sum)"
