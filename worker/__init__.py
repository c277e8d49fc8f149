"""Ribbit's worker: runs the jobs the web side stored, in Celery processes.

- celery_app.py, tasks.py: the Celery app and its thin tasks; jobs.py: one job's
  lifecycle (claim, heartbeat, cancellation, end), with the pipelines (pipelines/:
  solve with its publish and revision steps, slash commands, replies, outcomes)
  registered by job kind; first_contact.py: a repository's first job creates the
  trigger label there if it is missing.
- cli.py: `ribbit worker` (shutdown.py bounds its warm shutdown); each task's process
  builds its bot.runtime.Runtime once (celery_app.runtime_for). outcomes_cli.py:
  `ribbit outcomes`; prs_cli.py with rejudge.py: `ribbit prs rejudge` (open drafts an
  older judge passed re-labelled unverified); doctor.py: `ribbit doctor`'s sandbox,
  model and Semgrep checks (``ribbit.doctor`` entry points).
- metrics.py: the workers' Prometheus metrics (jobs, stages, gates, model, sandboxes).
- agent/: the agent loop, its tools, prompts and policies (see agent/README.md).
- sandbox/: where untrusted commands run (Docker/Podman or bubblewrap), the setup step
  (setup.py, setupcmd.py) and the environment cache.
- gates/: what a patch must pass before it becomes a draft PR (tests, Semgrep,
  hygiene); host git goes through bot/hostgit/.
- settings.py: WorkerSettings, bot's Settings plus the sandbox, model, agent and gates
  sections (registered as the ``ribbit.settings`` entry point, so every ``ribbit``
  process builds it).
- repo_config.py: a repository's ``.ribbit.yml``; model_choice.py, weights.py: which model
  version a job uses and the base weights on disk; status.py, noise.py: the issue's
  status comment and noise pauses; maintenance.py: periodic repairs (Celery beat).

The worker builds on bot/ (settings, store, forges), never the other way: bot/ hands it
jobs by task name (bot/queue.py), and pyproject's import-linter contracts check it.
"""
