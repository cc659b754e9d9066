import sys

from gpudoctor.cli import main

if __name__ == "__main__":  # not when multiprocessing's spawn re-imports the parent's main module
    sys.exit(main())
