"""Which bucket of server CPU a sampled stack belongs to: the one table of rules, and the shares of a profile.

A stack is a list of frames, outermost first, each "symbol (object)" — the folded-stack format that
perf.py and gopprof.py write. The innermost frame that matches a rule decides the bucket, so a memcpy
inside protobuf-c's unpack counts as `copy`, and malloc called from it as `allocator`; a stack no rule
matches is `other`. Rules are tried in table order within one frame, so a more specific rule (the Go
runtime's allocator locks) sits above a general one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

BUCKETS = ("allocator", "gc", "copy", "checksum", "protobuf", "syscall+net", "locks", "other")

# (bucket, what the pattern is matched against: "sym" the symbol or "obj" the shared object's file name,
# pattern as a regular expression searched from the start of the text).
RULES: tuple[tuple[str, str, str], ...] = (
    # --- allocator: the libraries by their object, then the symbols of malloc & co, the built-in pool, Go's
    ("allocator", "obj", r"libjemalloc|libtcmalloc|libmimalloc"),
    ("allocator", "sym", r"(__libc_|__)?(malloc|free|realloc|calloc|posix_memalign|aligned_alloc|memalign|valloc|"
                         r"pvalloc|cfree)(@.*)?$"),
    ("allocator", "sym", r"_int_(malloc|free|realloc|memalign)|malloc_consolidate|arena_get|tcache_|"
                         r"_mid_memalign|sysmalloc|unlink_chunk|__default_morecore|alloc_perturb|"
                         r"malloc_printerr|free_perturb|_int_free_merge_chunk|_int_free_create_chunk"),
    ("allocator", "sym", r"(je_|mi_|_mi_|tc_|tcmalloc::)"),
    # Any program's: glibc's trimming and heap growth, C++'s operator new/delete (demangled or not, the
    # frame of their own code before malloc; a statically linked jemalloc or tcmalloc has the prefixes above),
    # CPython's own allocator in front of malloc (a Python server's small objects never reach malloc)
    ("allocator", "sym", r"(munmap_chunk|mremap_chunk|systrim|heap_trim|grow_heap|shrink_heap|new_heap|"
                         r"alloc_new_heap|malloc_trim|__malloc_\w+)$|operator (new|delete)|_Z(nw|na|dl|da)[a-zA-Z]|"
                         r"_?Py(Object|Mem)_(Raw)?(Malloc|Calloc|Realloc|Free)\w*$|pymalloc_\w+|_PyObject_(Malloc|Free)"),
    ("allocator", "sym", r"(pool_|mem_)(alloc|calloc|free|thread_flush)$|pb_alloc$|pb_free$|"
                         r"(cache_get|local_put|drain_remote|flush_batch|size_class|class_block|class_cap)$"),
    ("allocator", "sym", r"runtime\.(mallocgc|mallocgc\w*|newobject|newarray|makeslice\w*|growslice|rawstring\w*|"
                         r"rawbyteslice|rawruneslice|concatstring\w*|slicebytetostring|makemap\w*|"
                         r"nextFreeFast|memclrNoHeapPointersChunked|heapSetType\w*|"
                         r"\(\*mcache\)\.\w+|\(\*mcentral\)\.\w+|\(\*mheap\)\.(alloc\w*|grow|allocSpan|"
                         r"allocManual|freeSpan\w*)|\(\*pageAlloc\)\.\w+|\(\*mspan\)\.(nextFreeIndex|init|"
                         r"refillAllocCache|initHeapBits)|\(\*fixalloc\)\.\w+|largeAlloc|mProf_Malloc|"
                         r"profilealloc|deductAssistCredit|publicationBarrier)$"),
    # --- gc: Go's collector (mark workers, assists, sweeping, write barriers)
    ("gc", "sym", r"runtime\.(gcBgMarkWorker|gcDrain\w*|gcAssist\w*|markroot\w*|scanobject|scanblock|scanstack|"
                  r"scanframeworker|greyobject|findObject|gcMarkDone|gcMarkTermination|gcStart|gcSweep|"
                  r"bgsweep|bgscavenge|sweepone|wbBufFlush\w*|gcWriteBarrier\w*|"
                  r"\(\*gcWork\)\.\w+|\(\*gcControllerState\)\.\w+|\(\*mspan\)\.(sweep|markBitsForIndex)|"
                  r"\(\*sweepLocked\)\.sweep|\(\*sweepLocker\)\.\w+|\(\*scavengerState\)\.\w+|"
                  r"\(\*mheap\)\.(reclaim\w*|nextSpanForSweep)|typePointers\w*|\(\*typePointers\)\.\w+|"
                  r"scanConservative|markBits\w*|gcenable|gcBgMarkStartWorkers|gcMark|gcResetMarkState|scanObject|"
                  r"tryDeferToSpanScan|\(\*spanInlineMarkBits\)\.\w+|\(\*mspan\)\.scan\w*)$|"
                  r"internal/runtime/gc/"),
    # --- copy: memcpy/memmove in C and Go, the kernel's copies to and from user memory
    ("copy", "sym", r"(__)?(memcpy|memmove|mempcpy)\w*$|__memmove_\w+|__memcpy_\w+|copy_user_\w+|"
                    r"_copy_(to|from)_user|copy_(to|from)_user|rep_movs_alternative|copyin|copyout|"
                    r"runtime\.memmove$|runtime\.typedmemmove$|runtime\.typedslicecopy$|"
                    r"skb_copy_datagram_\w+|_copy_to_iter|_copy_from_iter\w*|copy_page_(to|from)_iter"),
    # --- checksum: CRC-32 in every form the servers use
    ("checksum", "sym", r"crc32\w*|libdeflate_crc32\w*|crc32_\w+|hash/crc32\.\w+|"
                        r"(hash/crc32|crc32)\.(update\w*|ieee\w*|castagnoli\w*|Update|Checksum|ChecksumIEEE|"
                        r"simpleUpdate|slicingUpdate)|xfer_crc\w*|gen_crc\w*|blk_crc\w*"),
    ("checksum", "obj", r"libdeflate|libz\.so"),
    # --- protobuf: protobuf-c, Go's protobuf, and our own wire decoders
    ("protobuf", "obj", r"libprotobuf-c"),
    ("protobuf", "sym", r"protobuf_c_\w+|pbwire_\w+|reqbody_\w+|reqhdr_\w+|"
                        r"google\.golang\.org/protobuf/|github\.com/golang/protobuf/|"
                        r"google\.golang\.org/grpc/encoding/proto\."),
    # --- locks: futexes and mutexes (before syscall+net: a futex is a system call too)
    ("locks", "sym", r"(__)?futex\w*|do_futex|_*lll_\w+|_*pthread_mutex_\w+|"
                     r"pthread_cond_\w+|__pthread_cond_\w+|pthread_rwlock_\w+|pthread_spin_\w+|"
                     r"sync\.\(\*(Mutex|RWMutex|Cond|Once|WaitGroup)\)\.\w+|sync\.runtime_\w+|"
                     r"runtime\.(lock2|unlock2|lock|unlock|lockWithRank|unlockWithRank|futex\w*|"
                     r"semacquire\w*|semrelease\w*|notesleep|notewakeup|\(\*semaRoot\)\.\w+)$|"
                     r"internal/sync\.\w+|sync/atomic\."),
    # --- syscall+net: the kernel's socket, TCP and epoll paths, syscall entry, Go's poller and net.Conn
    ("syscall+net", "sym", r"(__)?(sys_|__x64_sys_|__do_sys_|do_syscall_\w+|entry_SYSCALL\w*|syscall_\w+)|"
                           r"tcp_\w+|__tcp_\w+|inet_\w+|sock_\w+|__sock_\w+|sk_\w+|__sk_\w+|skb_\w+|__skb_\w+|"
                           r"ip_\w+|__ip_\w+|ipv4_\w+|__netif_\w+|netif_\w+|net_rx_\w+|__dev_queue_\w+|"
                           r"dev_hard_start_xmit|loopback_xmit|process_backlog|__napi_\w+|napi_\w+|"
                           r"(ep_|__ep_|do_epoll_|epoll_)\w*|__x64_sys_epoll\w*|"
                           r"(__libc_)?(send|recv|sendmsg|recvmsg|sendto|recvfrom|read|write|readv|writev|"
                           r"accept4?|epoll_wait|epoll_ctl|epoll_pwait|poll|ppoll|close|shutdown)(@.*)?$|"
                           r"__(send|recv|read|write)\w*|"
                           r"syscall\.\w+|internal/runtime/syscall\.\w+|internal/poll\.\w+|"
                           r"internal/poll\.\(\*\w+\)\.\w+|net\.\(\*conn\)\.\w+|net\.\(\*netFD\)\.\w+|"
                           r"net\.\(\*TCPConn\)\.\w+|runtime\.(netpoll\w*|entersyscall\w*|exitsyscall\w*)$"),
)


@dataclass(frozen=True)
class _Rule:
    bucket: str
    on_object: bool
    pattern: re.Pattern[str]


_COMPILED = tuple(_Rule(b, kind == "obj", re.compile(p)) for b, kind, p in RULES)
_FRAME_RE = re.compile(r"^(?P<sym>.*?)(?: \((?P<obj>[^()]*)\))?$")


def split_frame(frame: str) -> tuple[str, str]:
    """ "symbol (object)" → (symbol, object); a frame without an object has "" as object."""
    m = _FRAME_RE.match(frame)
    assert m is not None  # the pattern matches any text
    return m.group("sym"), m.group("obj") or ""


def frame_bucket(frame: str) -> str | None:
    """The bucket of the first rule one frame matches, or None."""
    sym, obj = split_frame(frame)
    sym = sym.removeprefix("__GI_")  # glibc's internal aliases: __GI___libc_free is __libc_free
    for rule in _COMPILED:
        if rule.pattern.match(obj if rule.on_object else sym):
            return rule.bucket
    return None


def classify(frames: Iterable[str]) -> str:
    """The bucket of a stack given outermost first: its innermost frame that matches a rule decides."""
    for frame in reversed(list(frames)):
        bucket = frame_bucket(frame)
        if bucket is not None:
            return bucket
    return "other"


@dataclass(frozen=True)
class Attribution:
    """A profile's samples per bucket; `to_json` is runs.jsonl's cpu_profile."""

    samples: int
    counts: Mapping[str, int]

    @property
    def shares(self) -> dict[str, float]:
        n = self.samples
        return {b: (self.counts.get(b, 0) / n if n else 0.0) for b in BUCKETS}

    def to_json(self) -> dict[str, object]:
        """All shares 0 when there are no samples: the only case where they do not sum to 1."""
        return {"samples": self.samples, "shares": {b: round(v, 6) for b, v in self.shares.items()}}


def attribute(folded: Mapping[str, int]) -> Attribution:
    """Every sample of a folded profile ("a;b;c" → count) into its bucket."""
    counts = dict.fromkeys(BUCKETS, 0)
    for stack, n in folded.items():
        counts[classify(stack.split(";"))] += n
    return Attribution(sum(counts.values()), counts)


def parse_folded(text: str) -> dict[str, int]:
    """Folded stacks ("root;...;leaf COUNT" per line) into a dict; raises ValueError naming a bad line."""
    out: dict[str, int] = {}
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            raise ValueError(f"folded stacks, line {i}: expected 'frame;frame;... COUNT', got {line[:120]!r}")
        out[stack] = out.get(stack, 0) + int(count)
    return out


def format_folded(folded: Mapping[str, int]) -> str:
    return "".join(f"{stack} {n}\n" for stack, n in sorted(folded.items()))
