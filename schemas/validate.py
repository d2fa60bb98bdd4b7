#!/usr/bin/env python3
"""Validates YAML (or JSON) files against a JSON Schema (draft 2020-12).

    validate.py SCHEMA FILE...

Prints one line per file, `ok FILE` or `FAIL FILE: where: what` (every error of the file, `;`
separated), and exits 1 when any file fails (2 on a usage error or an unreadable schema).

A `.jsonl` file is one document per non-empty line, each validated (a batch file). YAML is read
the way harness reads it (YAML 1.2: only true/false are booleans, so `claims: off` and
`isolation: none` stay strings; dates stay strings); an empty file is null. Needs `jsonschema`
and `pyyaml`.
"""
import json
import re
import sys

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match


class Yaml12Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 core booleans, and timestamps left as strings."""


Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers
            if tag not in ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:timestamp")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


def documents(path):
    """The documents of `path`, each as (label, value)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if path.endswith(".jsonl"):
        return [(f"{path}:{n}", json.loads(line))
                for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if path.endswith(".json"):
        return [(path, json.loads(text))]
    return [(path, yaml.load(text, Loader=Yaml12Loader))]


def where(error):
    return "/".join(str(p) for p in error.absolute_path) or "(top)"


def explain(error):
    """`where: what`, descending into anyOf/oneOf to the alternative that came closest."""
    if error.context:
        error = best_match(error.context)
    return f"{where(error)}: {error.message}"


def main(argv):
    if len(argv) < 3:
        print("usage: validate.py SCHEMA FILE...", file=sys.stderr)
        return 2
    try:
        with open(argv[1], encoding="utf-8") as f:
            schema = json.load(f)
        Draft202012Validator.check_schema(schema)
    except Exception as e:  # noqa: BLE001 - any failure to load the schema is a usage error
        print(f"error: schema {argv[1]}: {e}", file=sys.stderr)
        return 2
    validator = Draft202012Validator(schema)
    failed = 0
    for path in argv[2:]:
        try:
            docs = documents(path)
        except Exception as e:  # noqa: BLE001 - unreadable or unparseable: a failure of this file
            print(f"FAIL {path}: cannot read: {e}")
            failed += 1
            continue
        for label, value in docs:
            errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
            if errors:
                failed += 1
                print(f"FAIL {label}: " + "; ".join(explain(e) for e in errors))
            else:
                print(f"ok {label}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
