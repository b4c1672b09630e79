# @ABOUT@
import os
import sys

if os.environ.get("DRILLS_GRADER") and sys.path[:1] != [os.environ["DRILLS_GRADER"]]:
    sys.path.insert(0, os.environ["DRILLS_GRADER"])
try:
    import grader.channels.nbgrader.notebook
except ImportError:
    raise ImportError("@NOT_FOUND@") from None
grader.i18n.set_language("@LANG@")
os.makedirs("@SUB@", exist_ok=True)
open(os.path.join("@SUB@", "__init__.py"), "w").close()
