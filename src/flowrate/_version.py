"""The installed package's version, in a module of its own so any layer can read it."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("flowrate")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"
