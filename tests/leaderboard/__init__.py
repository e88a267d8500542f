"""Tests of rsbench's leaderboard (the layout of tests/ follows the package's)."""
