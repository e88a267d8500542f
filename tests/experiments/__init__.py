"""Tests of rsbench's experiments (the layout of tests/ follows the package's)."""
