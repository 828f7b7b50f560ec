"""`xferbench bench`: the project's headline figures side by side in one sitting, each a ratio to an anchor
measured in the same rounds (iperf3, ghz, bare grpc-go, glibc), appended as one JSON line to
bench/history.jsonl and compared with the previous record of the same machine class.

One concern per module: record (figures, machine, load, history file), compare (what moved beyond its
spread), render (the terminal table and BENCHMARKS.md's generated section), tools (pinned processes and the
anchors' drivers), cases (what each figure measures), command (the CLI)."""
