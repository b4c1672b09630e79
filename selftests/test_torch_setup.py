"""What the grader does to torch before it forks workers (grader/sandbox/torch_setup.py) changes nothing a check sees."""
import subprocess
import sys
import textwrap

from grader.paths import ROOT

SCRIPT = textwrap.dedent("""
    import os, sys
    import torch
    from grader.sandbox.torch_setup import optimizers_without_dynamo, warm_kernels

    rng, dtype, grad = torch.get_rng_state(), torch.get_default_dtype(), torch.is_grad_enabled()
    optimizers_without_dynamo()
    warm_kernels()
    assert torch.equal(rng, torch.get_rng_state()), "the global generator moved"
    assert torch.get_default_dtype() == dtype and torch.is_grad_enabled() == grad
    assert "torch._dynamo" not in sys.modules, "torch._dynamo was imported (seconds in every grading)"
    pid = os.fork()
    if pid == 0:  # a forked worker computes as usual (it would wait forever on a thread pool started before)
        torch.randn(256, 256) @ torch.randn(256, 256)
        torch.softmax(torch.randn(64, 512), -1).sum()
        os._exit(0)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    print("ok")
""")


def test_warming_torch_up_leaves_no_trace_and_forks_cleanly():
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
