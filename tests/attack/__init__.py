"""Tests of rsbench's attack (the layout of tests/ follows the package's)."""
