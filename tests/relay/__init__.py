"""The webhook relay (docs/consumers.md) through its public API, on every target."""
