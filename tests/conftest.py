import os
import sys

import torch

# model_zoo.py lives beside the tests and is shared with the benchmark.
sys.path.insert(0, os.path.dirname(__file__))
# Under pytest-xdist each worker gets one thread, so workers do not fight over the cores.
torch.set_num_threads(1 if "PYTEST_XDIST_WORKER" in os.environ else min(2, os.cpu_count() or 1))
