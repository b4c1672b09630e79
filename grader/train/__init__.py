"""`python -m grader train`: a learner trains their own TinyLM and watches it learn (command.py)."""
