"""``python -m strassenbench`` and the ``strassenbench`` command (pyproject's entry point): the CLI. A Ctrl-C while
its modules are still being imported is one line and exit status 130 too, as it is once a command runs."""

import sys


def run() -> int:
    try:
        from .cli import main
    except KeyboardInterrupt:
        print("strassenbench: interrupted", file=sys.stderr)
        return 130
    return main()


if __name__ == "__main__":
    sys.exit(run())
