"""Tests of rsbench's certify (the layout of tests/ follows the package's)."""
