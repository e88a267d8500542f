"""Tests of rsbench's report (the layout of tests/ follows the package's)."""
