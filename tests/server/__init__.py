"""Server tests (REST API over real HTTP, sqew serve subprocesses)."""
