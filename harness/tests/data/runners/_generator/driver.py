#!/usr/bin/env python3
"""Run each runner in each state and write fixtures."""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, "/tmp/rf")
import sources as S

OUT = "/work/main/harness/tests/data/runners"
WS = None
HOME = "/tmp/rf/home"
GOCACHE = "/tmp/rf/gocache"
INFRA = {"node_modules", "package.json", "package-lock.json", ".venv"}

BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": HOME, "LANG": "C.UTF-8"}

PY = ["python -m pytest --collect-only -q tests", "python -m pytest --collect-only -qq tests",
      "python -m pytest --collect-only tests"]
PY_LISTS = list(zip(["list", "list_qq", "list_plain"], PY))

VARIANTS = {
    # name: (workspace, sources, cmd, extra env, report name, lists, version cmd)
    "pytest": ("pytest", S.PYTEST, "python -m pytest -q tests --junitxml=REPORT.xml", {}, "REPORT.xml",
               PY_LISTS, "python -m pytest --version"),
    "pytest_addopts": ("pytest", S.PYTEST, "python -m pytest -q tests",
                       {"PYTEST_ADDOPTS": "--junitxml=REPORT.xml"}, "REPORT.xml",
                       PY_LISTS, "python -m pytest --version"),
    "node_test": ("node", S.js_states("node"),
                  "node --test --test-reporter=junit --test-reporter-destination=REPORT.xml "
                  "--test-reporter=spec --test-reporter-destination=stdout", {}, "REPORT.xml", [],
                  "node --version"),
    "node_test_tap": ("node", S.js_states("node"), "node --test --test-reporter=tap", {}, None, [],
                      "node --version"),
    "jest": ("jest", S.js_states("jest"), "npx jest --json --outputFile=REPORT.json", {}, "REPORT.json",
             [("list", "npx jest --listTests"), ("list_json", "npx jest --listTests --json")],
             "npx jest --version"),
    "jest_workers": ("jest", S.jest_workers_states(),
                     "npx jest --json --outputFile=REPORT.json --maxWorkers=2", {}, "REPORT.json", [],
                     "npx jest --version"),
    "vitest": ("vitest", S.js_states("vitest"),
               "npx vitest run --reporter=default --reporter=json --outputFile.json=REPORT.json", {},
               "REPORT.json",
               [("list", "npx vitest list"), ("list_json", "npx vitest list --json"),
                ("list_files", "npx vitest list --filesOnly")],
               "npx vitest --version"),
    "vitest_json_only": ("vitest", S.js_states("vitest"),
                         "npx vitest run --reporter=json --outputFile=REPORT.json", {}, "REPORT.json", [],
                         "npx vitest --version"),
    "mocha": ("mocha", S.js_states("mocha"),
              "npx mocha --reporter json --reporter-option output=REPORT.json", {}, "REPORT.json",
              [("list", "npx mocha --dry-run --reporter json")], "npx mocha --version"),
    "go": ("go", S.GO, "go test -json ./...",
           {"GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOCACHE": GOCACHE}, None,
           [("list", "go test -list . ./..."), ("list_json", "go test -list . -json ./...")],
           "go version"),
}


PRE = {"jest_workers": "npx jest --clearCache"}


def subst(b, ws):
    b = b.replace(ws.encode(), b"/work/ws")
    b = b.replace(HOME.encode(), b"/work/ws/.home")
    b = b.replace(GOCACHE.encode(), b"/work/ws/.gocache")
    return b


def env_for(wsname, extra):
    env = dict(BASE_ENV)
    if wsname == "pytest":
        env["PATH"] = "/tmp/rf/pytest/ws/.venv/bin" + ":" + env["PATH"]
        env["VIRTUAL_ENV"] = "/tmp/rf/pytest/ws/.venv"
    env.update(extra)
    return env


def prepare(ws, files):
    for name in os.listdir(ws):
        if name in INFRA:
            continue
        p = os.path.join(ws, name)
        shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.remove(p)
    shutil.rmtree(os.path.join(ws, "node_modules/.vite"), ignore_errors=True)
    for rel, content in files.items():
        p = os.path.join(ws, rel)
        if content is None:
            os.makedirs(p, exist_ok=True)
            continue
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(content)


def run(cmd, ws, env):
    try:
        p = subprocess.run(["bash", "-c", cmd], cwd=ws, env=env, capture_output=True, timeout=300,
                           stdin=subprocess.DEVNULL)
        return p.stdout, p.stderr, str(p.returncode)
    except subprocess.TimeoutExpired as e:
        return e.stdout or b"", e.stderr or b"", "TIMEOUT(300s)"


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def cmd_text(cmd, extra, version, wsname):
    lines = []
    for k, v in extra.items():
        lines.append(f"{k}={v} \\")
    lines.append(cmd)
    text = "\n".join(lines) + "\n\n"
    text += f"cwd: /work/ws (project root)\nrunner version: {version}\n"
    if wsname == "pytest":
        text += "python: 3.11.7, pytest run from a venv at /work/ws/.venv (its bin first on PATH)\n"
    text += "environment: env -i PATH HOME LANG=C.UTF-8 (no TERM, no CI, stdout/stderr are pipes)\n"
    return text


def main(selected):
    for vname in selected:
        wsname, srcs, cmd, extra, report, lists, vcmd = VARIANTS[vname]
        ws = os.path.join("/tmp/rf", wsname, "ws")
        env = env_for(wsname, extra)
        version = subprocess.run(["bash", "-c", vcmd], cwd=ws, env=env, capture_output=True,
                                 text=True).stdout.strip()
        for state in S.STATES:
            if state not in srcs:
                continue
            files = srcs[state]
            fdir = os.path.join(OUT, vname, state)
            shutil.rmtree(fdir, ignore_errors=True)
            runs = [("", cmd)] + [(n + ".", c) for n, c in lists]
            for prefix, c in runs:
                prepare(ws, files)
                if vname in PRE:
                    subprocess.run(["bash", "-c", PRE[vname]], cwd=ws, env=env, capture_output=True)
                if wsname == "go":
                    subprocess.run(["go", "clean", "-testcache"], cwd=ws, env=env)
                out, err, rc = run(c, ws, env)
                ct = cmd_text(c, extra, version, wsname)
                if vname in PRE:
                    ct += f"before the run: {PRE[vname]} (no cached timings, so jest does not choose to run in band)\n"
                write(os.path.join(fdir, prefix + "command.txt"), subst(ct.encode(), ws))
                write(os.path.join(fdir, prefix + "stdout.txt"), subst(out, ws))
                write(os.path.join(fdir, prefix + "stderr.txt"), subst(err, ws))
                write(os.path.join(fdir, prefix + "exit_code.txt"), (rc + "\n").encode())
                rp = os.path.join(ws, report) if report else None
                if rp and os.path.exists(rp):
                    ext = os.path.splitext(report)[1]
                    with open(rp, "rb") as f:
                        write(os.path.join(fdir, prefix + "report" + ext), subst(f.read(), ws))
                print(f"{vname:18} {state:20} {prefix or 'run.':10} rc={rc}", flush=True)
            # sources
            for rel, content in files.items():
                if content is None:
                    continue
                write(os.path.join(fdir, "src", rel), content.encode())
            for extra_file in ("package.json",):
                p = os.path.join(ws, extra_file)
                if os.path.exists(p):
                    shutil.copy(p, os.path.join(fdir, "src", extra_file))


if __name__ == "__main__":
    main(sys.argv[1:] or list(VARIANTS))
