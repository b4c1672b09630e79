"""Renderers: one Report (grader/results.py) written as text for people and tools, nothing graded or packaged here.

- formats.py    the terminal table, JSON, Gradescope's results.json, JUnit, Markdown and the HTML page
- templates/    report.html, the HTML page (Jinja2)

The lowest kind of channel module: it imports no other part of `channels/`.
"""
