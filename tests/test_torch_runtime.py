"""ppir schedules exported with the torch-csv backend run on torch's own runtime.

One launch of 2 gloo processes (CPU) runs several exported schedules through
``_PipelineScheduleRuntime._load_csv`` and ``step()``; every rank compares the gradients of the
stages it holds with a single-process full-batch reference.  Marked slow (process start-up and
importing torch dominate); run with ``pytest -m slow tests/test_torch_runtime.py``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

CASES = [  # (ppir built-in, parameters, torch CSV format)
    ("1f1b", {"P": 2, "M": 4}, "compute_only"),
    ("interleaved_1f1b", {"P": 2, "M": 4, "v": 2}, "compute_only"),
    ("interleaved_1f1b", {"P": 2, "M": 4, "v": 2}, "compute_comms"),
    ("interleaved_vshape", {"P": 2, "M": 4, "v": 2}, "compute_only"),
    ("dualpipev", {"P": 2, "M": 4}, "compute_only"),  # (a;b)OVERLAP_F_B cells
    ("dualpipev", {"P": 2, "M": 4}, "compute_comms"),
]

WORKER = r"""
import datetime, json, sys
import torch, torch.distributed as dist
from torch import nn
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

rank, port, cases = int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                        world_size=2, timeout=datetime.timedelta(seconds=60))
results = []
for case in cases:
    S, M, placement = case["stages"], case["M"], case["placement"]
    torch.manual_seed(0)
    blocks = [nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(S)]
    x, y = torch.randn(16, 8), torch.randn(16, 8)
    ref = nn.Sequential(*[nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(S)])
    ref.load_state_dict(nn.Sequential(*blocks).state_dict())
    nn.MSELoss()(ref(x), y).backward()
    mine = [s for s in range(S) if placement[s] == rank]
    stages = [PipelineStage(blocks[s], stage_index=s, num_stages=S, device=torch.device("cpu"))
              for s in mine]
    sched = _PipelineScheduleRuntime(stages, n_microbatches=M, loss_fn=nn.MSELoss())
    sched._load_csv(case["csv"], format=case["format"])
    kw = {}
    if 0 in mine:
        kw["args"] = (x,)
    if S - 1 in mine:
        kw.update(target=y, losses=[])
    sched.step(*kw.pop("args", ()), **kw)
    err = 0.0
    for s in mine:
        for p, q in zip(blocks[s].parameters(), ref[s].parameters()):
            err = max(err, (p.grad - q.grad).abs().max().item() / (q.grad.abs().max().item() or 1))
    results.append({"case": case["id"], "rank": rank, "stages": mine, "max_rel_err": err})
    dist.barrier()
print("RESULT " + json.dumps(results))
from ppir.torch.leave import leave
leave(0)  # not finalising: a gloo worker can abort it (ppir.torch.leave)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_exported_csv_runs_on_torch_runtime_with_reference_gradients(tmp_path, cli):
    from ppir.frontend.loader import load_schedule

    cases = []
    for i, (name, params, fmt) in enumerate(CASES):
        path = tmp_path / f"{i}_{name}_{fmt}.csv"
        defines = [a for k, v in params.items() for a in ("-D", f"{k}={v}")]
        code, _, err = cli(
            "compile",
            name,
            *defines,
            "--backend",
            "torch-csv",
            "--csv-format",
            fmt,
            "-o",
            str(path),
        )
        assert code == 0, err
        assert ("OVERLAP_F_B" in path.read_text()) == (name == "dualpipev")  # torch runs them
        s = load_schedule(name, params)
        cases.append(
            {
                "id": f"{name}/{fmt}",
                "csv": str(path),
                "M": s.microbatches,
                "stages": s.stages,
                "placement": list(s.placement),
                "format": fmt,
            }
        )
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    port = str(_free_port())
    env = dict(os.environ, OMP_NUM_THREADS="1")
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(r), port, json.dumps(cases)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=Path(__file__).parent,
        )
        for r in range(2)
    ]
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err[-3000:]
            outs.append(out)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    results = [
        r
        for out in outs
        for line in out.splitlines()
        if line.startswith("RESULT ")
        for r in json.loads(line[len("RESULT ") :])
    ]
    assert len(results) == 2 * len(CASES)
    for r in results:
        assert r["stages"], r
        assert r["max_rel_err"] < 1e-5, r
