"""The rank watcher reaches the agent API it calls: ``inject`` and ``find_agent`` (a rename in the agent
package once left every rank with "no agent: module … has no attribute 'inject'", seen only by the slow
end-to-end tests)."""

from __future__ import annotations

import os

from gpudoctor.live.ranks import RankGroup
from gpudoctor.live.rankwatch import RankWatch


def test_the_default_agent_module_has_what_the_watcher_calls() -> None:
    watch = RankWatch(RankGroup(target_pid=os.getpid(), launcher_pid=None, ranks=(), world_size=None))
    watch._load_client_module()
    assert callable(watch._mod.inject) and callable(watch._mod.find_agent)
    assert watch._client(os.getpid()) is None          # no agent in this process: None, not an error
