"""Tests of rsbench's models (the layout of tests/ follows the package's)."""
