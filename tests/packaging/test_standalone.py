"""The repository stands on its own: what a clone holds is enough to follow it.

- No tracked file cites a document the repository does not hold (the contract is what
  ``docs/`` says, so code, tests and docs point there).
- Every relative link of the README and ``docs/`` reaches a file of the repository, and a
  ``#fragment`` one of its headings.
- ``docs/benchmarks.md`` stays a user document (what to expect and how to reproduce it), short
  enough to read, not a run log.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SELF = Path(__file__).resolve().relative_to(ROOT).as_posix()

CITATION = re.compile(r"\bSPEC\b|\bDESIGN\b|\.\./shared/|/work/shared")
"""A citation of a contract or design document kept outside the repository."""

BACKEND_FILES_STILL_CITING: frozenset[str] = frozenset()
"""Files under ``sqew/backends/`` allowed to cite outside documents while that package is being
rewritten; whoever rewrites one takes it off this list (the test fails on an entry that no
longer cites anything), and the list ends empty."""

BENCHMARKS_MAX_LINES = 150

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
"""A Markdown inline link's target (images left out)."""

EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)
"""A target with a scheme (``https:``, ``mailto:``): not a file of the repository."""


def tracked() -> list[str]:
    """The files git tracks in this checkout, as paths relative to the root."""
    done = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                          timeout=60, check=True)
    return [p for p in done.stdout.decode().split("\0") if p and (ROOT / p).is_file()]


def text_of(path: str) -> str | None:
    """The file's text, or None for a binary file."""
    try:
        return (ROOT / path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None


def citing() -> dict[str, list[str]]:
    """Each tracked file that cites an outside document, with its citing lines."""
    found: dict[str, list[str]] = {}
    for path in tracked():
        text = text_of(path) if path != SELF else None
        if text is None:
            continue
        lines = [f"{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1)
                 if CITATION.search(line)]
        if lines:
            found[path] = lines
    return found


def test_no_tracked_file_cites_a_document_outside_the_repository() -> None:
    found = citing()
    unexpected = {p: lines for p, lines in found.items() if p not in BACKEND_FILES_STILL_CITING}
    assert not unexpected, ("cite docs/… instead (docs/rest.md, docs/cli.md, "
                            f"docs/architecture.md):\n{_listing(unexpected)}")


def test_the_allow_list_names_only_files_that_still_cite() -> None:
    found = citing()
    stale = sorted(BACKEND_FILES_STILL_CITING - found.keys())
    assert not stale, f"take these off BACKEND_FILES_STILL_CITING: {stale}"
    assert all(p.startswith("sqew/backends/") for p in BACKEND_FILES_STILL_CITING)


def test_benchmarks_md_is_a_short_user_document() -> None:
    lines = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= BENCHMARKS_MAX_LINES, (
        f"docs/benchmarks.md has {len(lines)} lines; keep it ≤ {BENCHMARKS_MAX_LINES}: what to "
        "expect and the command that reproduces each figure (run logs go in commit messages)")


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading's text."""
    text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file's headings (fenced code left out)."""
    found: set[str] = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (heading := re.match(r"#{1,6} (.+)", line)):
            found.add(slug(heading.group(1)))
    return found


def markdown_documents() -> list[str]:
    """The README and every tracked Markdown file of docs/."""
    return [p for p in tracked() if p == "README.md" or (p.startswith("docs/") and
                                                         p.endswith(".md"))]


def broken_links(path: str) -> list[str]:
    """The relative links of ``path`` that reach no file, or no heading of it."""
    here = ROOT / path
    broken = []
    fenced = False
    for n, line in enumerate(here.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
            continue
        for target in ([] if fenced else LINK.findall(line)):
            if EXTERNAL.match(target):
                continue
            file_part, _, fragment = target.partition("#")
            reached = (here.parent / file_part).resolve() if file_part else here
            if not reached.is_file() or ROOT not in reached.parents:
                broken.append(f"{path}:{n}: {target} (no such file in the repository)")
            elif fragment and reached.suffix == ".md" and fragment not in anchors(reached):
                broken.append(f"{path}:{n}: {target} (no such heading)")
    return broken


def test_relative_links_of_the_docs_reach_a_file_and_heading() -> None:
    documents = markdown_documents()
    assert "README.md" in documents and "docs/rest.md" in documents
    broken = [b for p in documents for b in broken_links(p)]
    assert not broken, "\n".join(broken)


def test_slug_follows_github() -> None:
    assert slug("Bulk enqueue: `--file`") == "bulk-enqueue---file"
    assert slug("Signed enqueues (HMAC)") == "signed-enqueues-hmac"
    assert slug("Roadmap (not yet available)") == "roadmap-not-yet-available"
    assert slug("`enqueue_many` in Python") == "enqueue_many-in-python"


def _listing(found: dict[str, list[str]]) -> str:
    return "\n".join(f"{p}:{line}" for p, lines in sorted(found.items()) for line in lines)
