#!/usr/bin/env bash
# gpu-run-webhook's image (packaging/webhook/build-image, FROM scratch over the project's .debs)
# built in an isolated dockerd, run read-only as user 65532 with no capabilities and
# no-new-privileges, a self-signed certificate mounted read-only: /healthz and one real
# AdmissionReview over TLS (the built-in imagenet profile, 8 GPUs, 16 CPUs: 1545Mi, as
# gpu-run-ctl plan gives), then the container and the image removed.
# Packages: the build under test ($GPU_RUN_BIN_DIR/..) when it is a Release build for /usr,
# else scripts/package into $GPU_RUN_PACKAGE_BUILD_DIR (default build/pkg), as package_test does.
source "$(dirname "$0")/lib.sh"
set -uo pipefail

src=$(cd "$(dirname "$0")/../.." && pwd)
it_require_root
it_require_cmd dpkg-deb cpack readelf openssl
PY=/usr/bin/python3
[[ -x $PY ]] || it_skip "/usr/bin/python3 not found (apt-get install python3)"

d=$(it_tmpdir)
it_on_exit rm -rf --one-file-system "$d"
it_on_exit it_dockerd_stop "$d/docker"

it_package_build CPackWebhookConfig.cmake
build=$IT_PACKAGE_BUILD

it_dockerd_start "$d/docker"
tag=gpu-run-webhook-it:$$
it_on_exit docker rmi -f "$tag"
out=$("$src/packaging/webhook/build-image" --build-dir "$build" --tag "$tag" 2>&1)
assert_eq 0 "$?" "build-image builds the image offline ($(tail -n 3 <<<"$out"))"
assert_eq "$tag" "$(tail -n 1 <<<"$out")" "build-image prints the tag"
assert_eq "65532:65532" "$(docker image inspect -f '{{.Config.User}}' "$tag")" "the image's user is 65532, numeric"
layers=$(docker history -q "$tag" | wc -l)
files=$(docker create "$tag" >"$d/cid" && docker export "$(cat "$d/cid")" | tar -t | sort)
docker rm -f "$(cat "$d/cid")" >/dev/null
assert_contains "$files" "usr/bin/gpu-run-webhook" "the image holds the binary from the .deb"
assert_contains "$files" "usr/share/gpu-run/profiles/imagenet.json" "...and the built-in profiles"
assert_not_contains "$files" "bin/sh" "...and no shell"
it_log "image $tag: $layers layer(s), $(wc -l <<<"$files") files"

# A self-signed pair for 127.0.0.1, readable by user 65532 through a read-only mount.
mkdir -p "$d/tls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/tls/tls.key" \
  -out "$d/tls/tls.crt" -days 1 -subj "/CN=gpu-run-webhook" -addext "subjectAltName=IP:127.0.0.1" \
  >/dev/null 2>&1 || it_die "openssl req failed"
chown -R 65532:65532 "$d/tls"
port=$((20000 + RANDOM % 20000))
name=gpu-run-webhook-it-$$
it_on_exit docker rm -f "$name"
docker run -d --name "$name" --network host --read-only --cap-drop ALL --security-opt no-new-privileges \
  -v "$d/tls:/tls:ro" "$tag" --listen "127.0.0.1:$port" --tls-cert /tls/tls.crt --tls-key /tls/tls.key \
  >/dev/null
assert_eq 0 "$?" "docker run: read-only, no capabilities, no-new-privileges"

"$PY" - "$port" "$d/tls/tls.crt" >"$d/client.out" 2>&1 <<'PYEOF'
import base64, http.client, json, ssl, sys, time

port, cafile = int(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context(cafile=cafile)


def request(method, path, body=None):
    c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
    c.request(method, path, body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, r.read()


status = None
for _ in range(100):
    try:
        status, data = request("GET", "/healthz")
        break
    except OSError:
        time.sleep(0.1)
print(("ok - " if status == 200 and data == b"ok\n" else "FAIL - ") + "/healthz answers 200 over TLS: %s" % status)
pod = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "trainer", "namespace": "ml", "annotations": {"gpu-run.profile": "imagenet"}},
       "spec": {"containers": [{"name": "main", "image": "pytorch/pytorch",
                                "resources": {"limits": {"nvidia.com/gpu": "8", "cpu": "16", "memory": "64Gi"}}}]}}
review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
          "request": {"uid": "uid-image", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                      "resource": {"group": "", "version": "v1", "resource": "pods"},
                      "namespace": "ml", "operation": "CREATE", "object": pod}}
status, data = request("POST", "/mutate", json.dumps(review))
resp = json.loads(data)["response"]
ops = json.loads(base64.b64decode(resp["patch"])) if "patch" in resp else []
vols = [op["value"] for op in ops if op["path"] == "/spec/volumes"]
ok = (status == 200 and resp["uid"] == "uid-image" and resp["allowed"] is True and len(vols) == 1
      and vols[0][0]["emptyDir"] == {"medium": "Memory", "sizeLimit": "33540Mi"}
      and {"name": "GPU_RUN_SHM_SIZE", "value": "1545m"} in [e for op in ops if op["path"].endswith("/env")
                                                            for e in op["value"]])
# imagenet, 8 GPUs, workers auto on 16 CPUs = 2: 1.25 * (8 * 4 * 38539264 + 1 GiB) -> 2751 MiB.
print(("ok - " if ok else "FAIL - ") + "an AdmissionReview is answered with a 1545Mi /dev/shm, sizeLimit the guard's "
      "ceiling, half of 64Gi + 1545Mi = 67081Mi: %s" % json.dumps(vols))
PYEOF
cat "$d/client.out"
IT_PASSED=$((IT_PASSED + $(grep -c '^ok - ' "$d/client.out")))
IT_FAILED=$((IT_FAILED + $(grep -c '^FAIL - ' "$d/client.out")))

logs=$(docker logs "$name" 2>&1)
assert_contains "$logs" "event=review uid=uid-image pod=ml/trainer outcome=patched size=1545Mi" \
  "the review is logged on the container's stderr"
assert_eq "true" "$(docker inspect -f '{{.HostConfig.ReadonlyRootfs}}' "$name")" "the root filesystem is read-only"
status=$(grep -E '^(Uid|CapEff|NoNewPrivs):' "/proc/$(docker inspect -f '{{.State.Pid}}' "$name")/status" | tr -s '\t ' ' ')
assert_contains "$status" "Uid: 65532 65532 65532 65532" "the server runs as 65532"
assert_contains "$status" "CapEff: 0000000000000000" "...with no capabilities"
assert_contains "$status" "NoNewPrivs: 1" "...and no_new_privs"

docker stop -t 10 "$name" >/dev/null
assert_eq 0 "$(docker inspect -f '{{.State.ExitCode}}' "$name")" "docker stop (SIGTERM): exit 0"
assert_contains "$(docker logs "$name" 2>&1)" "event=shutdown signal=SIGTERM" "...after a logged shutdown"
docker rm -f "$name" >/dev/null
docker rmi -f "$tag" >/dev/null
assert_eq "" "$(docker image ls -q "$tag")" "the image is removed"

it_done
