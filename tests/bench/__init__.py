"""Tests of rsbench's bench (the layout of tests/ follows the package's)."""
