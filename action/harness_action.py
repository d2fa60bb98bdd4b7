#!/usr/bin/env python3
"""The steps of the harness GitHub Action (action.yml at the repository root).

    harness_action.py install   find the harness binary (INPUT_HARNESS, else `harness` on PATH,
                                else `cargo install --locked --path $ACTION_PATH`); writes
                                `harness=PATH` to $GITHUB_OUTPUT
    harness_action.py run       run a delegation (INPUT_FILE) or audit a recorded run or DSSE
                                envelope (INPUT_RUN); writes the action's outputs to
                                $GITHUB_OUTPUT and a table to $GITHUB_STEP_SUMMARY; exits 1 when
                                INPUT_FAIL_ON says the step fails

Inputs come as environment variables (INPUT_*), never spliced into a script: a delegation file
name or a review URL cannot inject shell. Python 3.8+, standard library only.
"""

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

FAIL_ON = ("any", "tamper", "gaming", "claims", "none")
# What a run id harness makes looks like; anything else is not put into a link.
RUN_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")


def env(name, default=""):
    return os.environ.get(name, "").strip() or default


def output(values):
    """Appends the outputs to $GITHUB_OUTPUT (and echoes them to the log). A value with a line
    break (a recorded run's id or outcome comes from a file the action was handed) is written in
    GitHub's delimited form, with a delimiter it cannot contain, so it can never set another
    output."""
    path = os.environ.get("GITHUB_OUTPUT")
    lines = []
    for name, value in values.items():
        value = str(value)
        print(f"output {name}={value!r}")
        if "\n" in value or "\r" in value:
            delimiter = f"harness_{secrets.token_hex(16)}"
            lines.append(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
        else:
            lines.append(f"{name}={value}\n")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write("".join(lines))


def summary(text):
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(text)
    else:
        print(text)


def error(message):
    """A workflow error annotation, then exit 2 (the action is misused, not the run judged)."""
    print(f"::error title=harness::{message}")
    sys.exit(2)


def install():
    given = env("INPUT_HARNESS")
    if given:
        found = shutil.which(given) or (given if Path(given).is_file() else None)
        if not found:
            error(f"harness: {given} is not a program")
    else:
        found = shutil.which("harness")
    if not found:
        action = env("ACTION_PATH", str(Path(__file__).resolve().parent.parent))
        root = Path(tempfile.gettempdir()) / "harness-action"
        print(f"harness is not on PATH: building it from {action} with cargo install")
        subprocess.run(
            ["cargo", "install", "--locked", "--path", action, "--root", str(root)],
            check=True,
        )
        found = str(root / "bin" / "harness")
    output({"harness": found})


def harness(*args, check_codes=(0, 1)):
    """Runs harness; returns (exit code, stdout). A code outside `check_codes` is an error."""
    binary = env("HARNESS_BIN", "harness")
    done = subprocess.run([binary, *args], capture_output=True, text=True)
    sys.stderr.write(done.stderr)
    if done.returncode not in check_codes:
        error(f"harness {' '.join(args[:2])} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return done.returncode, done.stdout


def final_findings(document):
    """The findings of the last attempt that has a verdict."""
    for attempt in reversed(document.get("attempts") or []):
        verdict = attempt.get("verdict")
        if isinstance(verdict, dict):
            return verdict.get("findings") or []
    return []


def run():
    file, recorded = env("INPUT_FILE"), env("INPUT_RUN")
    if bool(file) == bool(recorded):
        error("give exactly one of the inputs `file` (a delegation to run) and `run` (a recorded run to audit)")
    fail_on = env("INPUT_FAIL_ON", "any")
    if fail_on not in FAIL_ON:
        error(f"fail-on: {fail_on!r} is not one of {', '.join(FAIL_ON)}")
    work = Path(env("RUNNER_TEMP", tempfile.gettempdir()))
    journal = env("INPUT_JOURNAL", str(work / "harness-runs.db"))
    public_key = env("INPUT_PUBLIC_KEY")
    values = {"sarif-path": "", "attestation-path": ""}
    audit_valid = True
    audit_failures = []
    if file:
        code, out = harness("run", "--json", "--journal", journal, file, check_codes=range(0, 256))
        try:
            report = json.loads(out)
        except json.JSONDecodeError:
            error(f"harness run {file} exited {code} without its JSON report")
        if not report.get("id"):
            why = (report.get("error") or {}).get("message") or f"exit {code}"
            error(f"harness run {file}: {why}")
        run_id = report["id"]
        outcome = report["outcome"]
        usage = report.get("usage") or {}
        attempts = report.get("attempts")
        document_path = work / f"harness-run-{run_id}.json"
        harness("runs", "export", run_id, "--journal", journal, "-o", str(document_path), check_codes=(0,))
        document = json.loads(document_path.read_text(encoding="utf-8"))
        sarif = env("INPUT_SARIF")
        if sarif:
            _, log = harness("runs", "show", run_id, "--sarif", "--journal", journal, check_codes=(0,))
            Path(sarif).write_text(log, encoding="utf-8")
            values["sarif-path"] = sarif
        signing_key = env("INPUT_SIGNING_KEY")
        if signing_key:
            attestation = env("INPUT_ATTESTATION", "harness.intoto.jsonl")
            harness(
                "runs", "export", run_id, "--journal", journal, "--format", "dsse",
                "--sign", signing_key, "-o", attestation, check_codes=(0,),
            )
            values["attestation-path"] = attestation
        audit_args = ["audit", "--json", run_id, "--journal", journal]
    else:
        document_path = Path(env("INPUT_DOCUMENT") or recorded)
        audit_args = ["audit", "--json", recorded]
        if env("INPUT_DOCUMENT"):
            audit_args += ["--document", env("INPUT_DOCUMENT")]
        document = None
        usage = {}
    if public_key:
        audit_args += ["--pubkey", public_key]
    _, out = harness(*audit_args)
    audited = json.loads(out)
    audit_valid = bool(audited.get("valid"))
    audit_failures = audited.get("failures") or []
    if document is None:
        try:
            document = json.loads(document_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            document = {}
        if "payloadType" in document:
            document = {}
        run_id = (document.get("run") or {}).get("id") or ""
        outcome = (document.get("run") or {}).get("outcome") or "unknown"
        if not run_id:
            outcome = (audited.get("summary_metrics") or {}).get("result", "unknown")
        attempts = len(document.get("attempts") or [])

    findings = final_findings(document)
    sources = Counter(f.get("source", "?") for f in findings)
    blocking = Counter(f.get("source", "?") for f in findings if f.get("blocking"))
    failed = {
        "any": outcome != "passed" or not audit_valid,
        "tamper": not audit_valid or blocking["integrity"] > 0,
        "gaming": blocking["gaming"] + blocking["holdout"] > 0,
        "claims": blocking["claim"] > 0,
        "none": False,
    }[fail_on]
    conclusion = "failure" if failed else "success"
    values.update({
        "conclusion": conclusion,
        "outcome": outcome,
        "run-id": run_id,
        "input-tokens": usage.get("input_tokens", 0),
        "output-tokens": usage.get("output_tokens", 0),
    })
    output(values)

    if recorded and not public_key:
        print("::warning title=harness::no public-key: the audit shows the run file is self-consistent, not that it is the run recorded (anyone can rewrite and reseal an export)")
    rows = [
        ("outcome", literal(outcome)),
        ("conclusion", f"{conclusion} (fail-on: {literal(fail_on)})"),
        ("run", literal(run_id) if run_id else "—"),
        ("attempts", cell(attempts)),
        ("audit", "valid" if audit_valid else "INVALID: " + "; ".join(
            f"{literal(f.get('code'))} {cell(f.get('message', ''))}" for f in audit_failures)),
        ("findings", cell(", ".join(f"{source} {n}" for source, n in sorted(sources.items())) or "none")),
        ("tokens", cell(f"{values['input-tokens']} in, {values['output-tokens']} out")),
    ]
    if recorded and not public_key:
        rows.append(("trust", "unsigned: no `public-key` was given, so nothing shows the file is the run recorded"))
    review_url = env("INPUT_REVIEW_URL")
    if review_url and RUN_ID.fullmatch(run_id):
        rows.append(("review", f"[{run_id}](<{review_url.rstrip('/')}/runs/{run_id}>)"))
    if values["sarif-path"]:
        rows.append(("SARIF", literal(values["sarif-path"])))
    if values["attestation-path"]:
        rows.append(("attestation", literal(values["attestation-path"])))
    table = "\n".join(f"| {name} | {value} |" for name, value in rows)
    summary(f"### harness: {cell(outcome)}\n\n| | |\n|---|---|\n{table}\n\n")
    if failed:
        print(f"::error title=harness::run {run_id or recorded}: {outcome}; fail-on {fail_on} fails the step")
        sys.exit(1)


def literal(text):
    """Text as inline code in a table cell (backticks and bars in it replaced)."""
    return "`" + " ".join(str(text).split()).replace("`", "'").replace("|", "/") + "`"


def cell(text):
    """Text safe in one markdown table cell: one line, markdown and HTML characters escaped (an
    audit message or a recorded run's id is text from a file the action was handed)."""
    text = " ".join(str(text).split())
    return re.sub(r"([\\`*_{}\[\]()<>#+!|~])", r"\\\1", text)


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "install":
        install()
    elif command == "run":
        run()
    else:
        error(f"usage: {sys.argv[0]} install|run")
