"""Running the checks: the pytest plugin, planning, sessions, scoring, the result cache, the from-scratch rule.

Imports `sandbox/` and the shared modules at the top of `grader/`, never `channels/` or `drills/`.

- checks.py     the plugin the check files load (tests/conftest.py): options, fixtures, where student code runs
- target.py     the checks' handle on an implementation (`impl.fn("attention.split_heads")`)
- plugin.py     the grader's own pytest plugins and the command line of a grading session
- runner.py     grade one folder: copy, load, share out, run, score
- planning.py   sharing components out between grading processes
- forked.py     a forked helper grading process
- session.py    one pytest session grading submission after submission (grade-all, check --watch)
- scoring.py    points per check and component from course.yml
- cache.py      results keyed by the code that decides them
- scratch.py    the from-scratch rule: forbidden library calls found in the source
"""
