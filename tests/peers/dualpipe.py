"""Bidirectional DualPipe's compute order, traced from deepseek-ai/DualPipe
``dualpipe/dualpipe.py`` at commit 3da1bbea53606543d7f5f232338fc58096db30e3 (MIT).

``trace(num_ranks, num_chunks)`` runs the body of ``DualPipe.step`` (steps 1 to 8, their loop
counts and conditions unchanged) with its compute helpers replaced by recorders:

* ``_forward_compute_chunk(phase)``, ``_backward_compute_chunk(phase, enable_zb)`` and
  ``_forward_backward_compute_chunk(phase0, phase1)`` (the overlapped path, taken when the
  modules provide ``overlapped_forward_backward``) keep DualPipe's per-direction counters
  ``current_f_chunk_id`` / ``current_b_chunk_id`` after ``phase ^= is_in_second_half``;
* a backward with ``enable_zb`` defers its weight gradient (``WeightGradStore.flush``) and
  ``_weight_chunk`` runs the oldest deferred one (``WeightGradStore.pop``, FIFO);
* sends, receives and waits are left out: they do not change the compute order.

Names in ppir's terms: rank r runs direction 0 (``module[0]``, entering at rank 0) as stage r
and direction 1 (``module[1]``, entering at the last rank) as stage 2*PP-1-r of a V placement
with two pipelines of PP stages each; a microbatch is numbered within its direction.  A full
backward is ``B``, a deferred one ``I`` then ``W``; an overlapped pair prints
``(sFm;tBn)OVERLAP_F_B``.
"""

from __future__ import annotations


class _Rank:
    def __init__(self, rank: int, num_ranks: int):
        self.rank, self.num_ranks = rank, num_ranks
        self.is_in_second_half = rank >= num_ranks // 2
        self.is_middle_rank = rank in (num_ranks // 2 - 1, num_ranks // 2)
        self.current_f_chunk_id = [0, 0]
        self.current_b_chunk_id = [0, 0]
        self.weight_queue: list[str] = []
        self.out: list[str] = []

    def _stage(self, direction: int) -> int:
        return self.rank if direction == 0 else 2 * self.num_ranks - 1 - self.rank

    def _forward_text(self, phase: int) -> str:
        phase ^= self.is_in_second_half
        chunk_id = self.current_f_chunk_id[phase]
        self.current_f_chunk_id[phase] += 1
        return f"{self._stage(phase)}F{chunk_id}"

    def _backward_text(self, phase: int, enable_zb: bool) -> str:
        phase ^= self.is_in_second_half
        chunk_id = self.current_b_chunk_id[phase]
        self.current_b_chunk_id[phase] += 1
        stage = self._stage(phase)
        if enable_zb:
            self.weight_queue.append(f"{stage}W{chunk_id}")
            return f"{stage}I{chunk_id}"
        return f"{stage}B{chunk_id}"

    # the step's helpers, compute only
    def _forward_chunk(self, phase, recv=True, send=True):
        self.out.append(self._forward_text(phase))

    def _backward_chunk(self, phase, enable_zb=False, recv=True, send=True):
        self.out.append(self._backward_text(phase, enable_zb))

    def _forward_backward_chunk(self, phase0, phase1, recv0=True):
        f = self._forward_text(phase0)
        b = self._backward_text(phase1, False)
        self.out.append(f"({f};{b})OVERLAP_F_B")

    def _weight_chunk(self):
        assert self.weight_queue, "Pop empty queue."
        self.out.append(self.weight_queue.pop(0))

    def _recv_forward(self, phase):
        pass

    def _send_forward(self, phase):
        pass

    def _send_backward(self, phase):
        pass

    def step(self, num_chunks: int) -> list[str]:
        rank = self.rank
        num_ranks = self.num_ranks
        assert num_ranks % 2 == 0
        assert num_chunks > 0 and num_chunks % 2 == 0 and num_chunks >= num_ranks * 2
        num_half_ranks = num_ranks // 2
        half_rank = min(rank, num_ranks - 1 - rank)
        half_num_chunks = num_chunks // 2

        # Step 1: nF0
        step_1 = (num_half_ranks - half_rank - 1) * 2
        for _ in range(step_1):
            self._forward_chunk(0)

        # Step 2: nF0F1
        step_2 = half_rank + 1
        self._recv_forward(0)
        for i in range(step_2):
            self._forward_chunk(0, recv=False, send=self.is_middle_rank)
            self._recv_forward(0)
            self._forward_chunk(1, send=(not self.is_middle_rank) or (i < step_2 - 1))
            if not self.is_middle_rank:
                self._send_forward(0)

        # Step 3: nB1W1F1 (Use zero bubble)
        step_3 = num_half_ranks - half_rank - 1
        for _ in range(step_3):
            self._backward_chunk(1, enable_zb=True)
            self._recv_forward(1)
            self._weight_chunk()
            self._forward_chunk(1, recv=False)

        # Step 4 (Main step): nF0B1F1B0
        step_4 = half_num_chunks - num_ranks + half_rank + 1
        for i in range(step_4):
            if i == 0:
                if self.is_middle_rank:
                    # NOTE: We don't overlap these two chunks to further reduce bubble size.
                    self._forward_chunk(0, recv=False, send=False)
                    self._send_forward(1)
                    self._backward_chunk(1, send=False)
                    self._send_forward(0)
                    self._send_backward(1)
                else:
                    self._forward_backward_chunk(0, 1, recv0=False)
            else:
                self._forward_backward_chunk(0, 1)
            self._forward_backward_chunk(1, 0)

        # Step 5: nB1F1B0
        step_5 = num_half_ranks - half_rank - 1
        for _ in range(step_5):
            self._backward_chunk(1)
            self._forward_backward_chunk(1, 0)

        # Step 6: nB1B0 (The second half of the chunks use zero bubble)
        step_6 = half_rank + 1
        enable_zb = False
        for i in range(step_6):
            if i == step_6 // 2 and half_rank % 2 == 1:
                enable_zb = True
            self._backward_chunk(1, enable_zb=enable_zb)
            if i == step_6 // 2 and half_rank % 2 == 0:
                enable_zb = True
            self._backward_chunk(0, enable_zb=enable_zb)

        # Step 7: nWB0 (Use zero bubble)
        step_7 = num_half_ranks - half_rank - 1
        for _ in range(step_7):
            self._weight_chunk()
            self._backward_chunk(0, enable_zb=True)

        # Step 8: nW
        step_8 = half_rank + 1
        for _ in range(step_8):
            self._weight_chunk()
        assert not self.weight_queue
        return self.out


def trace(num_ranks: int, num_chunks: int) -> list[list[str]]:
    """Every rank's compute items in DualPipe's order (see the module docstring)."""
    return [_Rank(r, num_ranks).step(num_chunks) for r in range(num_ranks)]
