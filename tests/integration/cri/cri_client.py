#!/usr/bin/python3
"""A small CRI v1 client for gpu-run's containerd tests and bench, driving containerd as the
kubelet does (RunPodSandbox, CreateContainer, StartContainer, ExecSync).

The Python stubs are generated from api.proto (next to this file) into a temporary directory
at start with grpc_tools.protoc; nothing generated is kept.

  cri_client.py SOCK version
  cri_client.py SOCK pod --name N [--handler H] [--annotations JSON|@FILE] [--host-ipc]
                         [--containers K] [--image IMG] [--memory BYTES] [--device HOST[:CONTAINER]]... [--env K=V]...
                         [--mount HOST:CONTAINER]... [--cgroup-parent CGROUP]
      prints {"pod": ID, "containers": [ID...]}; a CRI error: one line on stderr, exit 1
  cri_client.py SOCK exec CONTAINER CMD...   the command's stdout; its exit code
  cri_client.py SOCK rm-pod ID...
  cri_client.py SOCK bench --image IMG --n N [--handlers a,b] [--annotations JSON]
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid

import grpc
from grpc_tools import protoc

HERE = os.path.dirname(os.path.abspath(__file__))


def load_stubs():
    out = tempfile.mkdtemp(prefix="gpu-run-cri-")
    rc = protoc.main(["protoc", "-I" + HERE, "--python_out=" + out, "--grpc_python_out=" + out,
                      os.path.join(HERE, "api.proto")])
    if rc != 0:
        sys.exit("cri_client: protoc failed on " + os.path.join(HERE, "api.proto"))
    sys.path.insert(0, out)
    sys.dont_write_bytecode = True
    try:
        import api_pb2
        import api_pb2_grpc
    finally:
        sys.path.remove(out)
        shutil.rmtree(out, ignore_errors=True)
    return api_pb2, api_pb2_grpc


pb, pb_grpc = load_stubs()


class CriError(Exception):
    pass


class Cri:
    def __init__(self, sock):
        self.channel = grpc.insecure_channel("unix://" + sock, options=[
            ("grpc.max_send_message_length", 16 << 20), ("grpc.max_receive_message_length", 16 << 20)])
        self.rt = pb_grpc.RuntimeServiceStub(self.channel)
        self.img = pb_grpc.ImageServiceStub(self.channel)

    def call(self, stub, name, req, timeout=120):
        try:
            return getattr(stub, name)(req, timeout=timeout)
        except grpc.RpcError as e:
            raise CriError("%s: %s: %s" % (name, e.code().name, e.details()))

    def sandbox_config(self, name, annotations, host_ipc, cgroup_parent=""):
        ns = pb.NamespaceOption(network=pb.NODE, pid=pb.CONTAINER, ipc=pb.NODE if host_ipc else pb.POD)
        return pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=name, uid=str(uuid.uuid4()), namespace="gpu-run-test"),
            hostname="", annotations=annotations,
            linux=pb.LinuxPodSandboxConfig(cgroup_parent=cgroup_parent,
                                           security_context=pb.LinuxSandboxSecurityContext(namespace_options=ns)))

    def run_pod(self, name, handler, annotations, host_ipc=False, cgroup_parent=""):
        cfg = self.sandbox_config(name, annotations, host_ipc, cgroup_parent)
        resp = self.call(self.rt, "RunPodSandbox", pb.RunPodSandboxRequest(config=cfg, runtime_handler=handler))
        return resp.pod_sandbox_id, cfg

    def create_start(self, pod_id, cfg, name, image, memory=0, devices=(), host_ipc=False, env=(), mounts=()):
        ns = pb.NamespaceOption(network=pb.NODE, pid=pb.CONTAINER, ipc=pb.NODE if host_ipc else pb.POD)
        linux = pb.LinuxContainerConfig(
            resources=pb.LinuxContainerResources(memory_limit_in_bytes=memory),
            security_context=pb.LinuxContainerSecurityContext(namespace_options=ns))
        ccfg = pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name=name), image=pb.ImageSpec(image=image),
            command=["/bin/sleep", "1000000"], linux=linux,
            envs=[pb.KeyValue(key=k, value=v) for k, v in (e.split("=", 1) for e in env)],
            mounts=[pb.Mount(host_path=h, container_path=c) for h, c in (m.split(":", 1) for m in mounts)],
            devices=[pb.Device(host_path=d.split(":", 1)[0], container_path=d.split(":", 1)[-1], permissions="rw")
                     for d in devices])
        cid = self.call(self.rt, "CreateContainer",
                        pb.CreateContainerRequest(pod_sandbox_id=pod_id, config=ccfg, sandbox_config=cfg)).container_id
        self.call(self.rt, "StartContainer", pb.StartContainerRequest(container_id=cid))
        return cid

    def rm_pod(self, pod_id):
        self.call(self.rt, "StopPodSandbox", pb.StopPodSandboxRequest(pod_sandbox_id=pod_id))
        self.call(self.rt, "RemovePodSandbox", pb.RemovePodSandboxRequest(pod_sandbox_id=pod_id))


def parse_annotations(text):
    if not text:
        return {}
    if text.startswith("@"):
        with open(text[1:], encoding="utf-8") as f:
            text = f.read()
    value = json.loads(text)
    if not isinstance(value, dict):
        raise SystemExit("cri_client: --annotations must be a JSON object")
    return {str(k): str(v) for k, v in value.items()}


def cmd_pod(cri, a):
    pod_id, cfg = cri.run_pod(a.name, a.handler, parse_annotations(a.annotations), a.host_ipc, a.cgroup_parent)
    ids = []
    try:
        for i in range(a.containers):
            ids.append(cri.create_start(pod_id, cfg, "c%d" % i, a.image, a.memory, a.device, a.host_ipc, a.env, a.mount))
    except CriError:
        try:
            cri.rm_pod(pod_id)
        except CriError:
            pass
        raise
    print(json.dumps({"pod": pod_id, "containers": ids}))


def cmd_exec(cri, a):
    r = cri.call(cri.rt, "ExecSync", pb.ExecSyncRequest(container_id=a.container, cmd=a.cmd, timeout=60))
    sys.stdout.write(r.stdout.decode(errors="replace"))
    sys.stderr.write(r.stderr.decode(errors="replace"))
    return r.exit_code


def percentile(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p * (len(s) - 1))))]


def cmd_bench(cri, a):
    handlers = a.handlers.split(",")
    annotations = parse_annotations(a.annotations)
    times = {h: [] for h in handlers}
    for i in range(a.n + a.warmup):
        # Interleaved, the order alternating each round, so drift hits both handlers alike.
        order = handlers if i % 2 == 0 else list(reversed(handlers))
        for h in order:
            t0 = time.perf_counter()
            pod_id, cfg = cri.run_pod("bench-%s-%d" % (h, i), h, annotations)
            cri.create_start(pod_id, cfg, "c0", a.image)
            dt = time.perf_counter() - t0
            cri.rm_pod(pod_id)
            if i >= a.warmup:
                times[h].append(dt * 1000)
    base = handlers[0]
    result = {"n": a.n, "annotations": annotations, "handlers": {}}
    for h in handlers:
        med, p90 = statistics.median(times[h]), percentile(times[h], 0.9)
        result["handlers"][h] = {"median_ms": round(med, 1), "p90_ms": round(p90, 1)}
    for h in handlers[1:]:
        r = result["handlers"]
        r[h]["median_ratio"] = round(r[h]["median_ms"] / r[base]["median_ms"], 3)
        r[h]["p90_ratio"] = round(r[h]["p90_ms"] / r[base]["p90_ms"], 3)
    print(json.dumps(result))


def main():
    p = argparse.ArgumentParser(prog="cri_client.py")
    p.add_argument("sock")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("version")
    q = sub.add_parser("pod")
    q.add_argument("--name", required=True)
    q.add_argument("--handler", default="")
    q.add_argument("--annotations", default="")
    q.add_argument("--host-ipc", action="store_true")
    q.add_argument("--containers", type=int, default=1)
    q.add_argument("--image", default="docker.io/gpurun/busybox:test")
    q.add_argument("--memory", type=int, default=0)
    q.add_argument("--device", action="append", default=[], help="HOST[:CONTAINER] in every app container")
    q.add_argument("--env", action="append", default=[], help="K=V in every app container")
    q.add_argument("--mount", action="append", default=[], help="HOST:CONTAINER in every app container")
    q.add_argument("--cgroup-parent", default="", help="the pod's cgroup (linux.cgroup_parent), as the kubelet sets it")
    q = sub.add_parser("exec")
    q.add_argument("container")
    q.add_argument("cmd", nargs=argparse.REMAINDER)
    q = sub.add_parser("rm-pod")
    q.add_argument("ids", nargs="+")
    q = sub.add_parser("bench")
    q.add_argument("--image", default="docker.io/gpurun/busybox:test")
    q.add_argument("--handlers", default="runc,gpu-run")
    q.add_argument("--annotations", default="")
    q.add_argument("--n", type=int, default=20)
    q.add_argument("--warmup", type=int, default=2)
    a = p.parse_args()
    cri = Cri(a.sock)
    try:
        if a.command == "version":
            r = cri.call(cri.rt, "Version", pb.VersionRequest(version="v1"))
            print(r.runtime_name, r.runtime_version, r.runtime_api_version)
        elif a.command == "pod":
            cmd_pod(cri, a)
        elif a.command == "exec":
            return cmd_exec(cri, a)
        elif a.command == "rm-pod":
            for i in a.ids:
                cri.rm_pod(i)
        elif a.command == "bench":
            cmd_bench(cri, a)
    except CriError as e:
        print("CRI error: " + str(e).replace("\n", " "), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
