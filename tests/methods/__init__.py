"""Tests of rsbench's methods (the layout of tests/ follows the package's)."""
