"""Tests of rsbench's importer (the layout of tests/ follows the package's)."""
