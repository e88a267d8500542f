"""Tests of rsbench's dual (the layout of tests/ follows the package's)."""
