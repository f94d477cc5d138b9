#!/usr/bin/python3
"""Validates profile documents against profiles/profile.schema.json with python3-jsonschema.

Usage: validate.py SCHEMA FILE...   (FILE - reads standard input)
Prints one line per file, "ok FILE" or "FAIL FILE: $.path: message" for each error, and exits 1
when a file does not validate (2 when the schema itself is not a valid JSON Schema).
"""
import json
import sys

import jsonschema


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        schema = json.load(f)
    validator_class = jsonschema.validators.validator_for(schema)
    try:
        validator_class.check_schema(schema)
    except jsonschema.exceptions.SchemaError as e:
        print(f"FAIL {argv[1]}: not a valid JSON Schema: {e.message}")
        return 2
    validator = validator_class(schema)
    failed = False
    for path in argv[2:]:
        if path == "-":
            document = json.load(sys.stdin)
        else:
            with open(path, encoding="utf-8") as f:
                document = json.load(f)
        errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
        for e in errors:
            print(f"FAIL {path}: {e.json_path}: {e.message}")
        if not errors:
            print(f"ok {path}")
        failed = failed or bool(errors)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
