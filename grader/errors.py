"""Errors of the grader itself (light to import: the command line catches them before torch loads)."""


class GraderError(Exception):
    """The grader itself failed (not the submission): a broken check, course or installation."""
