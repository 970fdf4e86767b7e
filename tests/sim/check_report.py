#!/usr/bin/env python3
"""The simulated driver's report matches what a program did.

Runs a test client (tests/clients) with SIMCUDA_REPORT set and checks every
figure of the report against what the client's workload is known to do:
kernels launched, bytes copied each way, device memory peak and use at exit,
the per-entry-point call counts, and (with the virtual clock) the modeled time.

    check_report.py CLIENT [--per-thread-symbols]
"""
import json
import os
import subprocess
import sys
import tempfile

BUFFERS, MIB, ROUNDS, STREAMS = 5, 2, 3, 3


def main():
    client = sys.argv[1]
    per_thread = "--per-thread-symbols" in sys.argv[2:]
    extra = [a for a in sys.argv[2:] if a != "--per-thread-symbols"]
    buffer_bytes = MIB << 20
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "report.json")
        env = dict(os.environ, SIMCUDA_REPORT=path, SIMCUDA_CLOCK="virtual", SIMCUDA_DEVICE_MEM="256M")
        run = subprocess.run([client, *extra, "--buffers", str(BUFFERS), "--mib", str(MIB), "--rounds",
                              str(ROUNDS), "--streams", str(STREAMS)], env=env, capture_output=True, text=True)
        print(run.stdout, end="")
        if run.returncode != 0:
            print(run.stderr, end="")
            return 1
        with open(path) as f:
            report = json.load(f)

    # The workload (tests/clients/client_workload.c): every round fills and
    # checksums each buffer and reads the checksums back; then one host
    # pattern goes in, the other buffers are filled again, the pattern comes
    # back out.
    kernels = ROUNDS * 2 * BUFFERS + (BUFFERS - 1)
    results_bytes = BUFFERS * 8
    expected = {
        "kernels": kernels,
        "htod": buffer_bytes,
        "dtoh": ROUNDS * results_bytes + buffer_bytes,
        "dtod": 0,
        "peak": BUFFERS * buffer_bytes + results_bytes,
        "used": 0,
    }
    device = report["devices"][0]
    seen = {
        "kernels": report["kernels"],
        "htod": report["copied"]["htod"],
        "dtoh": report["copied"]["dtoh"],
        "dtod": report["copied"]["dtod"],
        "peak": device["peak_bytes"],
        "used": device["used_bytes"],
    }
    failures = [f"{k}: report says {seen[k]}, the program did {v}" for k, v in expected.items() if seen[k] != v]

    launch = "cuLaunchKernel_ptsz" if per_thread else "cuLaunchKernel"
    calls = report["calls"]
    if calls.get(launch) != kernels:
        failures.append(f"calls[{launch}] = {calls.get(launch)}, the program launched {kernels}")
    if calls.get("cuMemAlloc_v2") != BUFFERS + 1:
        failures.append(f"calls[cuMemAlloc_v2] = {calls.get('cuMemAlloc_v2')}, expected {BUFFERS + 1}")
    if calls.get("cuMemFree_v2") != BUFFERS + 1:
        failures.append(f"calls[cuMemFree_v2] = {calls.get('cuMemFree_v2')}, expected {BUFFERS + 1}")
    if device["total_bytes"] != 256 << 20:
        failures.append(f"total_bytes {device['total_bytes']}")
    # Two copies of 2 MiB at 50 GB/s alone take 83,886 ns of modeled time.
    if not report["modeled_ns"] >= 2 * buffer_bytes * 1e9 / 50e9:
        failures.append(f"modeled_ns {report['modeled_ns']} is shorter than the copies alone")
    # The clock's own figures: the default host costs, the compute engine's
    # busy time within the run, the idle fraction from them, and the host
    # time every call of the client was charged.
    clock = report["clock"]
    engines = clock["engines"][0]
    if clock["host_costs"] != "default" or clock["modeled_ns"] != report["modeled_ns"]:
        failures.append(f"clock {clock['host_costs']!r}, modeled {clock['modeled_ns']}")
    if not 0 < engines["compute_busy_ns"] <= clock["modeled_ns"]:
        failures.append(f"compute_busy_ns {engines['compute_busy_ns']} outside the run")
    if abs(engines["gpu_idle_fraction"] - (1 - engines["compute_busy_ns"] / clock["modeled_ns"])) > 1e-6:
        failures.append(f"gpu_idle_fraction {engines['gpu_idle_fraction']} is not 1 - busy / modeled")
    threads = clock["host_threads"]
    if sum(t["calls"] for t in threads) + clock["ended_threads"]["calls"] != sum(calls.values()):
        failures.append("the host clocks were not charged for every call the report counts")
    if report["faults_injected"] != 0:
        failures.append(f"faults_injected {report['faults_injected']}")
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print(f"report matches: {kernels} kernels, htod {seen['htod']}, dtoh {seen['dtoh']}, "
              f"peak {seen['peak']}, modeled {report['modeled_ns']} ns")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
