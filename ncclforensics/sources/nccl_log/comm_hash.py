"""Communicator hashes as NCCL computes them, and as the `comm` column spells them."""

from __future__ import annotations

_SIXTY_FOUR = (1 << 64) - 1


def child_comm_hash(parent: int, child_count: int, color: int) -> int:
    """The commHash NCCL >= 2.26.2 gives a communicator split (or shrunk: color 0) from `parent` (bitops.h).

    Checked against NCCL's own code (nccl_formats.md §4.5): child_comm_hash(0x3f2a9c1b7d4e8a06, 1, 0) is
    0x823c12e5e79ad0fe.
    """

    def eat(acc: list[int], data: bytes) -> list[int]:
        a0, a1 = acc
        size, i = len(data), 0
        a0 ^= size
        while size:
            a0 = (a0 + a1) & _SIXTY_FOUR
            a1 ^= a0
            a0 ^= a0 >> 31
            a0 = (a0 * 0x9DE62BBC8CEF3CE3) & _SIXTY_FOUR
            a1 ^= a1 >> 32
            a1 = (a1 * 0x485CD6311B599E79) & _SIXTY_FOUR
            n = min(size, 8)
            a0 = (a0 + int.from_bytes(data[i : i + n], "little")) & _SIXTY_FOUR
            i += n
            size -= n
        return [a0, a1]

    acc = eat([1, 1], (parent & _SIXTY_FOUR).to_bytes(8, "little"))
    acc = eat(acc, (child_count & 0xFFFFFFFF).to_bytes(4, "little"))
    acc = eat(acc, (color & 0xFFFFFFFF).to_bytes(4, "little"))
    h = acc[0]
    h ^= h >> 31
    h = (h * 0xBAC3BD562846DE6B) & _SIXTY_FOUR
    h = (h + acc[1]) & _SIXTY_FOUR
    h ^= h >> 32
    return (h * 0x995A187A14E7B445) & _SIXTY_FOUR


def hash_name(value: int) -> str:
    """A commHash as the `comm` column spells it: lowercase, `0x` and 16 digits."""
    return f"0x{value:016x}"
