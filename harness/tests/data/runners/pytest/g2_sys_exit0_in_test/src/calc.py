import sys


def add(a, b):
    return a + b


def sub(a, b):
    sys.exit(0)  # raises SystemExit(0) while test_sub runs
    return a - b


def mul(a, b):
    return a * b
