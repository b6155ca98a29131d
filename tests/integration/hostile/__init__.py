"""The hostile-input corpus of issue 14: bad flags, odd files, damaged stores, misbehaving user code.

Each case is a row: a set-up that prepares files, the command, the exit code the README promises
and a fragment of the one `error:` line. tests/integration/test_hostile.py runs every row and
checks the promises that hold for all of them (one line, no traceback, nothing recorded lost).
"""
