"""The renderers of a finished run: the run directory's artifacts (`artifacts.write_all`: summary.csv, summary.md,
report.html), the terminal's and Markdown's tables, the HTML report and its charts, and `xferbench compare`."""
