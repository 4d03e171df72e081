"""The one exception type for expected, user-facing errors."""


class InputError(Exception):
    """Bad input from the user: a data file, an option or a run directory.

    The message is one line naming what is wrong and where (file, row, column; option and its
    allowed range). The command-line entry points print it without a traceback and exit with 2.
    """
