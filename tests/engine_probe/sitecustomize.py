"""Put on PYTHONPATH by tests/conftest.py: the engine probe in each Python
subprocess a test starts (see helios_engine_probe)."""

try:
    import helios_engine_probe

    helios_engine_probe.install_from_env()
except Exception:  # never break a subprocess for the sake of a check
    pass
