"""The process boundary: everything that touches student code, and the grader's handle on it.

Lowest layer: it imports nothing of `engine/`, `channels/` or `drills/`.

- wire.py       the codec: plain data only, every class refused
- protocol.py   what both sides agree on: errors, request labels, limits
- confine.py    the sandbox tiers (namespaces, landlock, users, none) and the Plan of one worker's view
- loader.py     an implementation folder loaded as a package, stand-ins patched in
- standins/     trusted stand-ins, one piece per part of the contract
- executor.py   the implementation's side: runs requests against a loaded package
- worker.py     a worker process: lock-down, then the request loop
- zygote.py     the fork server workers start from (`ZYGOTE`, one per grading process)
- spawner.py    workers started without fork (Windows, macOS, GRADER_WORKERS=spawn): `python -m grader.sandbox.worker`
- handle.py     the grader's side: a handle on one worker, and the executor that speaks through it
- reaper.py     ending whatever student code leaves running
- torch_setup.py  what torch needs done once before the zygote forks
"""
