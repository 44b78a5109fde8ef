"""SPEC §1 written once against ``sqew.Client``; run over every target of ``tests/conftest.py``."""
