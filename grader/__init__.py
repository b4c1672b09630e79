"""The transformer-drills grader: load a target, run the checks, score by course.yml, report."""
