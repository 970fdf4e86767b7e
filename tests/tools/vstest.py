"""vstest.py: what the Python tests of the `vramshim` command share
(test_cli.py, test_observe.py, test_install.py): assertions that say what
failed, the error-message check, and a runner that runs every `test_*`
function of a module and reports each failure, not just the first."""
import time


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def expect_error(result, message, status=1):
    """`result` (a CompletedProcess) exited with `status` and said `message` on stderr."""
    check(result.returncode == status,
          f"exit status {result.returncode}, expected {status}; stderr: {result.stderr!r}")
    check(message in result.stderr, f"stderr {result.stderr!r} lacks {message!r}")


def run_tests(namespace, failures):
    """Runs every callable `test_*` in `namespace` in order; appends the names
    of those that fail to `failures`. Returns the exit status: 0 or 1."""
    tests = [(n, f) for n, f in namespace.items() if n.startswith("test_") and callable(f)]
    for name, fn in tests:
        print(f"{name} ...", flush=True)
        t0 = time.time()
        try:
            fn()
            print(f"  ok ({time.time() - t0:.1f}s)", flush=True)
        except Exception as e:  # report every failing test, not just the first
            failures.append(name)
            print(f"  FAILED: {type(e).__name__}: {e}", flush=True)
    print(f"{len(tests) - len(failures)}/{len(tests)} passed")
    return 1 if failures else 0
