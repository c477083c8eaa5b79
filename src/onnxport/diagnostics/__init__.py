"""Diagnostics of one export: the recorder every stage reports to, and the writers of its
SARIF log and markdown report. Depends on no stage."""

from onnxport.diagnostics.recorder import (RULES, Recorder, Result, Rule, current, record,
                                           recording, relative_path)
from onnxport.diagnostics.sarif import sarif_log, write_sarif

__all__ = ["RULES", "Recorder", "Result", "Rule", "current", "record", "recording", "relative_path", "sarif_log",
           "write_sarif"]
