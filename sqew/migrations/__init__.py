"""Alembic migration scripts, shipped inside the package so ``sqew db upgrade`` works anywhere."""
