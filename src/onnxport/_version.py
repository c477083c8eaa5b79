"""The version, in a module of its own so that the command line reads it without torch."""

__version__ = "0.1.0"
