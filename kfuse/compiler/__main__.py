"""``python -m kfuse.compiler [info|clear]``: inspect or clear the compiled-kernel cache."""
import sys

from .cache import main

sys.exit(main())
