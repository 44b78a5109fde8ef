"""What is wrong with the server settings: ``Problem`` (one, and where it was given) and
``SettingsError`` (all of them at once, a ``ValidationError``)."""

from __future__ import annotations

from typing import NamedTuple

from sqew import errors


class Problem(NamedTuple):
    """One thing wrong with the settings, and where it was given."""

    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


class SettingsError(errors.ValidationError):
    """The settings have problems (``problems``, in the order of their sources); the message
    holds them all, one per line after the first."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = tuple(problems)
        count = len(problems)
        head = f"{count} problem{'s' if count > 1 else ''} in the server settings:"
        super().__init__("\n".join([head, *(f"  {p}" for p in problems)]),
                         details=[{"field": p.where, "message": p.message} for p in problems])
