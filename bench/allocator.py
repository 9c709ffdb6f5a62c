"""Another allocator for the webpilot a bench starts, to compare how much memory each gives back:
`WEBPILOT_BENCH_ALLOCATOR=jemalloc` or `=mimalloc` preloads Debian's build (packages libjemalloc2,
libmimalloc2.0) into the service only; unset, the service runs on glibc's, as shipped.

jemalloc purges freed pages in a background thread after a second; mimalloc purges after 10 ms
by default. webpilot's own hand-back (malloc_trim) does nothing under either.
"""
from __future__ import annotations

import os

LIBRARIES = {
    "jemalloc": ("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
                 {"MALLOC_CONF": "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0"}),
    "mimalloc": ("/usr/lib/x86_64-linux-gnu/libmimalloc.so.2", {}),
}


def allocator_env() -> dict:
    """The environment that preloads the chosen allocator (empty for glibc's)."""
    name = os.environ.get("WEBPILOT_BENCH_ALLOCATOR", "glibc")
    if name == "glibc":
        return {}
    if name not in LIBRARIES:
        raise SystemExit(f"WEBPILOT_BENCH_ALLOCATOR: {name}? (glibc, jemalloc, mimalloc)")
    library, settings = LIBRARIES[name]
    if not os.path.exists(library):
        raise SystemExit(f"{library} is missing: apt-get install libjemalloc2 libmimalloc2.0")
    return {"LD_PRELOAD": library, **settings}
