from calc import add, mul


def test_add():
    assert add(40, 2) == 42


def test_add_negative():
    assert add(-1, 1) == 0


def test_mul():
    assert mul(6, 7) == 42
