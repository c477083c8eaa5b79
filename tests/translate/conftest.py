"""Makes the shared op-test helpers (``op_check``) importable from every test under translate/."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
