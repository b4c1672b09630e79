"""`python -m selftests.trivial DIR`: write every trivial submission under DIR/<kind>/."""
from __future__ import annotations

import sys
from pathlib import Path

from selftests.trivial import KINDS, materialize

if __name__ == "__main__":
    for kind in KINDS:
        print(materialize(kind, Path(sys.argv[1]) / kind))
