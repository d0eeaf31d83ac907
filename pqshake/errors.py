"""The one exception type users see: a one-line message, never a traceback."""


class UserError(Exception):
    """Bad input or an unusable machine. str() is the whole message, one line, with the fix.

    exit_code follows the C tools: 2 for bad input, 1 for the environment.
    """

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code
