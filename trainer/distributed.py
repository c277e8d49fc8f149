"""Data-parallel ranks for the learner: who this process is and the few collectives it needs.

A run launched by ``torchrun --nproc-per-node N`` has N processes, each with the
whole model (LoRA, or a full fine-tune that fits on one device). Each rank
collects its share of a step's rollouts and backpropagates through its own
sequences; :class:`Ranks` then sums gradients and batch statistics across ranks so
that every rank takes the same optimizer step as one process would on the whole
batch. A single process is a group of one, for which every collective is a no-op
(so single-process training is unchanged, bit for bit).

Why not DDP: the learner runs forward and backward one sequence at a time with
batch-wide loss weights, and ranks may hold different numbers of sequences (a
rank may hold none). DDP all-reduces on every ``backward()`` and expects every
rank to call it the same number of times: it would all-reduce once per sequence,
or hang when the counts differ. Here gradients accumulate locally and are summed
once per update, in a few flat buckets.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
import torch.distributed as dist
from torch import Tensor

from trainer.rl.loss import BatchTotals

T = TypeVar("T")

# Elements per flat bucket: bounds the extra memory of an all-reduce (256 MiB of fp32).
BUCKET_ELEMENTS = 64 * 1024 * 1024


@dataclass(frozen=True)
class Ranks:
    """This process's place among the data-parallel ranks (the default process group)."""

    rank: int = 0
    world_size: int = 1

    @classmethod
    def detect(cls) -> Ranks:
        """The initialised default process group, or a single process."""
        if dist.is_available() and dist.is_initialized():
            return cls(dist.get_rank(), dist.get_world_size())
        return cls()

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that logs, writes checkpoints and touches the database."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    # -- collectives (no-ops for a single process) ---------------------------------------
    def barrier(self) -> None:
        if self.distributed:
            dist.barrier()

    def all_gather_object(self, obj: T) -> list[T]:
        """Every rank's ``obj`` (picklable), in rank order."""
        if not self.distributed:
            return [obj]
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def broadcast_object(self, obj: T) -> T:
        """Rank 0's ``obj`` on every rank."""
        if not self.distributed:
            return obj
        box: list[Any] = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def sum_(self, values: Tensor) -> Tensor:
        """All-reduce (SUM) in place; returns ``values``."""
        if self.distributed:
            dist.all_reduce(values, op=dist.ReduceOp.SUM)
        return values

    def all_reduce_totals(self, local: BatchTotals, device: torch.device) -> BatchTotals:
        """The totals of the batch made of every rank's part."""
        if not self.distributed:
            return local
        # float64: token counts stay exact integers far beyond float32's 2**24.
        counts = torch.tensor(
            [local.tokens, local.sequences, local.sequences_with_tokens],
            dtype=torch.float64,
            device=device,
        )
        length = torch.tensor([local.padded_length], dtype=torch.int64, device=device)
        dist.all_reduce(counts, op=dist.ReduceOp.SUM)
        dist.all_reduce(length, op=dist.ReduceOp.MAX)
        tokens, sequences, present = counts.tolist()
        return BatchTotals(
            tokens=tokens,
            sequences=round(sequences),
            sequences_with_tokens=round(present),
            padded_length=int(length.item()),
        )

    def broadcast_parameters_(self, params: Sequence[Tensor]) -> None:
        """Rank 0's values of ``params`` on every rank (LoRA's initialisation is random)."""
        if not self.distributed:
            return
        with torch.no_grad():
            for bucket in _buckets(list(params)):
                flat = torch.cat([p.detach().reshape(-1) for p in bucket])
                dist.broadcast(flat, src=0)
                _unflatten_into(flat, bucket)

    def sum_gradients_(self, params: Sequence[torch.nn.Parameter]) -> None:
        """All-reduce (SUM) the gradients of ``params``; afterwards every rank holds the
        same gradients, those one process would have accumulated over the whole batch.

        A parameter no rank computed a gradient for keeps ``grad = None`` everywhere
        (the optimizer then skips it, as in one process); where only some ranks did,
        the others contribute zeros. A rank with no samples at all takes part too."""
        if not self.distributed:
            return
        present = torch.tensor(
            [p.grad is not None for p in params],
            dtype=torch.int32,
            device=params[0].device if params else torch.device("cpu"),
        )
        dist.all_reduce(present, op=dist.ReduceOp.SUM)
        used = [p for p, n in zip(params, present.tolist(), strict=True) if n > 0]
        for p in used:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        grads: list[Tensor] = [p.grad for p in used if p.grad is not None]
        for bucket in _buckets(grads):
            flat = torch.cat([g.reshape(-1) for g in bucket])
            dist.all_reduce(flat, op=dist.ReduceOp.SUM)
            _unflatten_into(flat, bucket)


def _buckets(tensors: list[Tensor]) -> Iterator[list[Tensor]]:
    """``tensors`` in order, grouped by (dtype, device), each group cut at
    :data:`BUCKET_ELEMENTS`: torch.cat needs one dtype and device. The order is the same
    on every rank, so the ranks' buckets line up."""
    groups: dict[tuple[torch.dtype, torch.device], list[Tensor]] = {}
    for t in tensors:
        groups.setdefault((t.dtype, t.device), []).append(t)
    for group in groups.values():
        bucket: list[Tensor] = []
        size = 0
        for t in group:
            if bucket and size + t.numel() > BUCKET_ELEMENTS:
                yield bucket
                bucket, size = [], 0
            bucket.append(t)
            size += t.numel()
        if bucket:
            yield bucket


def _unflatten_into(flat: Tensor, tensors: list[Tensor]) -> None:
    offset = 0
    for t in tensors:
        n = t.numel()
        t.copy_(flat[offset : offset + n].view_as(t))
        offset += n


def launched_by_torchrun() -> bool:
    return int(os.environ.get("WORLD_SIZE", "1")) > 1 and "RANK" in os.environ


@contextlib.contextmanager
def process_group() -> Iterator[Ranks]:
    """The ranks of this run: joins the process group torchrun describes (RANK,
    WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT in the environment) for the duration, or
    a single process when not launched by it (or when a group already exists, which
    is then left as it was).

    NCCL on CUDA, each rank on the device LOCAL_RANK names; gloo on CPU."""
    if not launched_by_torchrun() or dist.is_initialized():
        yield Ranks.detect()
        return
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend="nccl")
    else:
        dist.init_process_group(backend="gloo")
    try:
        yield Ranks.detect()
    finally:
        dist.destroy_process_group()
