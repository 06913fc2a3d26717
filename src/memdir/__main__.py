"""``python -m memdir``: the same as the ``memdir`` command."""

from memdir.cli import main

if __name__ == "__main__":
    main()
