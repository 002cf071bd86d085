"""Node-test peers, one module each: ``run(case) -> (status, reason)``."""


def timing():
    """bench/peers.py, the benches' shared timing (``timed``: warm-up, then alternating calls,
    medians), loaded by file: this package shadows its module name."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("opbridge_bench_peers", Path(__file__).resolve().parent.parent / "peers.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
