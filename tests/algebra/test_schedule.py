"""Stream schedules: no two concurrent streams write one block of C (paper, Sec. s:task)."""

import pytest

from strassenbench.algebra.primitives import primitives
from strassenbench.algebra.schedule import makespan_lower_bound, schedule


def test_one_level_two_streams_is_the_papers_table():
    """Figure tab:gpu_streaming: stage 0 = M1, M5 on [0] and M4, M6 on [1]; stage 1 = M2 | M3; stage 2 = M0."""
    sched = schedule("strassen", 1, 2)
    stages = [[[p.name for p in lane] for lane in stage.streams] for stage in sched.stages]
    assert stages == [[["M1", "M5"], ["M4", "M6"]], [["M2"], ["M3"]], [["M0"]]]
    assert sched.makespan == makespan_lower_bound("strassen", 1) == 4


def test_rows_follow_launch_order():
    rows = schedule("strassen", 1, 2).rows()
    assert [(r["stage"], r["stream"], r["product"].name) for r in rows] == [
        (0, 0, "M1"), (0, 1, "M4"), (0, 0, "M5"), (0, 1, "M6"), (1, 0, "M2"), (1, 1, "M3"), (2, 0, "M0"),
    ]


@pytest.mark.parametrize("algorithm", ["strassen", "winograd", "classical"])
@pytest.mark.parametrize("levels", [1, 2])
@pytest.mark.parametrize("streams", range(1, 9))
def test_schedule_is_valid(algorithm, levels, streams):
    sched = schedule(algorithm, levels, streams)
    scheduled = [p.name for stage in sched.stages for lane in stage.streams for p in lane]
    assert sorted(scheduled) == sorted(p.name for p in primitives(algorithm, levels)), "each product exactly once"
    for stage in sched.stages:
        assert 1 <= len(stage.streams) <= streams
        owned = [set().union(*(p.writes for p in lane)) for lane in stage.streams]
        for i in range(len(owned)):
            for j in range(i + 1, len(owned)):
                assert not owned[i] & owned[j], f"streams {i} and {j} of one stage write a common C block"
    assert makespan_lower_bound(algorithm, levels) <= sched.makespan <= len(scheduled)
    if streams == 1:
        assert sched.makespan == len(scheduled)


def test_two_level_reaches_lower_bound_with_four_streams():
    assert schedule("strassen", 2, 4).makespan == makespan_lower_bound("strassen", 2) == 16


def test_more_streams_never_hurt():
    spans = [schedule("strassen", 2, s).makespan for s in range(1, 9)]
    assert spans == sorted(spans, reverse=True)
    assert spans[1] < 49


def test_streams_must_be_positive():
    with pytest.raises(ValueError, match="streams"):
        schedule("strassen", 1, 0)
