"""sqew's benchmarks: ``scripts/bench [suite ...]`` (figures go to docs/benchmarks.md)."""
