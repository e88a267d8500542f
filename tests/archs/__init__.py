"""Tests of rsbench's archs (the layout of tests/ follows the package's)."""
