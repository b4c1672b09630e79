"""`python -m grader show COMPONENT`: pictures of the learner's code beside the expected ones.

data.py makes each figure's arrays (grader/figures.py names the figures),
draw.py draws them (matplotlib, imported only here and by the HTML page),
pictures.py runs the learner's code for them in confined workers.
"""
