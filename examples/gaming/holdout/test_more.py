# Tests the delegate never sees: `files: ../holdout` in holdout.yaml.
from calc import add, mul


def test_add_more():
    assert add(-5, 2) == -3
    assert add(1000, 24) == 1024


def test_mul_more():
    assert mul(-3, 4) == -12
    assert mul(0, 99) == 0
