"""The training tasks of the checks that train a model, one module per component (course content, beside the
checks that use them): tiny_lm.py (the capstone's, which `python -m grader train` runs too, and the loop both
share) and vit_classifier.py (the vision track's).
"""
