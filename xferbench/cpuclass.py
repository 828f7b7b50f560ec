"""STAND-IN until the profile helper's classifier merges."""
from __future__ import annotations
import re
_ALLOC = re.compile(r"^(malloc|free|calloc|realloc|_int_malloc|_int_free|malloc_consolidate|tcache_.*|arena_.*|je_.*|mi_.*|_mi_.*|tcmalloc::.*|pool_.*|mem_alloc|mem_free|cfree|posix_memalign|__libc_malloc|__libc_free|operator new.*|operator delete.*|unlink_chunk.*)$")
def classify_frame(fn: str, obj: str) -> str:
    if _ALLOC.match(fn) or any(s in obj for s in ("jemalloc", "tcmalloc", "mimalloc")):
        return "allocator"
    return "other"
def shares_by_function(per_fn: dict[tuple[str, str], int], total: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for (fn, obj), n in per_fn.items():
        b = classify_frame(fn, obj)
        out[b] = out.get(b, 0.0) + n / total
    return out
