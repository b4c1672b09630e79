"""Packagers: what an instructor hands to a class or a platform, built from this checkout; they grade nothing.

- release.py     `release`: the student bundle (stubs, public checks, the grader, README, Classroom workflow)
- gradescope.py  `gradescope`: the autograder zip (and run_autograder's helpers, run inside it)
- generated.py   the generated files' templates, filled in (`@NAME@` placeholders)
- templates/     those files as real files: the bundle's Makefile, README and .gitignore, Gradescope's
                 setup.sh and run_autograder, the nbgrader course's config and setup cell (nbgrader/course.py)

Of the rest of `channels/` they import nothing.
"""
