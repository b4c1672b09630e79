# Setup (do not edit): imports the grader and creates the folder your code is written to.
# The grader is found in the folder named by the environment variable DRILLS_GRADER
# (the course's checkout or its student release), else as an installed package.
import os
import sys

if os.environ.get("DRILLS_GRADER") and sys.path[:1] != [os.environ["DRILLS_GRADER"]]:
    sys.path.insert(0, os.environ["DRILLS_GRADER"])
try:
    import grader.channels.nbgrader.notebook
except ImportError:
    raise ImportError("the grader was not found: set DRILLS_GRADER to the folder holding grader/ "
                      "(the course's checkout or release) before starting Jupyter") from None
os.makedirs("@SUB@", exist_ok=True)
open(os.path.join("@SUB@", "__init__.py"), "w").close()
