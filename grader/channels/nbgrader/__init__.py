"""The nbgrader channel: notebooks generated from the exercises (course.py) and the module their graded cells call (notebook.py)."""
