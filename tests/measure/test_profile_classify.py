"""The CPU-attribution classifier (xferbench/measure/profile/classify.py) on hand-written folded stacks: the
innermost matching frame decides, every bucket has a stack that lands in it, and shares sum to 1."""

from __future__ import annotations

import pytest

from xferbench.measure.profile import perf
from xferbench.measure.profile.classify import BUCKETS, attribute, classify, parse_folded

LIBC = "(libc.so.6)"
XC = "(xferd-c)"
GO = "(xferd-go)"

CASES = [
    # C: glibc's malloc internals, under a handler
    (f"main {XC};worker_loop {XC};handle_upload {XC};mem_alloc {XC};malloc {LIBC};_int_malloc {LIBC}", "allocator"),
    (f"main {XC};handle_upload {XC};free {LIBC};_int_free {LIBC}", "allocator"),
    (f"main {XC};malloc_consolidate {LIBC}", "allocator"),
    # a preloaded allocator by its library, whatever the symbol
    ("main (xferd-c);je_malloc_default (libjemalloc.so.2)", "allocator"),
    ("main (xferd-c);[unknown] (libtcmalloc_minimal.so.4.5.9)", "allocator"),
    ("main (xferd-c);mi_free (libmimalloc.so.2.0)", "allocator"),
    # xferd-c's own pool
    (f"main {XC};handle_upload {XC};mem_alloc {XC};pool_alloc {XC}", "allocator"),
    (f"main {XC};pool_free {XC}", "allocator"),
    # innermost decides: memcpy inside protobuf-c's unpack is copy; malloc inside it is allocator
    (f"main {XC};protobuf_c_message_unpack (libprotobuf-c.so.1);__memmove_avx_unaligned_erms {LIBC}", "copy"),
    (f"main {XC};protobuf_c_message_unpack (libprotobuf-c.so.1);pb_alloc {XC};malloc {LIBC}", "allocator"),
    (f"main {XC};protobuf_c_message_unpack (libprotobuf-c.so.1);parse_required_member (libprotobuf-c.so.1)",
     "protobuf"),
    (f"main {XC};handle_upload {XC};libdeflate_crc32 (libdeflate.so.0)", "checksum"),
    (f"main {XC};handle_upload {XC};crc32_z (libz.so.1)", "checksum"),
    (f"main {XC};reqbody_decode {XC}", "protobuf"),
    # the kernel: named frames under a libc wrapper; unnamed kernel frames fall back to the wrapper
    (f"main {XC};__libc_recv {LIBC};entry_SYSCALL_64 ([kernel.kallsyms]);tcp_recvmsg ([kernel.kallsyms])",
     "syscall+net"),
    (f"main {XC};__libc_recv {LIBC};[unknown] ([kernel.kallsyms])", "syscall+net"),
    (f"main {XC};epoll_wait {LIBC}", "syscall+net"),
    (f"main {XC};__lll_lock_wait {LIBC};[unknown] ([kernel.kallsyms])", "locks"),
    (f"main {XC};pthread_mutex_lock {LIBC}", "locks"),
    (f"main {XC};copy_user_enhanced_fast_string ([kernel.kallsyms])", "copy"),
    (f"main {XC};handle_echo {XC}", "other"),
    ("[unknown] ([unknown])", "other"),
    # Go
    (f"runtime.goexit {GO};main.handle {GO};runtime.makeslice {GO};runtime.mallocgc {GO};"
     f"runtime.memclrNoHeapPointers {GO}", "allocator"),
    (f"runtime.goexit {GO};runtime.(*mcache).refill {GO};runtime.(*mcentral).cacheSpan {GO}", "allocator"),
    (f"runtime.goexit {GO};runtime.gcBgMarkWorker {GO};runtime.gcDrain {GO};runtime.scanobject {GO};"
     f"runtime.findObject {GO}", "gc"),
    (f"runtime.goexit {GO};runtime.mallocgc {GO};runtime.gcAssistAlloc {GO};runtime.gcDrainN {GO}", "gc"),
    (f"runtime.goexit {GO};main.handle {GO};runtime.memmove {GO}", "copy"),
    (f"runtime.goexit {GO};hash/crc32.Update {GO};hash/crc32.ieeeCLMUL {GO}", "checksum"),
    (f"runtime.goexit {GO};google.golang.org/protobuf/internal/impl.(*MessageInfo).unmarshalPointer {GO}",
     "protobuf"),
    (f"runtime.goexit {GO};net.(*conn).Read {GO};internal/poll.(*FD).Read {GO};syscall.Syscall {GO};"
     f"internal/runtime/syscall.Syscall6 {GO}", "syscall+net"),
    (f"runtime.mcall {GO};runtime.park_m {GO};runtime.schedule {GO};runtime.findRunnable {GO};"
     f"runtime.netpoll {GO}", "syscall+net"),
    (f"runtime.goexit {GO};sync.(*Mutex).Lock {GO};sync.(*Mutex).lockSlow {GO}", "locks"),
    (f"runtime.goexit {GO};runtime.mallocgc {GO};runtime.lock2 {GO};runtime.futex {GO}", "locks"),
    (f"runtime.goexit {GO};xferbench/servers/go/internal/store.(*Store).Put {GO}", "other"),
]


@pytest.mark.parametrize(("stack", "bucket"), CASES, ids=[f"{b}-{i}" for i, (_, b) in enumerate(CASES)])
def test_stack_lands_in_its_bucket(stack: str, bucket: str) -> None:
    assert classify(stack.split(";")) == bucket


# Any program's allocator, not only xferd-c's: memcached (Debian's, stripped: its own frames are [unknown])
# under a preload or glibc, Redis with its statically linked jemalloc, a C++ server, CPython. The frames are
# as perf wrote them for memcached 1.6 and python3.11 on this machine.
MC, PY = "(memcached)", "(python3.11)"
ANY_PROGRAM = [
    (f"[unknown] {MC};[unknown] {MC};malloc {LIBC};_int_malloc {LIBC}", "allocator"),
    (f"[unknown] {MC};__GI___libc_free {LIBC};_int_free_merge_chunk {LIBC}", "allocator"),
    (f"[unknown] {MC};[unknown] {MC};free {LIBC};munmap_chunk {LIBC}", "allocator"),
    (f"[unknown] {MC};[unknown] (libjemalloc.so.2)", "allocator"),
    (f"[unknown] {MC};tc_malloc (libtcmalloc_minimal.so.4.5.16)", "allocator"),
    (f"[unknown] {MC};mi_heap_malloc_small (libmimalloc.so.2.0)", "allocator"),
    ("main (redis-server);zmalloc (redis-server);je_malloc (redis-server);je_arena_ralloc (redis-server)",
     "allocator"),
    ("main (envoy);operator new(unsigned long) (libstdc++.so.6.0.30)", "allocator"),
    ("main (envoy);_ZdlPvm (libstdc++.so.6.0.30)", "allocator"),
    ("main (envoy);tcmalloc::CentralFreeList::Populate() (envoy)", "allocator"),
    (f"_PyEval_EvalFrameDefault {PY};PyBytes_FromStringAndSize {PY};_PyObject_Malloc {PY}", "allocator"),
    (f"_PyEval_EvalFrameDefault {PY};PyMem_RawMalloc {PY}", "allocator"),
    # memcached's own work lands beside: its unnamed frames and libevent's are other, its mutex a lock
    (f"[unknown] {MC};[unknown] {MC}", "other"),
    (f"[unknown] {MC};event_base_loop (libevent-2.1.so.7.0.1);evmap_io_active_ (libevent-2.1.so.7.0.1)", "other"),
    (f"[unknown] {MC};___pthread_mutex_lock {MC}", "locks"),
    (f"[unknown] {MC};lll_mutex_lock_optimized {MC}", "locks"),
    (f"[unknown] {MC};__libc_sendmsg {LIBC}", "syscall+net"),
    (f"[unknown] {MC};__memcpy_avx_unaligned_erms {MC}", "copy"),
    # names that only look like an allocator's stay out of it
    (f"[unknown] {MC};process_free_command {MC}", "other"),
    (f"_PyEval_EvalFrameDefault {PY};PyObject_GetAttr {PY}", "other"),
]


@pytest.mark.parametrize(("stack", "bucket"), ANY_PROGRAM, ids=[f"{b}-{i}" for i, (_, b) in enumerate(ANY_PROGRAM)])
def test_any_programs_allocator_frames_are_allocator(stack: str, bucket: str) -> None:
    assert classify(stack.split(";")) == bucket


def test_every_bucket_is_reached() -> None:
    assert {b for _, b in CASES} == set(BUCKETS)


def test_shares_sum_to_one_and_count_samples() -> None:
    folded = {stack: i + 1 for i, (stack, _) in enumerate(CASES)}
    att = attribute(folded)
    assert att.samples == sum(folded.values())
    assert sum(att.shares.values()) == pytest.approx(1.0)
    want_alloc = sum(n for s, n in folded.items() if dict(CASES)[s] == "allocator")
    assert att.counts["allocator"] == want_alloc
    assert att.to_json()["samples"] == att.samples


def test_empty_profile_has_zero_shares() -> None:
    att = attribute({})
    assert att.samples == 0 and set(att.shares.values()) == {0.0}


def test_parse_folded_adds_repeated_stacks_and_names_a_bad_line() -> None:
    assert parse_folded("a;b 2\n\na;b 3\nc 1\n") == {"a;b": 5, "c": 1}
    with pytest.raises(ValueError, match="line 2"):
        parse_folded("a;b 2\nno-count-here\n")


def test_perf_script_output_folds_leaf_last() -> None:
    lines = [
        "\t    7f00aa01 _int_malloc+0x1c (/usr/lib/x86_64-linux-gnu/libc.so.6)",
        "\t    7f00aa02 malloc+0x3e (/usr/lib/x86_64-linux-gnu/libc.so.6)",
        "\t      401000 mem_alloc+0x10 (/work/build/bin/xferd-c)",
        "",
        "\tffffffff81000 [unknown] ([kernel.kallsyms])",
        "\t      401000 mem_alloc+0x10 (/work/build/bin/xferd-c)",
        "",
        "\t    7f00aa01 _int_malloc+0x1c (/usr/lib/x86_64-linux-gnu/libc.so.6)",
        "\t    7f00aa02 malloc+0x3e (/usr/lib/x86_64-linux-gnu/libc.so.6)",
        "\t      401000 mem_alloc+0x10 (/work/build/bin/xferd-c)",
    ]
    folded = perf.fold(lines)
    assert folded == {
        "mem_alloc (xferd-c);malloc (libc.so.6);_int_malloc (libc.so.6)": 2,
        "mem_alloc (xferd-c);[unknown] ([kernel.kallsyms])": 1,
    }
    assert attribute(folded).counts["allocator"] == 3


def test_perf_script_inlined_frames_take_the_object_they_were_inlined_into() -> None:
    lines = [
        "\t          10a974 __libc_recv (/usr/lib/x86_64-linux-gnu/libc.so.6)",
        "\t           14d17 conn_read (inlined)",
        "\t           14d17 conn_wants (inlined)",
        "\t           14d17 loop_main (/work/build/bin/xferd-c)",
        "\t           891f4 start_thread (/usr/lib/x86_64-linux-gnu/libc.so.6)",
        "",
        "\t           14d17 tail_frame (inlined)",
    ]
    assert perf.fold(lines) == {
        "start_thread (libc.so.6);loop_main (xferd-c);conn_wants (xferd-c);conn_read (xferd-c);"
        "__libc_recv (libc.so.6)": 1,
        "tail_frame (inlined)": 1,  # nothing after it to take an object from: left as perf wrote it
    }
