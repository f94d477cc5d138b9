"""What the manifest tests' Python checks share (webhook_manifests, guard_manifests): a check that
prints the "ok - " / "FAIL - " lines lib.sh's it_count_checks counts, and a YAML stream read back
through the Kubernetes Python client's models. Run with PYTHONPATH naming this directory."""
import json
import sys

import yaml
from kubernetes import client

api = client.ApiClient()
failed = 0


def check(ok, what):
    global failed
    print(("ok - " if ok else "FAIL - ") + what)
    failed += 0 if ok else 1


class _Response:
    def __init__(self, data):
        self.data = json.dumps(data)


def read_objects(path, models, variant):
    """Each object of the YAML stream at PATH by its kind: deserialized by its model in MODELS
    (kind -> model name), checked to serialize back unchanged, or the plain document when MODELS
    has no model for it (cert-manager's and prometheus-operator's kinds)."""
    objs = {}
    for doc in yaml.safe_load_all(open(path)):
        kind = doc["kind"]
        if kind in models:
            obj = api.deserialize(_Response(doc), models[kind])
            check(api.sanitize_for_serialization(obj) == doc,
                  "%s: the %s round-trips through %s unchanged" % (variant, kind, models[kind]))
            objs[kind] = obj
        else:
            objs[kind] = doc
    return objs


def done():
    sys.exit(1 if failed else 0)
