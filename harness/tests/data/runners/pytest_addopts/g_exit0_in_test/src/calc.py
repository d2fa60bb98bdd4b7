import os


def add(a, b):
    return a + b


def sub(a, b):
    os._exit(0)  # ends the process while test_sub runs
    return a - b


def mul(a, b):
    return a * b
