"""Node-test peers, one module each: ``run(case) -> (status, reason)``."""
