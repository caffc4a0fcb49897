"""`helios view`: a local web viewer of run folders (runs, trials, trajectories).

The server (`server`) answers a JSON API (`api`) and serves the static front end
(`static/`); it reads run folders through `roots` (which files may be served),
`runs` (what a run folder is and its state), `records` (a run's results.jsonl, read
by byte offset) and `trial` / `steps` (one trial's files and its ATIF trajectory).
"""
