"""``python -m kfuse.compiler [info|clear|verify]``: inspect, clear, or check and repair the kernel cache."""
import sys

from . import cache, verify
from .root import configured

USAGE = "usage: python -m kfuse.compiler [info|clear|verify]"


def main(args: list) -> int:
    if args == ["clear"]:
        print(f"cleared {cache.clear()}")
        return 0
    if args in ([], ["info"]):
        kernels = list((configured() / "kernels").glob("*/*/meta.json"))
        print(f"cache: {configured()}  kernels: {len(kernels)}")
        return 0
    if args == ["verify"]:
        return verify.main()
    print(USAGE, file=sys.stderr)
    return 2


sys.exit(main(sys.argv[1:]))
