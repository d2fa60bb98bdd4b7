# Per-runner, per-state source files for the tiny projects.
import textwrap

def d(s):
    return textwrap.dedent(s).lstrip("\n")

STATES = [
    "a_all_pass",
    "b_one_fails",
    "c_one_skipped",
    "d_all_skipped",
    "e_empty_test_file",
    "e_no_test_files",
    "f_exit0_at_import",
    "g_exit0_in_test",
    "h_import_error",
    # pytest only: the same as f/g but with sys.exit(0), which raises SystemExit
    "f2_sys_exit0_at_import",
    "g2_sys_exit0_in_test",
]

# ---------------------------------------------------------------- python
PY_CALC = d('''
def add(a, b):
    return a + b


def sub(a, b):
    return a - b


def mul(a, b):
    return a * b
''')
PY_CALC_EXIT_IMPORT = d('''
import os

os._exit(0)  # ends the process while the module is imported


def add(a, b):
    return a + b


def sub(a, b):
    return a - b


def mul(a, b):
    return a * b
''')
PY_CALC_EXIT_IN_SUB = d('''
import os


def add(a, b):
    return a + b


def sub(a, b):
    os._exit(0)  # ends the process while test_sub runs
    return a - b


def mul(a, b):
    return a * b
''')

def py_tests(mul_expect=6, skip=()):
    def deco(name):
        return '@pytest.mark.skip(reason="not ready")\n' if name in skip else ""
    return (
        "import pytest\n\nfrom calc import add, mul, sub\n\n\n"
        + deco("add") + "def test_add():\n    assert add(2, 3) == 5\n\n\n"
        + deco("sub") + "def test_sub():\n    assert sub(5, 3) == 2\n\n\n"
        + deco("mul") + f"def test_mul():\n    assert mul(2, 3) == {mul_expect}\n"
    )

PY_BROKEN = d('''
import calc_missing  # no such module


def test_broken():
    assert calc_missing.value() == 1
''')

PY_CALC_SYSEXIT_IMPORT = PY_CALC_EXIT_IMPORT.replace("import os\n\nos._exit(0)  # ends the process", "import sys\n\nsys.exit(0)  # raises SystemExit(0)")
PY_CALC_SYSEXIT_IN_SUB = PY_CALC_EXIT_IN_SUB.replace("import os\n", "import sys\n").replace("os._exit(0)  # ends the process", "sys.exit(0)  # raises SystemExit(0)")

PYTEST = {
    "f2_sys_exit0_at_import": {"calc.py": PY_CALC_SYSEXIT_IMPORT, "tests/test_calc.py": py_tests()},
    "g2_sys_exit0_in_test": {"calc.py": PY_CALC_SYSEXIT_IN_SUB, "tests/test_calc.py": py_tests()},
    "a_all_pass": {"calc.py": PY_CALC, "tests/test_calc.py": py_tests()},
    "b_one_fails": {"calc.py": PY_CALC, "tests/test_calc.py": py_tests(mul_expect=7)},
    "c_one_skipped": {"calc.py": PY_CALC, "tests/test_calc.py": py_tests(skip=("mul",))},
    "d_all_skipped": {"calc.py": PY_CALC, "tests/test_calc.py": py_tests(skip=("add", "sub", "mul"))},
    "e_empty_test_file": {"calc.py": PY_CALC, "tests/test_calc.py": ""},
    "e_no_test_files": {"calc.py": PY_CALC, "tests/": None},
    "f_exit0_at_import": {"calc.py": PY_CALC_EXIT_IMPORT, "tests/test_calc.py": py_tests()},
    "g_exit0_in_test": {"calc.py": PY_CALC_EXIT_IN_SUB, "tests/test_calc.py": py_tests()},
    "h_import_error": {"calc.py": PY_CALC, "tests/test_calc.py": py_tests(), "tests/test_broken.py": PY_BROKEN},
}

# ---------------------------------------------------------------- JS (CommonJS)
CJS_CALC = d('''
function add(a, b) {
  return a + b;
}

function sub(a, b) {
  return a - b;
}

function mul(a, b) {
  return a * b;
}

module.exports = { add, sub, mul };
''')
CJS_CALC_EXIT_IMPORT = "process.exit(0); // ends the process while the module is loaded\n\n" + CJS_CALC
CJS_CALC_EXIT_IN_SUB = CJS_CALC.replace(
    "function sub(a, b) {\n",
    "function sub(a, b) {\n  process.exit(0); // ends the process while the 'sub' test runs\n")

ESM_CALC = d('''
export function add(a, b) {
  return a + b;
}

export function sub(a, b) {
  return a - b;
}

export function mul(a, b) {
  return a * b;
}
''')
ESM_CALC_EXIT_IMPORT = "process.exit(0); // ends the process while the module is loaded\n\n" + ESM_CALC
ESM_CALC_EXIT_IN_SUB = ESM_CALC.replace(
    "export function sub(a, b) {\n",
    "export function sub(a, b) {\n  process.exit(0); // ends the process while the 'sub' test runs\n")


def js_tests(flavor, mul_expect=6, skip=()):
    """flavor: node | jest | vitest | mocha"""
    def t(name):
        base = "it" if flavor == "mocha" else "test"
        return base + (".skip" if name in skip else "")
    if flavor == "node":
        head = ("const { test } = require('node:test');\n"
                "const assert = require('node:assert');\n"
                "const { add, sub, mul } = require('../calc');\n\n")
        eq = lambda a, b: f"assert.strictEqual({a}, {b});"
    elif flavor == "mocha":
        head = ("const assert = require('node:assert');\n"
                "const { add, sub, mul } = require('../calc');\n\n")
        eq = lambda a, b: f"assert.strictEqual({a}, {b});"
    elif flavor == "jest":
        head = "const { add, sub, mul } = require('../calc');\n\n"
        eq = lambda a, b: f"expect({a}).toBe({b});"
    else:  # vitest
        head = ("import { expect, test } from 'vitest';\n"
                "import { add, mul, sub } from '../calc.js';\n\n")
        eq = lambda a, b: f"expect({a}).toBe({b});"
    body = (
        f"{t('add')}('add', () => {{\n  {eq('add(2, 3)', 5)}\n}});\n\n"
        f"{t('sub')}('sub', () => {{\n  {eq('sub(5, 3)', 2)}\n}});\n\n"
        f"{t('mul')}('mul', () => {{\n  {eq('mul(2, 3)', mul_expect)}\n}});\n"
    )
    if flavor == "mocha":
        body = "describe('calc', () => {\n" + "".join(
            ("  " + l if l else l) + "\n" for l in body.rstrip("\n").split("\n")) + "});\n"
    return head + body


def js_broken(flavor):
    if flavor == "vitest":
        return ("import { expect, test } from 'vitest';\n"
                "import { value } from '../missing.js'; // no such module\n\n"
                "test('broken', () => {\n  expect(value()).toBe(1);\n});\n")
    if flavor == "node":
        return ("const { test } = require('node:test');\n"
                "const assert = require('node:assert');\n"
                "const { value } = require('../missing'); // no such module\n\n"
                "test('broken', () => {\n  assert.strictEqual(value(), 1);\n});\n")
    if flavor == "mocha":
        return ("const assert = require('node:assert');\n"
                "const { value } = require('../missing'); // no such module\n\n"
                "describe('broken', () => {\n  it('broken', () => {\n    assert.strictEqual(value(), 1);\n  });\n});\n")
    return ("const { value } = require('../missing'); // no such module\n\n"
            "test('broken', () => {\n  expect(value()).toBe(1);\n});\n")


def js_states(flavor):
    esm = flavor == "vitest"
    calc, calc_imp, calc_sub = ((ESM_CALC, ESM_CALC_EXIT_IMPORT, ESM_CALC_EXIT_IN_SUB) if esm
                                else (CJS_CALC, CJS_CALC_EXIT_IMPORT, CJS_CALC_EXIT_IN_SUB))
    tf = "test/calc.test.js"
    return {
        "a_all_pass": {"calc.js": calc, tf: js_tests(flavor)},
        "b_one_fails": {"calc.js": calc, tf: js_tests(flavor, mul_expect=7)},
        "c_one_skipped": {"calc.js": calc, tf: js_tests(flavor, skip=("mul",))},
        "d_all_skipped": {"calc.js": calc, tf: js_tests(flavor, skip=("add", "sub", "mul"))},
        "e_empty_test_file": {"calc.js": calc, tf: ""},
        "e_no_test_files": {"calc.js": calc, "test/": None},
        "f_exit0_at_import": {"calc.js": calc_imp, tf: js_tests(flavor)},
        "g_exit0_in_test": {"calc.js": calc_sub, tf: js_tests(flavor)},
        "h_import_error": {"calc.js": calc, tf: js_tests(flavor), "test/broken.test.js": js_broken(flavor)},
    }

# ---------------------------------------------------------------- Go
GO_MOD = "module example.com/ws\n\ngo 1.19\n"
GO_CALC = d('''
package calc

func Add(a, b int) int { return a + b }

func Sub(a, b int) int { return a - b }

func Mul(a, b int) int { return a * b }
''')
GO_CALC_EXIT_INIT = d('''
package calc

import "os"

func init() {
	os.Exit(0) // ends the process while the package is initialised
}

func Add(a, b int) int { return a + b }

func Sub(a, b int) int { return a - b }

func Mul(a, b int) int { return a * b }
''')
GO_CALC_EXIT_IN_SUB = d('''
package calc

import "os"

func Add(a, b int) int { return a + b }

func Sub(a, b int) int {
	os.Exit(0) // ends the process while TestSub runs
	return a - b
}

func Mul(a, b int) int { return a * b }
''')


def go_tests(mul_expect=6, skip=()):
    def body(name, expr, want):
        s = f"func Test{name}(t *testing.T) {{\n"
        if name in skip:
            s += '\tt.Skip("not ready")\n'
        s += f"\tif got := {expr}; got != {want} {{\n\t\tt.Errorf(\"{expr} = %d, want {want}\", got)\n\t}}\n}}\n"
        return s
    return ("package calc\n\nimport \"testing\"\n\n"
            + body("Add", "Add(2, 3)", 5) + "\n"
            + body("Sub", "Sub(5, 3)", 2) + "\n"
            + body("Mul", "Mul(2, 3)", mul_expect))


GO_BROKEN = d('''
package calc

import "testing"

func TestBroken(t *testing.T) {
	if Nope() != 1 { // Nope is not defined anywhere
		t.Fail()
	}
}
''')

GO = {
    "a_all_pass": {"go.mod": GO_MOD, "calc/calc.go": GO_CALC, "calc/calc_test.go": go_tests()},
    "b_one_fails": {"go.mod": GO_MOD, "calc/calc.go": GO_CALC, "calc/calc_test.go": go_tests(mul_expect=7)},
    "c_one_skipped": {"go.mod": GO_MOD, "calc/calc.go": GO_CALC, "calc/calc_test.go": go_tests(skip=("Mul",))},
    "d_all_skipped": {"go.mod": GO_MOD, "calc/calc.go": GO_CALC, "calc/calc_test.go": go_tests(skip=("Add", "Sub", "Mul"))},
    "e_empty_test_file": {"go.mod": GO_MOD, "calc/calc.go": GO_CALC, "calc/calc_test.go": "package calc\n"},
    "e_no_test_files": {"go.mod": GO_MOD, "calc/calc.go": GO_CALC},
    "f_exit0_at_import": {"go.mod": GO_MOD, "calc/calc.go": GO_CALC_EXIT_INIT, "calc/calc_test.go": go_tests()},
    "g_exit0_in_test": {"go.mod": GO_MOD, "calc/calc.go": GO_CALC_EXIT_IN_SUB, "calc/calc_test.go": go_tests()},
    "h_import_error": {"go.mod": GO_MOD, "calc/calc.go": GO_CALC, "calc/calc_test.go": go_tests(), "calc/broken_test.go": GO_BROKEN},
}


def jest_workers_states():
    """Two test files so that jest can use worker processes (see README)."""
    base = js_states("jest")
    other = "test('other', () => {\n  expect(1 + 1).toBe(2);\n});\n"
    out = {}
    for st in ("a_all_pass", "f_exit0_at_import", "g_exit0_in_test"):
        files = dict(base[st])
        files["test/other.test.js"] = other
        out[st] = files
    return out
