"""The project's own tests (kept apart from the graded checks in tests/)."""
