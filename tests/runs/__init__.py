"""Tests of rsbench's runs (the layout of tests/ follows the package's)."""
