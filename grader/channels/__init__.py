"""The ways a grade reaches people: terminal and result files, Gradescope, GitHub Classroom, nbgrader,
the student release and the instructors' batch grading. Each takes the one result model (grader/results.py).

By kind, lowest first (a kind imports its own and those above it in this list):

- render/       renderers: one Report written as the terminal table, JSON, Gradescope's results.json, JUnit,
                Markdown, the HTML page (render/templates/report.html); they grade and package nothing
- package/      packagers: release.py (the student bundle), gradescope.py (the autograder zip), and
                generated.py with templates/, the files they and nbgrader/course.py generate
- the drivers, which grade and hand the Report to a renderer, at this level:
  commands.py   `check` (the terminal table) and `grade` (a results file)
  watch.py      `check --watch`: a fresh table on every save, from one warm session
  classroom.py  `classroom`: the grading step of the GitHub Classroom workflow that the release ships

A tool's or a verb's own subpackage holds all its kinds together:

- nbgrader/     the nbgrader course: course.py writes it (a packager), notebook.py grades inside it (a driver)
- batch/        `grade-all`: a whole class (a driver, with its job processes and records)
"""
