# nbgrader configuration written by `python -m grader nbgrader` (transformer-drills).
import os

c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "@COURSE@"
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "submission"]
# one grading run of every component happens in the first test cell
c.Execute.timeout = 600
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
# The kernels nbgrader starts here (autograde, validate) inherit these: where the
# grader is (a folder holding grader/, course.yml and tests/; an exported
# DRILLS_GRADER wins), and that hidden checks count.
os.environ.setdefault("DRILLS_GRADER", "@ROOT@")
os.environ["DRILLS_HIDDEN_CHECKS"] = "1"
