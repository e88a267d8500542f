"""Tests of rsbench's tools (the layout of tests/ follows the package's)."""
