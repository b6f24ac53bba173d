"""``python -m fedprior``: the same command line as ``fedprior``."""

from fedprior.cli import app

app(prog_name="fedprior")
