"""Which tests `make test-fast` leaves out: the ones marked ``slow``.

A test may carry the mark itself; the integration modules below get it here, whole: each
starts a deployment (local forge, worker processes, sandboxes, the agent), trains a model,
builds images or virtual environments, drives a browser, or runs a corpus through real
sandboxes, and takes minutes. CI (`make test`) runs them all. The minutes per suite that
every run prints (tests/plugins/timing.py) say which module belongs here next.
"""

from __future__ import annotations

from pathlib import PurePosixPath

import pytest

SLOW_MODULES = frozenset(
    {
        # whole deployments: forge, worker processes, sandboxes and the agent
        "test_solve_end_to_end.py",
        "test_quickstart_e2e.py",
        "test_solve_faults.py",
        "test_solve_setup.py",
        "test_solve_malicious.py",
        "test_outsiders.py",
        "test_review_loop.py",
        "test_real_projects.py",
        "test_real_projects_e2e.py",
        "test_real_behaviour_change.py",
        "test_real_projects_groups.py",
        "test_real_fixes_corpus.py",
        # copy-installed real projects: their build backends from the registry
        "test_copy_install_backends.py",
        # real JavaScript projects: npm ci from the registry, then jest and tsc
        "test_real_js_runners.py",
        # forged runs on jshttp/cookie: npm ci from the registry, then mocha
        "test_real_js_attacks.py",
        "test_graceful_shutdown.py",
        "test_worker_down_notify.py",
        "test_served_versions.py",
        "test_promoted_model.py",
        "test_model_weights.py",
        # training
        "test_trainer_rollouts.py",
        "test_trainer_distributed.py",
        "test_trainer_cli.py",
        "test_server_rollouts.py",
        # images, stacks and virtual environments built from scratch
        "test_env_images.py",
        "test_deploy_helm.py",
        "test_deploy_helm_turnkey.py",
        "test_deploy_compose.py",
        "test_install_web_only.py",
        # a browser
        "test_dashboard_browser.py",
        "test_dashboard_actions_browser.py",
        "test_dashboard_live_browser.py",
        # the adversarial corpus through real sandboxes and Semgrep
        "test_gates_adversarial.py",
    }
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    slow = pytest.mark.slow
    for item in items:
        if PurePosixPath(item.nodeid.split("::", 1)[0]).name in SLOW_MODULES:
            item.add_marker(slow)
