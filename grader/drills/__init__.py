"""Timed drills for interview candidates: `python -m grader drill ...` (command.py), the workspace a drill
starts from (workspace.py) and the history of drills done (history.py)."""
