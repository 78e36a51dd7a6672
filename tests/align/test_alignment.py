import numpy as np

from ncclforensics.align.alignment import DELETION, DIFFERENT, INSERTION, SUBSTITUTION, explain, first_difference


def arr(*xs):
    return np.array(xs, dtype=np.uint64)


def test_shape_equal_insertion_gives_the_whole_run_as_range():
    # consensus: 40 x A then B then A...; outlier has one extra A somewhere in the first 41
    base = [1] * 40 + [2] + [1] * 8
    outlier = [1] * 41 + [2] + [1] * 8
    edit = explain(arr(*outlier), arr(*base))
    assert edit.kind == INSERTION and edit.size == 1
    assert edit.at == 40 and edit.earliest == 0  # anywhere among the first 41


def test_distinct_token_pins_insertion():
    base = [1] * 24 + [1] * 16 + [2] + [1] * 8
    outlier = [1] * 24 + [9] + [1] * 16 + [2] + [1] * 8
    edit = explain(arr(*outlier), arr(*base))
    assert (edit.kind, edit.at, edit.earliest, edit.size) == (INSERTION, 24, 24, 1)
    assert edit.confirmed == 25


def test_dropped_collective_is_a_deletion():
    base = [1, 2, 3, 4, 5, 6, 7]
    dropped = [1, 2, 4, 5, 6, 7]
    edit = explain(arr(*dropped), arr(*base))
    assert (edit.kind, edit.at, edit.size, edit.earliest) == (DELETION, 2, 1, 2)


def test_substitution_and_unexplained():
    assert explain(arr(1, 2, 9, 4, 5), arr(1, 2, 3, 4, 5)).kind == SUBSTITUTION
    assert explain(arr(1, 2, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), arr(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)).kind in (
        DIFFERENT, SUBSTITUTION)


def test_equal_streams_and_trailing_extra():
    assert first_difference(arr(1, 2), arr(1, 2)) is None
    edit = explain(arr(1, 1, 1, 1), arr(1, 1, 1))
    assert edit.kind == INSERTION and edit.at == 3 and edit.earliest == 0


def test_swapped_collective_with_equal_lengths_is_a_substitution():
    # type-mismatch capture: rank 1 issued an AllGather where the others issued an AllReduce, same lengths
    others = [1] * 16 + [1, 1]
    swapped = [1] * 16 + [7, 1]
    edit = explain(arr(*swapped), arr(*others))
    assert (edit.kind, edit.at, edit.size) == (SUBSTITUTION, 16, 1)
