"""What every Ribbit process shares (the kernel), and the web app in web/.

- web/: the Flask app (its factory, the webhook intake, the dashboard and the reviewer
  pages, /healthz and /metrics, their templates and static files). Only the web process
  and the ``ribbit`` command that serves it (cli.py, doctor.py's web checks) import it;
  the kernel below, the worker and the trainer never do (pyproject's import-linter
  contracts check it).
- Shared with the worker and the trainer: settings.py (the worker adds its sections in
  worker/settings.py; secret_strength.py judges the shared secrets it is given,
  settings_variables.py says which RIBBIT_* variables are settings),
  runtime.py (the database and the job store, built once per process), store/ (every
  table and every query over it, and the records both sides read), forges/ (the GitHub
  and GitLab clients), hostgit/ (host git), retrying.py (the retry loop),
  queue.py (hands the jobs to the worker fleet by task name), admission.py (who may ask
  for a job, also asked by the worker's slash commands), notify.py (posts alerts),
  joblinks.py and live.py (a job's signed reviewer link and its live log, written by the
  worker and read by the reviewer pages), model_lines.py (which model a repository
  trains and is served by), worker_heartbeats.py, logs.py and console.py;
  build_info.py: the build a process runs, and the process series both /metrics
  endpoints carry;
  job_json.py: a job as `ribbit jobs --json` prints it.
- cli.py: the ``ribbit`` command, the composition root. The worker's and the trainer's
  subcommands, their doctor checks (doctor.py, each result a doctor_check.py Check;
  forge_doctor.py asks each forge who its credentials are and their permission on a
  named repository), the settings class every process builds and the trainer's parts
  the web app offers (model_versions.py, env_validation.py) come in through pyproject's
  entry points. supervisor.py: `ribbit serve`'s embedded worker and beat, watched and
  restarted; extras.py: which optional extras this install has;
  cli_audit.py: who is acting in a command that changes state, and its audit row;
  cli_options.py: the flags that mean one thing in every command (--repo, --forge,
  --checkout);
  cli_errors.py: a failed command's one-line message and remedy (no traceback);
  github_app_cli.py with github_app_setup.py: `ribbit github-app create`, the GitHub App
  registered from Ribbit's manifest.

bot/ imports neither worker/ nor trainer/ (pyproject's import-linter contracts check it).
"""
