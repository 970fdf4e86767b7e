#!/usr/bin/env python3
"""Reads the includes of shim/, policy/ and tools/ and checks the layers.

    check_layers.py SOURCE_ROOT

The shim is built in layers (docs/architecture.md, "Modules and their
layers"): a file may include the project's headers of its own layer or
below, never one above. LAYERS below places every source file of shim/; a
file it does not name fails the check, so a new module is placed when it is
added. Besides:

- no project header includes itself through others (a cycle);
- the layers without CUDA (utilities and the registry, the library the unit
  tests link) include no CUDA header;
- policy/ is pure: its own headers, the C library and uthash only;
- tools/ read the shim only through the snapshot's ABI (shim/snapshot_abi.h)
  and the trace format (policy/trace.h): no other shim header, no CUDA.

Prints one line per violation. Exit status: 0 when every rule holds, 1 when
one does not, 2 on a usage error.
"""
import os
import re
import sys

UTILITIES, DRIVER, REGISTRY, ENGINE, INTERPOSITION, TOP = range(6)
LAYER_NAMES = ["utilities", "driver", "registry", "engine", "interposition", "top"]

# Every file of shim/ by its module's layer. The .def files are lists the
# driver and interposition layers expand (X macros): data, placed where
# their users are.
LAYERS = {
    UTILITIES: """internal.h log.c log.h config.c config.h cap.c cap.h host_pool.c host_pool.h
        host_memory.c host_memory.h spill_io.c spill_io.h spill.c spill.h content_hash.h snapshot_writer.c
        snapshot_writer.h snapshot_abi.h worker.c worker.h output_file.c output_file.h trace_writer.c
        trace_writer.h tunables.h""",
    DRIVER: "driver.c driver.h driver.def hooks.def pool_usage.c pool_usage.h",
    REGISTRY: "registry.c registry.h registry_index.c registry_index.h registry_lock.c registry_lock.h stamp_log.c stamp_log.h",
    ENGINE: """offload.h offload_internal.h offload_device.h offload_streams.h offload_tier.h offload_prefetch.h
        offload.c offload_alloc.c offload_arrive.c offload_device.c offload_partial.c offload_premap.c offload_context.c offload_evict.c
        offload_meter.c offload_ops.c offload_policy.c offload_prefetch.c offload_retire.c offload_streams.c
        offload_tier.c device_hash.c device_hash.h pool_async.c pool_async.h""",
    INTERPOSITION: """hooks.h hooks_copy.c hooks_graph.c hooks_launch.c hooks_memop.c hooks_memory.c hooks_context.c
        hooks_nccl.c hooks_vmm.c nccl.def nccl_api.h runtime.c resolve.c resolve.h launch.c launch.h stats.c
        stats.h publish.c publish.h""",
    TOP: "shim.c",
}
POLICY_HEADERS = {"policy.h", "policy_internal.h", "trace.h", "heap.h", "predict.h", "schedule.h"}
NO_CUDA_LAYERS = {UTILITIES, REGISTRY}
CUDA_HEADER = re.compile(r"^(cuda|cudaTypedefs|cuda_runtime|cuda_runtime_api|driver_types|nvrtc)\.h$")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
SOURCE = re.compile(r"\.(c|h|def)$")


def includes(path):
    """The (quoted, name) pairs `path` includes, comments aside."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return [(m.group(1) == '"', os.path.basename(m.group(2))) for m in INCLUDE.finditer(text)]


def check(root):
    failures = []
    layer_of = {}
    for layer, names in LAYERS.items():
        for name in names.split():
            layer_of[name] = layer

    shim = os.path.join(root, "shim")
    files = sorted(f for f in os.listdir(shim) if SOURCE.search(f))
    graph = {}
    for name in files:
        if name not in layer_of:
            failures.append(f"shim/{name}: not placed in a layer (tests/unit/check_layers.py, LAYERS)")
            continue
        own = layer_of[name]
        graph[name] = []
        for quoted, inc in includes(os.path.join(shim, name)):
            if not quoted:
                if own in NO_CUDA_LAYERS and CUDA_HEADER.match(inc):
                    failures.append(f"shim/{name} ({LAYER_NAMES[own]}, no CUDA) includes <{inc}>")
                continue
            if inc in POLICY_HEADERS:
                continue  # the pure policy: below every layer
            if inc not in layer_of:
                failures.append(f"shim/{name} includes \"{inc}\", which is not a placed file of shim/")
                continue
            graph[name].append(inc)
            if layer_of[inc] > own:
                failures.append(f"shim/{name} ({LAYER_NAMES[own]}) includes \"{inc}\" from the layer above "
                                f"({LAYER_NAMES[layer_of[inc]]})")
            if own in NO_CUDA_LAYERS and CUDA_HEADER.match(inc):
                failures.append(f"shim/{name} ({LAYER_NAMES[own]}, no CUDA) includes \"{inc}\"")
    for name in layer_of:
        if name not in files:
            failures.append(f"LAYERS places shim/{name}, which does not exist")

    failures += cycles(graph)

    policy = os.path.join(root, "policy")
    for name in sorted(f for f in os.listdir(policy) if SOURCE.search(f)):
        for quoted, inc in includes(os.path.join(policy, name)):
            if quoted and inc not in POLICY_HEADERS:
                failures.append(f"policy/{name} includes \"{inc}\": the policy includes its own headers only")
            if not quoted and (CUDA_HEADER.match(inc) or inc in layer_of):
                failures.append(f"policy/{name} includes <{inc}>: the policy is pure C, without CUDA")

    tools = os.path.join(root, "tools")
    own_tools = {f for f in os.listdir(tools) if f.endswith(".h")}
    for name in sorted(f for f in os.listdir(tools) if SOURCE.search(f)):
        for quoted, inc in includes(os.path.join(tools, name)):
            if CUDA_HEADER.match(inc):
                failures.append(f"tools/{name} includes {inc}: the tools run without CUDA")
            elif quoted and inc not in own_tools and inc not in ("snapshot_abi.h", "trace.h"):
                failures.append(f"tools/{name} includes \"{inc}\": the tools read the shim only through "
                                "snapshot_abi.h and trace.h")
    return failures


def cycles(graph):
    """One line per cycle of includes among the shim's files."""
    found, state = [], {}

    def visit(name, path):
        state[name] = "open"
        for inc in graph.get(name, []):
            if state.get(inc) == "open":
                found.append("include cycle: " + " -> ".join(path[path.index(inc):] + [inc]))
            elif inc not in state:
                visit(inc, path + [inc])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    return found


def main():
    if len(sys.argv) != 2 or not os.path.isdir(os.path.join(sys.argv[1], "shim")):
        print("usage: check_layers.py SOURCE_ROOT (the directory holding shim/, policy/ and tools/)",
              file=sys.stderr)
        return 2
    failures = check(sys.argv[1])
    for failure in failures:
        print("FAIL:", failure)
    if not failures:
        print("layers ok: every include of shim/ is of its layer or below, no cycle; policy/ and tools/ apart")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
