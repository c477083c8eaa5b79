"""``python -m onnxport`` and the ``onnxport`` script: the same command."""

import os
import signal
import sys


def _interrupted_early(signum, frame):
    # Ctrl-C before main() installs its own handling (while the command's modules load): the
    # same one line and exit code, and nothing has been written yet.
    sys.stderr.write("onnxport: interrupted (nothing was written)\n")
    sys.stderr.flush()
    os._exit(130)


def run() -> int:
    signal.signal(signal.SIGINT, _interrupted_early)
    from onnxport.cli import main

    return main()


if __name__ == "__main__":
    raise SystemExit(run())
