"""Pipelines per job kind; importing this package registers them with worker.jobs.

- solve.py: solve and revise, from an issue to a gated draft pull request; its parts:
  publish.py (commit, push, pull request, status, gate review), revision.py (what a revise
  job adds), trusted_text.py (the one rule for which forge text reaches a prompt: only
  writers', each named), issue_task.py (the task for an issue: which of its comments
  the prompt carries and the AgentTask, shared with environments built from merged
  fixes), held.py (whether the gates' report holds the patch back, and what the issue
  hears then), phases.py (what its phases hand each other, and the job's record of
  them) and workspace.py (the job's folder and stage clock); queued.py: what a
  waiting solve or revise job shows on the issue.
- slash_commands.py: ``/ribbit stop|retry|revise``; replies.py: help and explain, and
  the one write-access check the commands and solve share.
- outcomes.py: what finally happened to each bot pull request.
"""

from worker.pipelines import outcomes, queued, replies, slash_commands, solve  # noqa: F401
