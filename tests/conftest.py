import os
import sys

import torch

# model_zoo.py lives beside the tests and is shared with the benchmark.
sys.path.insert(0, os.path.dirname(__file__))
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
