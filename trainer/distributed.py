"""Data-parallel ranks for the learner: who this process is, the few collectives it
needs, and the sharding engine (PyTorch FSDP2, ``fully_shard``).

A run launched by ``torchrun`` (one node or several) has one process per device.
The learner's model is sharded over the ranks with FSDP2 (see :func:`shard`): each
rank keeps a 1/N slice of every parameter, gradient and optimizer state, parameters
are all-gathered layer by layer for forward and backward, and gradients are
reduce-scattered back to their owners. That is what lets a full-parameter run of
the 4B model spread its AdamW state over the GPUs; LoRA runs use the same path.
The choice, and why not DDP or a trainer framework, is in trainer/README.md.

:class:`Ranks` carries the object collectives the loop needs around the engine
(batch totals, rollout records, RNG states). A single process is a group of one, for
which every collective is a no-op and nothing is sharded (single-process training
is unchanged).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor

from trainer.rl.loss import BatchTotals

T = TypeVar("T")


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
        """Rank 0: the one that logs, writes the exported model and touches the database."""
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

    def max_int(self, value: int, device: torch.device) -> int:
        """The largest ``value`` over the ranks."""
        if not self.distributed:
            return value
        box = torch.tensor([value], dtype=torch.int64, device=device)
        dist.all_reduce(box, op=dist.ReduceOp.MAX)
        return int(box.item())

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
        """Rank 0's values of ``params`` on every rank, before sharding (LoRA's
        initialisation is random; ``fully_shard`` keeps each rank's own slice)."""
        if not self.distributed:
            return
        with torch.no_grad():
            for p in params:
                dist.broadcast(p.data, src=0)


# -- the engine: FSDP2 ---------------------------------------------------------------------
def mixed_precision() -> MixedPrecisionPolicy:
    """bf16 compute and all-gathers on a GPU, gradients reduced in fp32 (the sharded
    parameters keep the dtype the model was loaded with: load fp32 to have fp32 master
    weights). On the CPU, no casts: the CPU tests compare in float64."""
    if torch.cuda.is_available():
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    return MixedPrecisionPolicy()


def shard(root: nn.Module, layers: Iterable[nn.Module], ranks: Ranks) -> None:
    """Shard ``root`` over the ranks with FSDP2: each of ``layers`` (the decoder layers)
    is one unit, gathered only while it runs; the rest (embeddings, final norm, head)
    belongs to ``root``, which must be the module whose forward the learner calls.

    Gradients are summed, not averaged, over the ranks: each rank's loss already
    carries its share of the global batch's weights. No-op for a single process."""
    if not ranks.distributed:
        return
    policy = mixed_precision()
    for layer in layers:
        fully_shard(layer, mp_policy=policy)
    fully_shard(root, mp_policy=policy)
    for unit in root.modules():
        if isinstance(unit, FSDPModule):  # the settings are per unit, not inherited
            unit.set_gradient_divide_factor(1.0)
            # A plain SUM: otherwise fp32/bf16 gradients are reduced with PREMUL_SUM(1/1),
            # which gloo lacks (float64 takes another path, so only fp32 runs showed it).
            unit.set_force_sum_reduction_for_comms(True)


def is_sharded(module: nn.Module) -> bool:
    return isinstance(module, FSDPModule)


@contextlib.contextmanager
def gathered(root: nn.Module) -> Iterator[None]:
    """Every parameter of a sharded ``root`` whole on every rank for the duration, with
    no collective in any forward: for generation and no-grad scoring, where ranks run
    different numbers of forward passes (their own rollouts). Costs one full copy of
    the (compute-dtype) weights per rank. Every rank must enter it. No-op unsharded."""
    if not is_sharded(root):
        yield
        return
    units = [m for m in root.modules() if isinstance(m, FSDPModule)]
    for unit in units:
        unit.set_reshard_after_forward(False, recurse=False)
        unit.unshard()
    try:
        yield
    finally:
        for unit in units:
            unit.reshard()
            # FSDP2's defaults: layers free their gathered weights after forward; the
            # root keeps its own until backward (they are needed again at once).
            unit.set_reshard_after_forward(unit is not root, recurse=False)


def full_tensor(t: Tensor) -> Tensor:
    """The whole of a sharded tensor (a collective: every rank must call it), or ``t``."""
    return t.full_tensor() if isinstance(t, DTensor) else t


def launched_by_torchrun() -> bool:
    return int(os.environ.get("WORLD_SIZE", "1")) > 1 and "RANK" in os.environ


@contextlib.contextmanager
def process_group() -> Iterator[Ranks]:
    """The ranks of this run: joins the process group torchrun describes (RANK,
    WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT in the environment; one node or several)
    for the duration, or a single process when not launched by it (or when a group
    already exists, which is then left as it was).

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
        # Every rank done with its collectives before any tears the group down: a rank that
        # destroyed it while its peer's gloo threads still talked to it aborted the peer
        # ("terminate called without an active exception", exit -6) once in a CI run.
        dist.barrier()
    finally:
        dist.destroy_process_group()
