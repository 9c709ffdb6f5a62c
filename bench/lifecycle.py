"""What the long benches share at their ends: a run that, on Ctrl-C or SIGTERM, lets its own
cleanup stop what it started before exiting 130, its result written as JSON; and the stop of a
webpilot started in a process group of its own (Chromium with it)."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys


def run_and_save(run, out: str, interrupted: str):
    """`run()`'s result, written to `out`; `interrupted` is logged when it was stopped."""
    def stop(*_):   # SIGTERM unwinds like Ctrl-C, through the bench's own `finally`
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)  # also where it was inherited ignored (a background job)
    try:
        result = run()
    except KeyboardInterrupt:
        print(interrupted, file=sys.stderr, flush=True)
        sys.exit(130)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as file:
        json.dump(result, file, indent=1)
    return result


def stop_webpilot(proc: subprocess.Popen, grace_s: float = 15):
    """Asks webpilot to stop, then kills its process group: webpilot if it hung, and any
    Chromium left over."""
    proc.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
