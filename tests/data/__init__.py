"""Tests of rsbench's data (the layout of tests/ follows the package's)."""
