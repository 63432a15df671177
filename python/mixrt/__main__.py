"""python -m mixrt info|bench ...: the `mixrt` command line the package
carries (mixrt/mixrt-cli), with the same arguments."""

import os
import sys


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    cli = os.path.join(here, "mixrt-cli")
    if not os.path.exists(cli):
        sys.exit(f"mixrt: the command line is not in this package ({cli})")
    os.execv(cli, [cli] + sys.argv[1:])


if __name__ == "__main__":
    main()
