"""The ways a grade reaches people: terminal and result files, Gradescope, GitHub Classroom, nbgrader,
the student release and the instructors' batch grading. Each takes the one result model (grader/results.py).

- commands.py   `check` (the terminal table) and `grade` (a results file)
- watch.py      `check --watch`: a fresh table on every save, from one warm session
- render/       renderers: one Report written as the terminal table, JSON, Gradescope's results.json, JUnit,
                Markdown, the HTML page (render/templates/report.html)
- gradescope.py, classroom.py, release.py   one channel each
- nbgrader/     the nbgrader course (notebooks, autograding)
- batch/        `grade-all`: a whole class
- templates/    the files the channels generate, as real files
"""
