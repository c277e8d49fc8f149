#!/usr/bin/env bash
# Back up and restore Ribbit's state: the database (PostgreSQL, or SQLite inside the data
# dir), Redis (the broker's queue and the rollouts' results) and the data volume
# (trajectories, the trainer's environments, runs and adapters, the beat schedule).
#
#   scripts/backup.sh backup  DIR   # DIR must not exist yet
#   scripts/backup.sh restore DIR   # onto an empty data dir, database and Redis db
#
# Stop web, workers and beat first (deploy/README.md, "Upgrades and backups"): a copy of
# running services is not one moment in time. Settings come from the same variables the
# services read:
#   RIBBIT_DATA_DIR       the data volume (required)
#   RIBBIT_DATABASE_URL   postgresql[+psycopg]://...; unset: SQLite in the data dir, which
#                         the data dir's copy carries
#   RIBBIT_BROKER_URL     redis://host:port/db; unset: the embedded broker, in the data dir
#   PYTHON                a Python with the `redis` package (default: python3; Ribbit's venv
#                         or image has it)
#   PG_DUMP, PG_RESTORE   commands to run them (default pg_dump, pg_restore); they must be
#                         at least the server's major version, e.g.
#                         PG_DUMP="docker compose -f deploy/compose.yaml exec -T postgres pg_dump"
#   RIBBIT_BACKUP_FORCE=1 restore over a data dir that is not empty (it is emptied first)
#
# Not backed up: DATA_DIR/models (base weights; `ribbit model pull` fetches and verifies
# them again) and DATA_DIR/work (clones of running jobs).
set -euo pipefail

usage() {
  echo "usage: $0 backup DIR | restore DIR" >&2
  exit 2
}
die() {
  echo "backup.sh: $*" >&2
  exit 1
}

[ $# -eq 2 ] || usage
cmd=$1
dir=$2
data_dir=${RIBBIT_DATA_DIR:?set RIBBIT_DATA_DIR to the data volume}
db_url=${RIBBIT_DATABASE_URL:-}
broker_url=${RIBBIT_BROKER_URL:-}
python=${PYTHON:-python3}
read -r -a pg_dump <<<"${PG_DUMP:-pg_dump}"
read -r -a pg_restore <<<"${PG_RESTORE:-pg_restore}"

# SQLAlchemy's driver suffix means nothing to libpq: postgresql+psycopg:// -> postgresql://
libpq_url() { sed -E 's#^postgres(ql)?\+[a-z0-9_]+://#postgresql://#' <<<"$1"; }
is_postgres() { [[ $1 =~ ^postgres(ql)?(\+[a-z0-9_]+)?:// ]]; }
is_redis() { [[ $1 =~ ^rediss?:// ]]; }

# Redis keys of one logical database, value and time-to-live, as JSON lines (DUMP/RESTORE:
# any type, byte for byte). A restore empties that database first.
redis_state() {
  "$python" - "$@" <<'PY'
import base64, json, sys
import redis

action, url, path = sys.argv[1:]
r = redis.Redis.from_url(url)
if action == "dump":
    with open(path, "w") as out:
        for key in r.scan_iter(count=1000):
            value = r.dump(key)
            if value is None:  # expired meanwhile
                continue
            ttl = r.pttl(key)
            out.write(json.dumps({
                "key": base64.b64encode(key).decode(),
                "ttl_ms": ttl if ttl > 0 else 0,
                "value": base64.b64encode(value).decode(),
            }) + "\n")
else:
    r.flushdb()
    n = 0
    with open(path) as src:
        for line in src:
            item = json.loads(line)
            r.restore(base64.b64decode(item["key"]), item["ttl_ms"],
                      base64.b64decode(item["value"]), replace=True)
            n += 1
    print(f"restored {n} Redis keys")
PY
}

backup() {
  [ -e "$dir" ] && die "$dir exists; give a new folder"
  [ -d "$data_dir" ] || die "data dir $data_dir does not exist"
  mkdir -p "$dir"
  if is_postgres "$db_url"; then
    "${pg_dump[@]}" --format=custom --no-owner --dbname="$(libpq_url "$db_url")" >"$dir/postgres.dump"
  elif [ -n "$db_url" ] && [[ $db_url != sqlite* ]]; then
    die "cannot back up database $db_url (PostgreSQL or SQLite only)"
  fi
  if is_redis "$broker_url"; then
    redis_state dump "$broker_url" "$dir/redis.jsonl"
  elif [ -n "$broker_url" ]; then
    die "cannot back up broker $broker_url (Redis, or unset for the embedded broker)"
  fi
  tar -C "$data_dir" --exclude=./models --exclude=./work -czf "$dir/data.tar.gz" .
  (cd "$dir" && sha256sum -- postgres.dump redis.jsonl data.tar.gz 2>/dev/null >SHA256SUMS || true)
  grep -q data.tar.gz "$dir/SHA256SUMS" || die "could not checksum $dir"
  echo "backed up to $dir: $(cd "$dir" && ls | tr '\n' ' ')"
}

restore() {
  [ -f "$dir/SHA256SUMS" ] || die "$dir has no SHA256SUMS: not a backup made by this script"
  (cd "$dir" && sha256sum --quiet --strict -c SHA256SUMS) || die "$dir is damaged or changed"
  [ -f "$dir/data.tar.gz" ] || die "$dir has no data.tar.gz"
  if [ -f "$dir/postgres.dump" ] && ! is_postgres "$db_url"; then
    die "the backup holds a PostgreSQL dump; set RIBBIT_DATABASE_URL to restore it"
  fi
  if [ -f "$dir/redis.jsonl" ] && ! is_redis "$broker_url"; then
    die "the backup holds Redis keys; set RIBBIT_BROKER_URL to restore them"
  fi
  mkdir -p "$data_dir"
  # The base weights (models/) stay: they are not in the backup.
  if [ -n "$(ls -A "$data_dir" | grep -vx models || true)" ]; then
    [ "${RIBBIT_BACKUP_FORCE:-}" = 1 ] || die "$data_dir is not empty (RIBBIT_BACKUP_FORCE=1 empties it)"
    find "$data_dir" -mindepth 1 -maxdepth 1 ! -name models -exec rm -rf -- {} +
  fi
  tar -C "$data_dir" -xzf "$dir/data.tar.gz"
  if [ -f "$dir/postgres.dump" ]; then
    # One transaction: a restore that fails half-way leaves the database as it was.
    "${pg_restore[@]}" --clean --if-exists --no-owner --single-transaction --exit-on-error \
      --dbname="$(libpq_url "$db_url")" <"$dir/postgres.dump"
  fi
  if [ -f "$dir/redis.jsonl" ]; then
    redis_state restore "$broker_url" "$dir/redis.jsonl"
  fi
  echo "restored from $dir; now run \`ribbit db upgrade\` if this is a newer Ribbit"
}

case $cmd in
  backup) backup ;;
  restore) restore ;;
  *) usage ;;
esac
