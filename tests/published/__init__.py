"""Tests of rsbench's published (the layout of tests/ follows the package's)."""
