"""What third-party verifiers say of what harness emits (tests/pipeline.rs runs this).

    python pipeline_tools.py dsse ENVELOPE PUBKEY_PEM [DOCUMENT]
        Verifies a DSSE envelope with securesystemslib (Envelope.from_dict, then verify with an
        SSlibKey made from the public key, keyid = sha256 of its DER SubjectPublicKeyInfo) and
        checks the in-toto statement it carries; with DOCUMENT, that the run document's bytes
        are its subject. Prints one JSON object: {"verified": bool, "error": str|null,
        "keyid": str, "statement": {...}}. Exit 0 when verified, 1 when not.

    python pipeline_tools.py action ACTION_DIR INPUTS_JSON WORK_DIR
        Runs a composite action's steps as GitHub's runner does: `${{ inputs.* }}`,
        `${{ github.action_path }}`, `${{ runner.temp }}` and `${{ steps.ID.outputs.NAME }}`
        substituted in each step's `run` and `env`, each `run:` as a bash script
        (`bash --noprofile --norc -eo pipefail FILE`) in WORK_DIR with GITHUB_OUTPUT and
        GITHUB_STEP_SUMMARY set to files, the first failing step ending the action. Prints
        {"outputs": {...}, "summary": str, "steps": [{"id", "exit"}], "log": str}; exits as the
        action would (0, or 1 when a step failed).

    python pipeline_tools.py sarif LOG SCHEMA
        Validates a SARIF log against the official OASIS SARIF 2.1.0 JSON schema with
        python-jsonschema (draft 4). Prints {"valid": bool, "errors": [...]}; exit 0 or 1.
"""

import hashlib
import json
import os
import sys


def dsse(envelope_path, pubkey_path, document_path=None):
    from cryptography.hazmat.primitives import serialization
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import SSlibKey

    with open(pubkey_path, "rb") as f:
        public_key = serialization.load_pem_public_key(f.read())
    der = public_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    keyid = hashlib.sha256(der).hexdigest()
    out = {"verified": False, "error": None, "keyid": keyid, "statement": None}
    try:
        with open(envelope_path) as f:
            envelope = Envelope.from_dict(json.load(f))
        key = SSlibKey.from_crypto(public_key, keyid=keyid)
        envelope.verify([key], 1)
        statement = json.loads(envelope.payload)
        out["statement"] = statement
        assert envelope.payload_type == "application/vnd.in-toto+json", envelope.payload_type
        assert statement["_type"] == "https://in-toto.io/Statement/v1", statement["_type"]
        assert (
            statement["predicateType"] == "https://in-toto.io/attestation/test-result/v0.1"
        ), statement["predicateType"]
        predicate = statement["predicate"]
        assert predicate["result"] in ("PASSED", "WARNED", "FAILED"), predicate["result"]
        for key_name in ("passedTests", "warnedTests", "failedTests", "configuration"):
            assert isinstance(predicate[key_name], list), key_name
        subject = statement["subject"][0]
        assert subject["name"].startswith("harness-run/"), subject["name"]
        if document_path:
            with open(document_path, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            assert subject["digest"]["sha256"] == digest, (
                f"subject digest {subject['digest']['sha256']} is not the document's {digest}"
            )
        out["verified"] = True
    except Exception as e:  # noqa: BLE001 - every failure is the verifier's answer
        out["error"] = f"{type(e).__name__}: {e}"
    print(json.dumps(out))
    return 0 if out["verified"] else 1


def action(action_dir, inputs_json, work_dir):
    import re
    import subprocess

    import yaml

    action_dir = os.path.abspath(action_dir)
    with open(os.path.join(action_dir, "action.yml")) as f:
        spec = yaml.safe_load(f)
    assert spec["runs"]["using"] == "composite", spec["runs"]["using"]
    given = json.loads(inputs_json)
    unknown = set(given) - set(spec.get("inputs") or {})
    assert not unknown, f"inputs the action does not declare: {unknown}"
    inputs = {
        name: str(given.get(name, (declared or {}).get("default", "")))
        for name, declared in (spec.get("inputs") or {}).items()
    }
    temp = os.path.join(work_dir, "runner-temp")
    os.makedirs(temp, exist_ok=True)
    steps = {}

    def evaluate(text):
        def one(match):
            expression = match.group(1).strip()
            parts = expression.split(".")
            if parts[0] == "inputs" and len(parts) == 2:
                return inputs[parts[1]]
            if expression == "github.action_path":
                return action_dir
            if expression == "runner.temp":
                return temp
            if parts[0] == "steps" and len(parts) == 4 and parts[2] == "outputs":
                return steps.get(parts[1], {}).get(parts[3], "")
            raise ValueError(f"an expression this runner does not evaluate: {expression}")

        return re.sub(r"\$\{\{(.*?)\}\}", one, str(text))

    summary_path = os.path.join(work_dir, "step-summary.md")
    open(summary_path, "w").close()
    ran, log, code = [], [], 0
    for index, step in enumerate(spec["runs"]["steps"]):
        assert step.get("shell") == "bash", f"step {index}: shell {step.get('shell')}"
        output_path = os.path.join(work_dir, f"output-{index}")
        open(output_path, "w").close()
        script = os.path.join(work_dir, f"step-{index}.sh")
        with open(script, "w") as f:
            f.write(evaluate(step["run"]))
        environment = dict(os.environ)
        environment.update({k: evaluate(v) for k, v in (step.get("env") or {}).items()})
        environment.update({
            "GITHUB_OUTPUT": output_path,
            "GITHUB_STEP_SUMMARY": summary_path,
            "GITHUB_ACTION_PATH": action_dir,
            "RUNNER_TEMP": temp,
        })
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", script],
            cwd=work_dir, env=environment, capture_output=True, text=True,
        )
        log.append(done.stdout + done.stderr)
        values = {}
        with open(output_path) as f:
            lines = iter(f.read().split("\n"))
        # GitHub's two forms: `name=value`, and `name<<DELIMITER`, lines, `DELIMITER`.
        for line in lines:
            if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
                name, delimiter = line.split("<<", 1)
                body = []
                for part in lines:
                    if part == delimiter:
                        break
                    body.append(part)
                else:
                    raise ValueError(f"step {index}: output {name} has no closing {delimiter}")
                values[name] = "\n".join(body)
            elif "=" in line:
                name, value = line.split("=", 1)
                values[name] = value
        if "id" in step:
            steps[step["id"]] = values
        ran.append({"id": step.get("id"), "exit": done.returncode})
        if done.returncode != 0:
            code = 1
            break
    outputs = {name: evaluate(o["value"]) for name, o in (spec.get("outputs") or {}).items()}
    with open(summary_path) as f:
        summary = f.read()
    print(json.dumps({"outputs": outputs, "summary": summary, "steps": ran, "log": "".join(log)}))
    return code


def sarif(log_path, schema_path):
    import jsonschema

    with open(schema_path) as f:
        schema = json.load(f)
    with open(log_path) as f:
        log = json.load(f)
    validator = jsonschema.Draft4Validator(schema)
    errors = [
        f"{'/'.join(str(p) for p in e.absolute_path)}: {e.message}"
        for e in validator.iter_errors(log)
    ]
    print(json.dumps({"valid": not errors, "errors": errors}))
    return 0 if not errors else 1


if __name__ == "__main__":
    command, *rest = sys.argv[1:]
    sys.exit({"dsse": dsse, "sarif": sarif, "action": action}[command](*rest))
