"""``python -m crs``: the same command line as the ``crs`` console script."""

from crs.cli.main import main

if __name__ == "__main__":
    main()
