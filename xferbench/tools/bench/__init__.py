"""`xferbench bench`: the project's headline figures side by side in one sitting, each a ratio to an anchor
measured in the same rounds (iperf3, ghz, bare grpc-go, glibc, socat's TLS), appended as one JSON line to
bench-records/history.jsonl and compared with the previous record of the same machine class (or any two records,
`--compare`).

One concern per module: record (figures and their rounds, machine, load, history file), compare (what moved:
a permutation test over the rounds and each figure's own A/A spread), render (the terminal table and
BENCHMARKS.md's generated section), tools (pinned processes and the anchors' drivers), cases (what each figure
measures; tlscase the TLS ones), command (the CLI and its list of cases)."""
