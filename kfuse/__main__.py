"""``python -m kfuse COMMAND``: the commands of the kfuse package itself (tools have their own ``-m kfuse.X``)."""
import sys

from . import run

COMMANDS = {"run": run.main}

if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
    sys.exit("usage: python -m kfuse run [--fusion] program.py [args...]")
COMMANDS[sys.argv[1]](sys.argv[2:])
