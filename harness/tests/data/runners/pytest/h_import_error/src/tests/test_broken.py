import calc_missing  # no such module


def test_broken():
    assert calc_missing.value() == 1
