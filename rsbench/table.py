"""``python -m rsbench.table`` is kept for old scripts: it runs ``python -m rsbench.report`` (same arguments)."""

from rsbench.report.__main__ import main

__all__ = ["main"]

if __name__ == "__main__":
    main()
