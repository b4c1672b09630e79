try:
    from .cli import run
except KeyboardInterrupt:  # Ctrl-C while Python is still importing the grader: nothing has started yet
    raise SystemExit(130) from None

run()
