"""The database: every table Ribbit keeps, mapped here next to the Alembic migrations
(migrations/), and every query over them, as named methods that return mapped rows or
typed records. No module outside bot/store/ and trainer/store.py builds a query
(tests/unit/test_architecture.py checks it).

- db.py: the engine, sessions and transactions; migrate (under a lock) and where a
  database's schema stands against the migrations (bot/runtime.py decides what to do).
- tables.py, jobs/, outcomes.py, payloads.py: repositories, deliveries, jobs (JobStore,
  with its state machine and the kill switch), outcomes (OutcomeStore), and the typed
  payload each job kind carries; kinds.py: the job-kind table (each kind's Celery task,
  payload, whether it runs the agent and is on the dashboard).
- records/: the typed records that cross processes (a solve job's record and its parts,
  the gates' report, the agent's trajectory, an outcome and its review feedback), which
  the worker writes and the admin pages, the trainer and the annotations read back;
  tolerant.py: how they read a stored value of the wrong type (as absent);
  failure.py: why a job failed (what, its output's tail, who can fix it), stored once
  and rendered the same on the issue, the pages and the CLI;
  pr_verdicts.py: the verdict (and its judge) each of Ribbit's PRs carries.
- training.py: the trainer's tables (environments, runs, model versions) and what the
  worker and the dashboard read of them (TrainingStore); the trainer's own queries are
  in trainer/store.py.
- audit.py, admin_sessions.py, heartbeats.py, notifications.py, noise.py, validations.py:
  the audit log of admin actions (dashboard and CLI), the dashboard's sessions, worker
  heartbeats, notifications sent, noise pauses, and environment re-validations.
- broker.py: the one write to the embedded broker's (kombu's) tables that the web
  process's sender makes itself, a batch of messages in one statement.
"""
