"""The semantics of docs/rest.md written once against ``sqew.Client``; run over every target of
``tests/conftest.py``."""
