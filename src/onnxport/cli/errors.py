"""The command's own errors, by exit code."""


class UsageError(Exception):
    """Bad command line, SPEC or option value: exit code 2."""


class ModelBuildError(Exception):
    """The model could not be built (the user's code or a model library raised): exit code 1."""
