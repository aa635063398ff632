"""Process labels of the build profile's CPU breakdown (lychee_ray.testing.cpu)."""

import os

from lychee_ray.testing.cpu import ProcessLabels, command_label, totals_by_label


def test_command_labels_name_actors_tasks_and_daemons():
    assert command_label("ray::MapWorker(MapBatches(EmbedTurnsStage)).submit ") == "ray::MapWorker(MapBatches(EmbedTurnsStage))"
    assert command_label("ray::MapWorker(MapBatches(CommitStage)) ") == "ray::MapWorker(MapBatches(CommitStage))"
    assert command_label("ray::_StatsActor.update_iteration_metrics") == "ray::_StatsActor"
    assert command_label("ray::ProgressActor") == "ray::ProgressActor"
    assert command_label("ray::datasets_stats_actor:_StatsActor.__init__") == "ray::datasets_stats_actor:_StatsActor"
    assert command_label("ray::IDLE ") is None  # not yet what it will become
    assert command_label("/usr/bin/python .../ray/_private/workers/default_worker.py --node-ip-address=x --raylet-name=y") is None
    assert command_label("/site-packages/ray/core/src/ray/raylet/raylet --raylet_socket_name=...") == "raylet"
    assert command_label("/site-packages/ray/core/src/ray/gcs/gcs_server --raylet_name=...") == "gcs_server"
    assert command_label("python -u /site-packages/ray/dashboard/agent.py --node-ip-address=...") == "dashboard_agent"
    assert command_label("python /x/y.py") is None


def test_labels_are_kept_and_summed():
    labels = ProcessLabels(driver_pid=os.getpid())
    labels.observe(os.getpid())
    assert labels.label(os.getpid()) == "driver" and labels.label(-1) == "other"
    got = totals_by_label({str(os.getpid()): 1.5, "-1": 0.25, "-2": 0.5}, labels)
    assert got == {"driver": 1.5, "other": 0.75} and list(got) == ["driver", "other"]
